"""Expert popularity over a scenario's windows (dse.runtime.scenario.PopularitySpec), as one
relabelling of each MoE layer's experts per window (dse.runtime.mapping: ``q_w[i] = q[perm_w[i]]``).

``rotate``: at time t the ranks have advanced ``floor(rate_per_s * t)`` experts (mod the layer's
experts): the hot set rotates through the experts at a steady rate. ``random_walk``: in each window each
layer makes Poisson(``rate_per_s * window``) swaps of two experts' popularities drawn uniformly (seeded):
which experts are hot wanders while the popularity shape stays the study's (Zipf, Dirichlet, trace)."""
from __future__ import annotations

import numpy as np

from .scenario import PopularitySpec


def window_perms(spec: PopularitySpec, sizes: list[int], starts: list[float],
                 lengths: list[float]) -> list[list[np.ndarray]]:
    """For each window, each layer's relabelling (``sizes``: experts per layer)."""
    if spec.drift == "rotate":          # one list per shift, one array per layer size and shift (shared)
        shifts = [int(np.floor(spec.rate_per_s * t + 1e-9)) for t in starts]
        arrays = {(n, s): (np.arange(n) + s) % n for s in set(shifts) for n in set(sizes)}
        lists = {s: [arrays[n, s] for n in sizes] for s in set(shifts)}
        return [lists[s] for s in shifts]
    current = [np.arange(n) for n in sizes]
    if spec.drift == "none":
        return [current for _ in starts]
    rng = np.random.default_rng(spec.seed)
    out = []
    for w, length in enumerate(lengths):
        if w:
            current = [p.copy() for p in current]
            for p in current:
                for _ in range(rng.poisson(spec.rate_per_s * lengths[w - 1])):
                    a, b = rng.choice(len(p), size=2, replace=False)
                    p[a], p[b] = p[b], p[a]
        out.append(current)
    return out
