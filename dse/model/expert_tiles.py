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
import pandas as pd
from scipy.stats import binom

import arch

#: equal-probability points of an expert's token count (mid-quantiles, given it runs)
POINTS = 8
_SCALED = ("flops", "act_in_bytes", "act_out_bytes", "tokens")
#: operator columns that say where a row sits in the model, not what it computes: rows equal in every other
#: column (and in their token-count distribution) cost the same, so each such row is costed once
_PLACE = ("unit", "prob", "layers", "expert", "layer")


def count_points(tokens: float, q: float, points: int = POINTS) -> np.ndarray:
    """Mid-quantiles of n ~ Binomial(round(tokens), q) given n >= 1 (``points`` of them, each 1 / points
    of the probability)."""
    return count_points_many(np.array([tokens], float), np.array([q], float), points)[0]


def count_points_many(tokens: np.ndarray, q: np.ndarray, points: int = POINTS) -> np.ndarray:
    """`count_points` of many (tokens, q) pairs at once: [pairs, points], one binomial quantile call."""
    T = np.maximum(np.rint(tokens), 1.0).astype(np.int64)
    q = np.asarray(q, float)
    p0 = np.array([(1.0 - p) ** int(t) for p, t in zip(q, T)])       # as the scalar pow, bit for bit
    u = p0[:, None] + (1.0 - p0)[:, None] * (np.arange(points) + 0.5) / points
    quantiles = np.maximum(binom.ppf(u, T[:, None], q[:, None]), 1.0)
    return np.where((q >= 1.0)[:, None], T[:, None].astype(float), quantiles)


def expert_matrix_rows(wl) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, route tokens, selection probability) of the routed experts' matrix operators of ``wl``."""
    nodes = wl.graph.nodes
    ops = wl.ops
    unit_of_row, names = pd.factorize(ops["unit"].to_numpy())
    attrs = [nodes[u] for u in names.tolist()]       # each unit's attributes, looked up once
    expert = np.array([d["kind"] == "expert" for d in attrs], dtype=bool)[unit_of_row]
    rows = np.flatnonzero(expert & (ops["engine"].to_numpy() == "matrix") & (ops["M"].to_numpy(float) > 0))
    unit = unit_of_row[rows]
    q_unit = np.zeros(len(names))
    tokens_unit = np.zeros(len(names))
    present = np.unique(unit)
    q_unit[present] = [float(attrs[i]["selection_prob"]) for i in present.tolist()]
    tokens_unit[present] = [float(attrs[i]["tokens"]) for i in present.tolist()]
    q, tokens = q_unit[unit], tokens_unit[unit]
    with np.errstate(divide="ignore", invalid="ignore"):
        route = np.where(q > 0, tokens / np.where(q > 0, q, 1.0), 0.0)
    keep = (q > 0) & (route >= 1.0)
    return rows[keep], route[keep], q[keep]


def expected_costs(wl, chiplets, precision: str, costs):
    """``costs`` (arch.op_costs of ``wl.ops``) with the routed experts' matrix rows replaced by their
    expected cost over each expert's token count (module docstring); returns ``costs``. Each distinct row
    (operator columns but `_PLACE`, and token-count distribution) is costed once and copied to its rows."""
    rows, route, q = expert_matrix_rows(wl)
    if not len(rows):
        return costs
    pairs, pair_of = np.unique(np.column_stack([np.maximum(np.rint(route), 1.0), q]), axis=0,
                               return_inverse=True)
    pair_of = pair_of.reshape(-1)
    ops = wl.ops.iloc[rows].reset_index(drop=True)
    key = ops.drop(columns=[c for c in _PLACE if c in ops.columns]).assign(_pair=pair_of)
    group = key.groupby(list(key.columns), sort=False, dropna=False).ngroup().to_numpy()
    first = np.unique(group, return_index=True)[1]                               # one row per group, in order
    distinct = ops.iloc[first]
    counts = count_points_many(pairs[:, 0], pairs[:, 1])[pair_of[first]]         # [distinct, POINTS]
    scale = counts / distinct["M"].to_numpy(float)[:, None]
    expanded = distinct.loc[distinct.index.repeat(POINTS)].reset_index(drop=True)
    expanded["M"] = counts.ravel()
    for col in _SCALED:
        expanded[col] = expanded[col].to_numpy(float) * scale.ravel()
    spread = arch.op_costs(expanded, chiplets, precision)
    for field in ("time_s", "energy_j", "dram_bytes", "sram_bytes", "utilisation", "overlap_steps"):
        values = getattr(spread, field).reshape(len(first), POINTS, -1)
        getattr(costs, field)[rows] = values.mean(axis=1)[group]
    return costs
