"""The cluster scheduler's reward: weighted completion time, energy and utilisation, each a share in [0, 1]
per interval so that ``reward_weights`` (dse.rl.reward_weights) compare like with like.

Per interval of ``interval_s`` seconds every agent gets the same (cooperative) reward::

    r = -(w_time T + w_energy E + w_utilisation (1 - U))

* T: the priority-weighted job-seconds spent in the system (waiting or running) over the interval,
  divided by the stream's total priority times the interval. Summed over an episode: the
  priority-weighted mean job completion time, in intervals.
* E: the cluster's energy over the interval (training jobs, stopped jobs and idle nodes:
  dse.rl.cluster_sim) over what every device would draw at its power limit (the chiplet's
  ``power_limit_w``; the largest job power per device where it has none). Summed: the episode's energy
  in intervals of the whole cluster at its power limit.
* U: the cluster's model FLOP utilisation over the interval (each job's MFU from dse.training.iteration
  times its devices and kept share of wall time, over every device). 1 - U is the capacity left unused;
  summed: the makespan in intervals less the work done (which a stream fixes), so it rewards a short
  makespan and efficient degrees.

So weights 1, 1 and 1 trade one interval of the mean job's completion time against one interval of the
whole cluster at its power limit and one interval of the whole cluster idle. The default (time 1) is the
weighted completion time alone.
"""
from __future__ import annotations


def step_terms(advance: dict, total_priority: float, devices: int, reference_w: float, interval_s: float
               ) -> dict[str, float]:
    """(T, E, 1 - U) of one interval from dse.rl.cluster_sim.ClusterSim.advance's figures."""
    return {"time": advance["in_system_s"] / (total_priority * interval_s),
            "energy": advance["energy_j"] / (devices * reference_w * interval_s),
            "utilisation": 1.0 - advance["mfu_device_s"] / (devices * interval_s)}


def reward(terms: dict[str, float], weights: dict[str, float]) -> float:
    """Minus the weighted sum of the interval's terms (module docstring)."""
    return -(weights["time"] * terms["time"] + weights["energy"] * terms["energy"]
             + weights["utilisation"] * terms["utilisation"])
