"""The workload graph's per-unit and per-edge figures as arrays, each node and edge read once.

`dse.model.tables.build_tables` reads seven attributes of every unit (DeepSeek-V3 per layer: 14,972
units) and four figures of every hand-off (29,819 edges). Looking each attribute up through the graph
per unit, and walking the edges twice, took about 0.1 s of the study's preparation; here each node's
attribute dict is fetched once and each column is one pass over those dicts. The figures are the same
numbers in the same order (the Python products and the float conversions of before), so the tables are
bit for bit what the per-unit reading gave (tests/test_prepare_arrays.py keeps that reading as reference).
"""
from __future__ import annotations

from operator import itemgetter

import numpy as np


def unit_columns(graph, units: list[str], batch, context, tokens_per_step: float, kinds: tuple) -> dict:
    """Per-unit arrays of `EvalTables` read from the graph's nodes, in ``units`` order: kind (index into
    ``kinds``), stage, stored weight bytes, KV cache bytes (per token x ``batch`` x ``context``), run and
    selection probabilities, routed tokens (`route_tokens`), and each unit's tensor-parallel shards."""
    nodes = graph.nodes
    attrs = [nodes[u] for u in units]
    kind_index = {k: i for i, k in enumerate(kinds)}
    return dict(
        unit_kind=np.array([kind_index[k] for k in map(itemgetter("kind"), attrs)]),
        unit_stage=np.array(list(map(itemgetter("stage"), attrs))),
        unit_capacity_bytes=np.array(list(map(itemgetter("weight_bytes"), attrs)), dtype=float),
        unit_kv_bytes=np.array([kv * batch * context for kv in map(itemgetter("kv_bytes_per_token"), attrs)]),
        unit_prob=np.array(list(map(itemgetter("prob"), attrs)), dtype=float),
        unit_selection=np.array(list(map(itemgetter("selection_prob"), attrs)), dtype=float),
        unit_route_tokens=np.array([route_tokens(d, tokens_per_step) for d in attrs], dtype=float),
        shards=np.array([int(d.get("shards", 1)) for d in attrs], dtype=np.int64))


def edge_columns(graph, index: dict, shards: np.ndarray, n_units: int) -> dict:
    """Per-edge arrays (source and destination unit indices, bytes per occurrence, occurrences per step,
    collective steps: `sync_steps`) in the graph's edge order, and each unit's output bytes (the largest
    hand-off it sends; 0 when it sends none)."""
    edges = list(graph.edges(data=True))
    src = np.array([index[a] for a, _, _ in edges], dtype=float).astype(np.int64)
    dst = np.array([index[b] for _, b, _ in edges], dtype=float).astype(np.int64)
    nbytes = np.array([d["bytes"] for _, _, d in edges], dtype=float)
    out_bytes = np.zeros(n_units)
    np.maximum.at(out_bytes, src, nbytes)
    return dict(edge_src=src, edge_dst=dst, edge_bytes=nbytes,
                edge_repeat=np.array([d["repeat"] for _, _, d in edges], dtype=float),
                edge_sync_steps=sync_steps(shards[src], shards[dst]), unit_out_bytes=out_bytes)


def sync_steps(src_shards: np.ndarray, dst_shards: np.ndarray) -> np.ndarray:
    """Steps of the collective a hand-off between chiplets is: between t shards of both units an
    all-reduce (a ring: reduce-scatter then all-gather, 2(t - 1) steps), from t shards into one unit a
    reduce (t - 1 steps), otherwise one send (Thakur, Rabenseifner & Gropp, IJHPCA 2005)."""
    t = src_shards.astype(float)
    return np.where(t > 1, np.where(dst_shards > 1, 2.0 * (t - 1.0), t - 1.0), 1.0)


def route_tokens(node: dict, default: float) -> float:
    """Tokens that pass the unit's router in a step: its expected tokens over its selection probability
    (an ensemble member sees only the requests routed to it)."""
    q = node.get("selection_prob", 1.0)
    if "tokens" in node and q > 0:
        return float(node["tokens"]) / min(q, 1.0)
    return float(default)
