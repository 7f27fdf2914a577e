"""Which experts a batch of tokens touches: per-token selection probabilities and their consequences.

A router picks ``k`` distinct experts of ``E`` for each token. We describe a layer's routing by
``q[e]``, the probability that a token selects expert ``e`` (``sum(q) == k``, ``0 <= q <= 1``).
From it follow, for a batch of ``T`` independent tokens:

* expected tokens at expert ``e``: ``T * q[e]``;
* probability the expert is touched at all: ``1 - (1 - q[e]) ** T``;
* expected distinct experts touched: the sum of the above, which for uniform routing is the
  closed form ``E * (1 - (1 - k/E) ** T)`` (shared/reference/workloads.md).
"""
from __future__ import annotations

import numpy as np

from .errors import WorkloadError

DISTRIBUTIONS = ("uniform", "zipf")


def _cap_at_one(weights: np.ndarray, k: int) -> np.ndarray:
    """Scale popularity weights to selection probabilities summing to k, none above 1.

    Mass above 1 (an expert cannot be picked twice by one token) is redistributed to the others in
    proportion to their weights, repeatedly until no probability exceeds 1.
    """
    q = np.zeros_like(weights, dtype=float)
    free = np.ones(weights.size, dtype=bool)
    budget = float(k)
    while True:
        q[free] = budget * weights[free] / weights[free].sum()
        over = free & (q > 1.0)
        if not over.any():
            return q
        q[over] = 1.0
        free &= ~over
        budget = k - q[~free].sum()


def selection_probabilities(experts: int, top_k: int, distribution: str = "uniform", s: float = 1.0,
                            seed: int = 0, layer: int = 0) -> np.ndarray:
    """Per-token selection probability of each expert of one MoE layer.

    ``zipf``: popularity of the expert of rank r is proportional to ``r ** -s``; which expert holds which
    rank is a random permutation drawn from ``seed`` and ``layer`` (popularity is layer-dependent).
    """
    if top_k > experts:
        raise WorkloadError(f"top-k {top_k} exceeds the {experts} experts of a layer")
    if distribution == "uniform":
        return np.full(experts, top_k / experts)
    if distribution == "zipf":
        if s < 0:
            raise WorkloadError(f"routing.s must be >= 0, got {s}")
        ranks = np.arange(1, experts + 1, dtype=float)
        popularity = ranks ** -s
        rng = np.random.default_rng([seed, layer])
        return _cap_at_one(popularity[rng.permutation(experts)], top_k)
    raise WorkloadError(f"unknown routing distribution {distribution!r}; allowed: {', '.join(DISTRIBUTIONS)}")


def touch_probability(q: np.ndarray, tokens: float) -> np.ndarray:
    """Probability that each expert receives at least one of ``tokens`` independent tokens."""
    return 1.0 - (1.0 - np.asarray(q, dtype=float)) ** tokens


def expected_distinct_experts(q: np.ndarray, tokens: float) -> float:
    """Expected number of distinct experts a batch of ``tokens`` touches."""
    return float(touch_probability(q, tokens).sum())
