"""Chiplet-to-chiplet traffic of one design in one step, from the workload graph and the placement.

The model is the one the evaluator uses for hand-offs (dse.model.hand_offs.stage_hand_offs):

* every graph edge ``a -> b`` carries ``bytes`` per occurrence, ``repeat`` occurrences per step, and
  runs with the probability of the stage of ``b``;
* a unit with c copies (replicas) splits what it sends evenly over its copies, and the receiving unit's
  c' copies each take 1/c' of it; shards (one-to-many mappings) all-reduce first, so only the first
  shard sends, and every shard of the receiver needs the whole input;
* shards of a unit all-reduce their output with a ring: each shard sends ``2 (c - 1)`` chunks of
  ``D / c`` bytes to the next shard, once per layer instance (D = the unit's output bytes).

Bytes between copies on the same chiplet stay on the chiplet and never reach the package network.
Link loads follow the package's routes (noc.route: XY on a mesh or torus, shortest paths on a graph).
"""
from __future__ import annotations

from itertools import chain
from typing import NamedTuple

import numpy as np
import pandas as pd

import noc

from ..errors import StudyError
from ..study.space import SPLIT_MAPPINGS, Design
from .tables import EvalTables

FLOW_COLUMNS = ["src_unit", "dst_unit", "src_slot", "dst_slot", "kind", "edge", "bytes_per_occurrence",
                "occurrences_per_step", "bytes_per_step"]

def _slots(design: Design, unit: str) -> list[int]:
    try:
        return list(design.placement[unit])
    except KeyError:
        raise StudyError(f"the design places no copy of unit {unit!r}; every unit of the workload needs a slot",
                         key="placement") from None


def _slot_lists(design: Design, names: list[str], units: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first index, count) of each unit's slots in the flat slot array (the third), for ``units`` (indices into
    ``names``, each looked up in that order, so a missing unit is reported as the edge loop met it)."""
    start = np.zeros(len(names), dtype=np.int64)
    count = np.zeros(len(names), dtype=np.int64)
    units = np.asarray(units, np.int64)
    missing = object()
    lists = [design.placement.get(names[u], missing) for u in units.tolist()]
    for u, slots in zip(units.tolist(), lists):
        if slots is missing:
            _slots(design, names[u])                # the first unit without slots, named
    held = np.fromiter(map(len, lists), np.int64, len(lists))
    start[units], count[units] = np.cumsum(held) - held, held
    return start, count, np.fromiter(chain.from_iterable(lists), np.int64, int(held.sum()))


def unit_flows(design: Design, tables: EvalTables) -> pd.DataFrame:
    """Every (sender copy, receiver copy) flow of one step, expected bytes (see module docstring).

    ``edge`` is the flow's edge in the tables' edge arrays (-1 for an all-reduce). Built with whole-array
    operations: edge by edge, each sender copy, then each receiver copy."""
    h = _hand_offs(design, tables)
    e = h.edge
    label = np.array(tables.unit_names, dtype=object)
    src_u, dst_u = np.asarray(tables.edge_src, np.int64), np.asarray(tables.edge_dst, np.int64)
    flows = pd.DataFrame({
        "src_unit": label[src_u[e]], "dst_unit": label[dst_u[e]], "src_slot": h.src_slot, "dst_slot": h.dst_slot,
        "kind": np.full(len(e), "hand-off", dtype=object), "edge": e, "bytes_per_occurrence": h.share,
        "occurrences_per_step": h.occurrences, "bytes_per_step": h.share * h.occurrences}, columns=FLOW_COLUMNS)
    rows = _ring_rows(design, tables)
    if not rows:
        return flows if len(flows) else pd.DataFrame([], columns=FLOW_COLUMNS)
    rings = pd.DataFrame(rows, columns=FLOW_COLUMNS)
    return pd.concat([flows, rings], ignore_index=True) if len(flows) else rings


class _HandOffs(NamedTuple):
    """`unit_flows`' hand-off rows as arrays."""
    edge: np.ndarray
    src_slot: np.ndarray
    dst_slot: np.ndarray
    share: np.ndarray           # bytes per occurrence
    occurrences: np.ndarray     # occurrences per step


