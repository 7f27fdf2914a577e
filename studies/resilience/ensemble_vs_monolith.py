"""An ensemble against one monolithic model on the same failing cluster (issue 37; docs/training.md).

16,384 H100s (DGX H100 nodes) fail at Meta's Llama 3 405B rates, per GPU and per node (Dubey et al.,
"The Llama 3 Herd of Models", 2024, Table 5: 268 of the 419 unexpected interruptions in 54 days on
16,384 GPUs were the GPUs', 151 the 2,048 hosts', network and software's). The monolith, Llama-3-70B
(70.6 B parameters), trains on all of them as one synchronous job: any failure stops it and rolls it back
to its last checkpoint. The ensemble, eight Llama-3-8B members (8 x 8.0 B = 64.2 B), trains each member
on 2,048 of them as a job of its own: a failure stops one member and costs only that member's work
since its last checkpoint. Both checkpoint to Tectonic at Daly's interval and restart in 10 minutes plus
the reload (dse.training.resilience). Run it with:

    python studies/resilience/ensemble_vs_monolith.py
"""
from __future__ import annotations

import workloads
from dse.training import Strategy, iteration, layer_costs, load_system
from dse.training.resilience import job_failure_rate, nodes_of, plan, resilience_from

CLUSTER = 16_384
MEMBERS = 8
#: failures per day of one GPU and of one node (with its network and software), Llama 3's Table 5
RATES = {"device_per_day": 268 / (16_384 * 54), "node_per_day": 151 / (2_048 * 54)}
COMMON = dict(seq=8192, micro_batch=1, zero=1, sequence_parallel=True, recompute="selective")
JOBS = {
    # name: (model, jobs, strategy of one job)
    "monolith: Llama-3-70B": ("llama-3-70b", 1, Strategy(tp=8, pp=4, dp=512, global_batch=4096, interleave=5,
                                                         **COMMON)),
    "ensemble: 8 x Llama-3-8B": ("llama-3-8b", MEMBERS, Strategy(tp=2, pp=1, dp=1024, global_batch=2048,
                                                                 **COMMON)),
}


def compare(storage: str = "tectonic", restart_minutes: float = 10.0) -> list[dict]:
    """One row per way of training: the job's figures and the whole cluster's."""
    system = load_system("dgx-h100-80gb")
    rows = []
    for name, (model, jobs, s) in JOBS.items():
        cfg = workloads.load_model(model)
        costs = layer_costs(cfg, system, s)
        it = iteration(cfg, system, s, costs)
        params = costs.dense_params + costs.expert_params
        nodes = nodes_of(s, system)
        r = resilience_from(storage=storage, restart_minutes=restart_minutes, system_rates=RATES,
                            devices=s.devices, nodes=nodes)
        p = plan(r, it.iteration_s, params, s, system)
        frac = p.effective_training_frac
        rows.append({"training": name, "params_b": params * jobs / 1e9, "gpus_per_job": s.devices, "mfu": it.mfu,
                     "failures_per_day_per_job": job_failure_rate(RATES, s.devices, nodes) * 86_400,
                     "checkpoint_interval_s": p.checkpoint_interval_s, "checkpoint_write_s": p.checkpoint_write_s,
                     "lost_work_per_failure_s": p.lost_work_per_failure_s, "effective_training_frac": frac,
                     "gpu_hours_lost_per_day": (1.0 - frac) * s.devices * jobs * 24.0,
                     "cluster_goodput_tokens_per_s": it.tokens_per_s * frac * jobs,
                     "cluster_goodput_pflops": it.model_tflops_per_device * s.devices * jobs * frac / 1e3})
    return rows


def main() -> None:
    rows = compare()
    keys = list(rows[0])[1:]
    print(f"{'':26}" + "".join(f"{r['training']:>27}" for r in rows))
    for key in keys:
        print(f"{key:26}" + "".join(f"{r[key]:>27,.3f}" if isinstance(r[key], float) else f"{r[key]:>27,}"
                                    for r in rows))


if __name__ == "__main__":
    main()
