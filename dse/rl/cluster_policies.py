"""Heuristic schedulers for dse.rl.cluster_env, expressed as the nodes' joint actions.

One family, `Scheduler(order, size, preempt, blocking)`, each choice a gene the cross-entropy method can learn
(dse.rl.cluster_cem); the baselines are members of it:

* `fifo`: first come, first served, head-of-line blocking, each job on the nodes it asks for;
* `srf`: shortest remaining time first (at the job's start nodes), backfilling what fits;
* `las`: Tiresias' discretised two-dimensional least-attained-service (Gu et al., NSDI'19): two queues
  split at one node-hour of attained GPU time, first come first served within a queue, a job of the
  higher queue preempted for a waiting job of the lower one (preempting takes one interval; the freed
  nodes start jobs at the next);
* `greedy`: jobs in arrival order, each given the node count at which dse.training's iteration model
  (its search's fastest strategy, dp scaled: dse.rl.cluster_costs) finishes it soonest among the nodes
  idle, then idle nodes grow running jobs by the largest gain in tokens per second.

Orders: ``arrival``; ``remaining`` (hours left at the start nodes); ``weighted`` (hours left / priority);
``attained`` (Tiresias' queues). Sizes: ``requested`` (what the job asks for), ``fastest`` (then grown by
idle nodes, `Scheduler._grow`). ``preempt``: preempt running jobs the order ranks after a waiting job
that does not fit; ``blocking``: no job starts past a first one that does not fit. Actions are planned so that the
simulator, acting node by node in index order, drops none: each action's node is the lowest idle one and
its gang the next lowest (dse.rl.cluster_sim).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ORDERS = ("arrival", "remaining", "weighted", "attained")
SIZES = ("requested", "fastest")
LAS_THRESHOLD_NODE_S = 3600.0           # Tiresias' queue threshold: one node-hour of attained GPU time


@dataclass(frozen=True)
class Scheduler:
    """A scheduling rule (module docstring); call it with the environment to get each node's action."""

    order: str = "arrival"
    size: str = "requested"
    preempt: bool = False
    blocking: bool = False

    def __call__(self, env) -> np.ndarray:
        sim = env.sim
        actions = np.zeros(sim.N, np.int64)
        idle = list(np.flatnonzero(sim.node_job < 0))
        leaving = self._preemptions(env, actions) if self.preempt else set()
        slots = {j: w for w, j in enumerate(sim.queue[:sim.W])}
        for j in sorted(slots, key=lambda j: self._key(env, j)):
            n = int(sim.start_nodes[j])
            if n > len(idle) or j in leaving:
                if self.blocking:
                    break
                continue
            actions[idle[0]] = 1 + slots[j]
            del idle[:n]
        if self.size == "fastest":
            self._grow(env, actions, idle)
        return actions

    def _key(self, env, j: int):
        sim = env.sim
        if self.order == "arrival":
            return (j,)
        if self.order == "attained":
            return (int(sim.attained[j] >= LAS_THRESHOLD_NODE_S * sim.gpn), j)
        hours = env.hours_left(j, int(sim.start_nodes[j]))
        return (hours / sim.priority[j] if self.order == "weighted" else hours, j)

    def _preemptions(self, env, actions) -> set[int]:
        """Running jobs the order ranks after (its key's first part: Tiresias' queue, hours left, arrival)
        the first waiting job that does not fit: every node of each leaves (at the job's minimum the leave
        preempts it). Returns the jobs preempted."""
        sim = env.sim
        idle = int((sim.node_job < 0).sum())
        waiting = sorted(sim.queue, key=lambda j: self._key(env, j))
        out = set()
        for j in waiting:
            need = int(sim.start_nodes[j]) - idle
            if need <= 0:
                idle -= int(sim.start_nodes[j])
                continue
            victims = sorted((k for k in sim.running if self._key(env, k)[0] > self._key(env, j)[0]),
                             key=lambda k: self._key(env, k), reverse=True)
            freed = 0
            for k in victims:
                if freed >= need:
                    break
                actions[sim.node_job == k] = sim.n_actions - 1
                out.add(k)
                freed += int(sim.nodes_of[k])
            break                    # one waiting job at a time: the rest next interval
        return out

    def _grow(self, env, actions, idle: list) -> None:
        """Idle nodes join the running jobs, each unit of nodes where it gains the most tokens per second,
        until no job gains (each at its fastest node count) or no node is idle."""
        sim = env.sim
        slots = {j: r for r, j in enumerate(sim.running[:sim.R])}
        size = {j: int(sim.nodes_of[j]) for j in slots}
        while idle:
            best, gain = None, 0.0
            for j, n in size.items():
                c = sim.cost_of[j]
                u = c.shape.unit
                if u > len(idle) or not c.allowed(n + u):
                    continue
                g = c.rate(n + u).tokens_per_s / c.rate(n).tokens_per_s - 1.0
                if g > gain:
                    best, gain = j, g
            if best is None:
                return
            u = sim.cost_of[best].shape.unit
            actions[idle[0]] = 1 + sim.W + slots[best]
            del idle[:u]
            size[best] += u


def fifo() -> Scheduler:
    return Scheduler(order="arrival", blocking=True)


def srf() -> Scheduler:
    return Scheduler(order="remaining")


def las() -> Scheduler:
    return Scheduler(order="attained", preempt=True)


def greedy() -> Scheduler:
    return Scheduler(order="arrival", size="fastest")


HEURISTICS = {"FIFO": fifo, "shortest remaining first": srf, "Tiresias LAS": las,
              "greedy fastest (dse.training search)": greedy}


def run(env, policy, seed: int) -> tuple[float, dict, int]:
    """(return of one agent, the episode's metrics, agent-steps) of ``policy(env) -> actions`` from
    ``env.reset(seed=seed)``."""
    env.reset(seed=seed)
    total, steps = 0.0, 0
    agent = env.possible_agents[0]
    info = {}
    while env.agents:
        actions = policy(env)
        step = env.step({a: int(actions[i]) for i, a in enumerate(env.possible_agents)})
        rewards, infos = step[1], step[4]            # PettingZoo: obs, rewards, terminations, truncations, infos
        total += rewards[agent]
        steps += len(rewards)
        info = infos[agent]
    return total, info.get("metrics", env.metrics()), steps
