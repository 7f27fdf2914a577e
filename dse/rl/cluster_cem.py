"""The cross-entropy method (dse.rl.cem) learning a cluster scheduler: a distribution over the genes of
`dse.rl.cluster_policies.Scheduler` (order, size, preemption, blocking), each rule scored by its mean
return over training streams (their seeds; evaluate on others). The heuristics are members of the
family, so the method chooses among them and their mixtures by the environment's own reward.
"""
from __future__ import annotations

import numpy as np

from .cem import cross_entropy, masked_choice
from .cluster_policies import ORDERS, SIZES, Scheduler, run

FIELDS = ("order", "size", "preempt", "blocking")
GENES = (ORDERS, SIZES, (False, True), (False, True))
WIDTH = max(len(g) for g in GENES)


def scheduler(genes) -> Scheduler:
    """The rule of one gene vector (an index into each of GENES)."""
    return Scheduler(**{f: GENES[i][int(g)] for i, (f, g) in enumerate(zip(FIELDS, genes))})


def cluster_rollout(env, seeds):
    """Rollouts for `cross_entropy`: each episode draws genes and scores the rule by its mean return on
    the streams of ``seeds`` (rules met before are not played again: the environment is deterministic)."""
    masks = np.array([[i < len(g) for i in range(WIDTH)] for g in GENES])
    seen: dict[tuple, float] = {}

    def rollout(probs, n, rng):
        actions = np.zeros((n, len(GENES)), np.int64)
        scores = np.zeros(n)
        for k in range(n):
            genes = tuple(masked_choice(probs[t], masks[t], rng) for t in range(len(GENES)))
            if genes not in seen:
                seen[genes] = float(np.mean([run(env, scheduler(genes), s)[0] for s in seeds]))
            actions[k], scores[k] = genes, seen[genes]
        return actions, scores
    rollout.seen = seen
    return rollout


def learn(env, seeds, iterations: int = 4, population: int = 8, seed: int = 0):
    """(the best rule found, dse.rl.cem.CEMResult, rules played)."""
    rollout = cluster_rollout(env, seeds)
    result = cross_entropy(rollout, len(GENES), WIDTH, iterations, population, seed=seed)
    return scheduler(result.best_actions), result, len(rollout.seen)
