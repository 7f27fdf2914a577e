"""Routed experts' GEMMs at the token counts routing gives them: the expected cost over each expert's
token-count distribution instead of the cost at its mean count.

Each of a step's T tokens selects expert e with probability q_e (workloads.routing), so the expert
receives n ~ Binomial(T, q_e) tokens, and when it runs (n >= 1) its GEMMs have M = n rows. A chiplet's
matrix engine computes whole tiles (arch.gpu: ceil(M / Mt) row tiles per expert; a systolic array's
folds), so each expert's rows are rounded up to whole tiles at its own count: grouped MoE kernels pad
every expert's rows to whole blocks (vLLM's ``moe_align_block_size`` allots ``T k + E (block - 1)`` rows,
Megablocks' padded gather rounds each expert to its block, Gale et al., MLSys 2023, 5.1). The cost at
the mean count (what the operator table holds) misses that padding whenever the count spreads over a
tile boundary, which at uneven counts it does for most experts.

The expected cost is taken over `POINTS` equal-probability points of n given n >= 1 (mid-quantiles of the
binomial), each row costed by arch.op_costs at M = n with its activations scaled to n; a step's time,
energy and traffic of the expert GEMMs are their mean. Rows of every other operator keep their cost.
"""
from __future__ import annotations

import numpy as np
from scipy.stats import binom

import arch

#: equal-probability points of an expert's token count (mid-quantiles, given it runs)
POINTS = 8
_SCALED = ("flops", "act_in_bytes", "act_out_bytes", "tokens")


def count_points(tokens: float, q: float, points: int = POINTS) -> np.ndarray:
    """Mid-quantiles of n ~ Binomial(round(tokens), q) given n >= 1 (``points`` of them, each 1 / points
    of the probability)."""
    T = max(int(round(tokens)), 1)
    if q >= 1.0:
        return np.full(points, float(T))
    p0 = (1.0 - q) ** T
    u = p0 + (1.0 - p0) * (np.arange(points) + 0.5) / points
    return np.maximum(binom.ppf(u, T, q), 1.0)


def expert_matrix_rows(wl) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, route tokens, selection probability) of the routed experts' matrix operators of ``wl``."""
    nodes = wl.graph.nodes
    ops = wl.ops
    units = ops["unit"].to_numpy()
    expert = np.array([nodes[u]["kind"] == "expert" for u in units], dtype=bool)
    rows = np.flatnonzero(expert & (ops["engine"].to_numpy() == "matrix") & (ops["M"].to_numpy(float) > 0))
    q = np.array([float(nodes[units[r]]["selection_prob"]) for r in rows])
    tokens = np.array([float(nodes[units[r]]["tokens"]) for r in rows])
    with np.errstate(divide="ignore", invalid="ignore"):
        route = np.where(q > 0, tokens / np.where(q > 0, q, 1.0), 0.0)
    keep = (q > 0) & (route >= 1.0)
    return rows[keep], route[keep], q[keep]


def expected_costs(wl, chiplets, precision: str, costs):
    """``costs`` (arch.op_costs of ``wl.ops``) with the routed experts' matrix rows replaced by their
    expected cost over each expert's token count (module docstring); returns ``costs``."""
    rows, route, q = expert_matrix_rows(wl)
    if not len(rows):
        return costs
    ops = wl.ops.iloc[rows]
    counts = np.stack([count_points(t, p) for t, p in zip(route, q)])          # [rows, POINTS]
    scale = counts / ops["M"].to_numpy(float)[:, None]
    expanded = ops.loc[ops.index.repeat(POINTS)].reset_index(drop=True)
    expanded["M"] = counts.ravel()
    for col in _SCALED:
        expanded[col] = expanded[col].to_numpy(float) * scale.ravel()
    spread = arch.op_costs(expanded, chiplets, precision)
    for field in ("time_s", "energy_j", "dram_bytes", "sram_bytes", "utilisation", "overlap_steps"):
        values = getattr(spread, field).reshape(len(rows), POINTS, -1)
        getattr(costs, field)[rows] = values.mean(axis=1)
    return costs