def _hand_offs(design: Design, tables: EvalTables) -> _HandOffs:
    """`unit_flows`' hand-off rows (sender copy, receiver copy) as arrays."""
    split = design.mapping in SPLIT_MAPPINGS
    names = tables.unit_names
    src_u, dst_u = np.asarray(tables.edge_src, np.int64), np.asarray(tables.edge_dst, np.int64)
    start, count, flat = _slot_lists(design, names, pd.unique(np.column_stack([src_u, dst_u]).ravel()))
    senders = np.minimum(count[src_u], 1) if split else count[src_u]
    receivers = count[dst_u]
    with np.errstate(divide="ignore", invalid="ignore"):               # a unit with no copy sends nothing
        share = tables.edge_bytes / senders / (1.0 if split else receivers)
    occurrences = tables.edge_repeat * tables.stage_prob[tables.unit_stage[dst_u]]
    per_edge = senders * receivers
    e = np.repeat(np.arange(len(src_u)), per_edge)
    k = np.arange(len(e)) - np.repeat(np.cumsum(per_edge) - per_edge, per_edge)     # position in the edge's block
    return _HandOffs(e, flat[start[src_u[e]] + k // receivers[e]], flat[start[dst_u[e]] + k % receivers[e]], share[e],
                     occurrences[e])


def _ring_rows(design: Design, tables: EvalTables) -> list[tuple]:
    """`unit_flows`' all-reduce rows (shards of a split mapping pass chunks round a ring)."""
    rows = []
    if design.mapping not in SPLIT_MAPPINGS:
        return rows
    for u, name in enumerate(tables.unit_names):
        ring = _slots(design, name)
        c = len(ring)
        if c < 2:
            continue
        s = tables.unit_stage[u]
        occurrences = tables.stage_repeat[s] * tables.stage_prob[s]
        chunk_bytes = 2.0 * (c - 1) * tables.unit_out_bytes[u] / c
        for r in range(c):
            rows.append((name, name, ring[r], ring[(r + 1) % c], "all-reduce", -1, chunk_bytes, occurrences,
                         chunk_bytes * occurrences))
    return rows


def chiplet_traffic(design: Design, tables: EvalTables) -> np.ndarray:
    """Expected bytes per step from chiplet i to chiplet j (N x N, zero diagonal): `unit_flows`' bytes per
    step summed in its row order, read from its arrays without building its table (DeepSeek-V3 per layer:
    about 100,000 flows, whose unit-name columns cost more than the sums)."""
    n = design.rows * design.cols
    traffic = np.zeros((n, n))
    h = _hand_offs(design, tables)
    src, dst, amount = h.src_slot, h.dst_slot, h.share * h.occurrences
    rows = _ring_rows(design, tables)
    if rows:
        src = np.concatenate([src, np.array([r[2] for r in rows], np.int64)])
        dst = np.concatenate([dst, np.array([r[3] for r in rows], np.int64)])
        amount = np.concatenate([amount, np.array([r[8] for r in rows], float)])
    off_chip = src != dst
    np.add.at(traffic, (src[off_chip], dst[off_chip]), amount[off_chip])
    return traffic


def package_routes(design: Design, package):
    """The package network of the design's shape (``PackageSpec.network``) and its routes (noc.route)."""
    topology = package.network(design.rows, design.cols)
    return topology, noc.route(topology, package.routing_algorithm)


def link_loads(design: Design, traffic: np.ndarray, package) -> pd.DataFrame:
    """Bytes per step on every directed link of the package network (mesh, torus or graph of the
    ``PackageSpec``, routed as the evaluator routes) and each link's bandwidth."""
    topology, routes = package_routes(design, package)
    loads = noc.route_link_loads(routes.route_ptr, routes.route_links, np.ascontiguousarray(traffic, dtype=float),
                                 topology.n_links)
    return pd.DataFrame({"src_slot": topology.link_src, "dst_slot": topology.link_dst, "bytes_per_step": loads,
                         "bandwidth_Bps": topology.link_bw_Bps})


def link_utilisation(loads: pd.DataFrame, step_s: float) -> pd.Series:
    """Fraction of the step each link is busy: bytes / (link bandwidth x step time)."""
    return loads["bytes_per_step"] / (loads["bandwidth_Bps"] * step_s)
