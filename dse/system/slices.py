"""The share of the workload one package of a system holds, as the tables its package evaluator reads.

A package of pipeline stage p holds the layers ``[p L / P, (p + 1) L / P)`` (integer division; L layers,
P stages; or a phase's own layers per stage: `stage_bounds`), the embedding with the first stage and
the LM head with the last; a layer group cut by a stage boundary keeps its units with its stage count
(repeat) and weight and KV bytes scaled to the layers held. With E expert-parallel ranks, rank r of a
stage holds its own share of the routed experts
(same expert ids in every layer, balanced by expected tokens: longest-processing-time first, Graham
1969, as DeepSeek's EPLB balances ranks) and a data-parallel copy of every other unit serving
``ceil(batch / E)`` sequences, while its experts see the tokens of the whole batch routed to them
(expert units from tables at the full batch). Hand-offs between units a package holds stay in its
tables; those to other packages (pipeline hand-offs, the expert dispatch and combine) are the system's
(dse.system.traffic). KV caches count ``in_flight`` batches (pipelined serving).

`slice_tables` returns an `EvalTables` like dse.model.tables builds for a whole package, so the package
evaluator (dse.model.evaluator.Evaluator) costs the slice unchanged.
"""
from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass

import numpy as np

from ..model.tables import UNIT_KINDS, EvalTables

EXPERT = UNIT_KINDS.index("expert")


@dataclass(frozen=True)
class StageLayers:
    """Per workload stage: its first layer (-1 outside the layers) and its layer count (repeat)."""

    first: np.ndarray           # [S]
    count: np.ndarray           # [S]

    @property
    def total(self) -> int:
        inside = self.first >= 0
        return int((self.first[inside] + self.count[inside]).max()) if inside.any() else 0


def stage_layers(t: EvalTables) -> StageLayers:
    nodes = t.workload.graph.nodes
    S = len(t.stage_repeat)
    first = np.full(S, -1, np.int64)
    for u, s in zip(t.unit_names, t.unit_stage):
        first[s] = max(first[s], int(nodes[u].get("first_layer", -1)))
    return StageLayers(first=first, count=t.stage_repeat.astype(np.int64))


def stage_bounds(total: int, pipeline: int, counts=None) -> list[int]:
    """The first layer of each pipeline stage and the end of the last ([P + 1]): ``p L // P`` (the default),
    or the running sum of ``counts`` (layers per stage, an uneven split: dse.training.stages)."""
    if counts is None:
        return [p * total // pipeline for p in range(pipeline + 1)]
    return [int(x) for x in np.concatenate([[0], np.cumsum(counts)])]


def layers_held(layers: StageLayers, pipeline: int, stage: int, bounds: list[int] | None = None) -> np.ndarray:
    """Layer instances of each workload stage the packages of pipeline stage ``stage`` hold ([S]; 0: none),
    the stages' layers ``bounds`` (`stage_bounds`, the default split when None).
    Stages outside the layers go with the first stage when they come before every layer, else the last."""
    lo, hi = (bounds or stage_bounds(layers.total, pipeline))[stage: stage + 2]
    inside = layers.first >= 0
    overlap = np.minimum(layers.first + layers.count, hi) - np.maximum(layers.first, lo)
    held = np.where(inside, np.maximum(overlap, 0), 0)
    first_layer_stage = int(np.argmax(inside)) if inside.any() else len(inside)
    for s in np.flatnonzero(~inside):
        before = s < first_layer_stage
        held[s] = layers.count[s] if (before and stage == 0) or (not before and stage == pipeline - 1) else 0
    return held


def group_start(layers: StageLayers, pipeline: int, stage: int, bounds: list[int] | None = None) -> np.ndarray:
    """Whether each held stage's first instance in this pipeline stage is its group's first layer (its
    entry hand-off is then inside the package)."""
    lo = (bounds or stage_bounds(layers.total, pipeline))[stage]
    return (layers.first < 0) | (layers.first >= lo)


def expert_ranks(t: EvalTables, experts: int) -> np.ndarray:
    """Rank of every unit's expert id (-1 for units that are not routed experts), balanced by expected
    tokens: heaviest expert first onto the least loaded rank (ties to the lowest rank)."""
    nodes = t.workload.graph.nodes
    ids = np.array([int(nodes[u].get("expert", -1)) if k == EXPERT else -1
                    for u, k in zip(t.unit_names, t.unit_kind)])
    load: dict[int, float] = {}
    for i, e in enumerate(ids):
        if e >= 0:
            load[e] = load.get(e, 0.0) + float(t.unit_selection[i] * t.unit_route_tokens[i])
    heap = [(0.0, r) for r in range(experts)]
    rank_of: dict[int, int] = {}
    for e in sorted(load, key=lambda e: (-load[e], e)):
        total, r = heapq.heappop(heap)
        rank_of[e] = r
        heapq.heappush(heap, (total + load[e], r))
    return np.array([rank_of[e] if e >= 0 else -1 for e in ids], np.int64)


def kept_units(t: EvalTables, held: np.ndarray, ranks: np.ndarray, rank: int) -> np.ndarray:
    """Units a package holds: those of its held stages, routed experts only of its own rank."""
    return (held[t.unit_stage] > 0) & ((ranks < 0) | (ranks == rank))


def edge_instances(t: EvalTables, held: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Occurrences per step of each hand-off inside a package holding ``held`` layer instances per stage
    (0: the hand-off is not inside it). Per edge: every instance (repeat = the stage's), layer to layer
    (repeat - 1, from a later stage of the same group or the same stage) or an entry from another group
    (once, before the first instance: inside only if the group starts here and its source is held)."""
    if np.array_equal(held, t.stage_repeat):        # the whole workload: every hand-off as it is
        return t.edge_repeat.astype(float)
    src_s, dst_s = t.unit_stage[t.edge_src], t.unit_stage[t.edge_dst]
    R = t.stage_repeat[dst_s]
    k_dst, k_src = held[dst_s], held[src_s]
    layers = stage_layers(t)
    same_group = (layers.first[src_s] == layers.first[dst_s]) & (layers.count[src_s] == layers.count[dst_s]) & \
        (layers.first[dst_s] >= 0)
    every = t.edge_repeat == R
    layer_to_layer = ~every & same_group & (src_s >= dst_s) & (t.edge_repeat == R - 1)
    out = np.where(every, k_dst, np.where(layer_to_layer, k_dst - 1, np.where(starts[dst_s], 1, 0)))
    return np.where((k_dst > 0) & (k_src > 0), np.maximum(out, 0), 0).astype(float)


def slice_tables(rank_t: EvalTables, full_t: EvalTables, held: np.ndarray, starts: np.ndarray, keep: np.ndarray,
                 kv_scale: float) -> EvalTables:
    """Tables of one package's share (see module docstring): units ``keep`` with ``held`` layer instances of
    each stage; routed experts from ``full_t`` (the whole batch), every other figure from ``rank_t``."""
    assert rank_t.unit_names == full_t.unit_names
    units = np.flatnonzero(keep)
    stages = np.flatnonzero(held > 0)
    new_stage = np.full(len(held), -1, np.int64)
    new_stage[stages] = np.arange(len(stages))
    is_expert = (rank_t.unit_kind[units] == EXPERT)[:, None]

    def pick(name: str) -> np.ndarray:
        a, b = getattr(rank_t, name)[units], getattr(full_t, name)[units]
        return np.where(is_expert if a.ndim == 2 else is_expert[:, 0], b, a)

    share = held[rank_t.unit_stage[units]] / rank_t.stage_repeat[rank_t.unit_stage[units]]
    op_rows, ptr = [], [0]
    for i, u in enumerate(units):
        src = full_t if is_expert[i, 0] else rank_t
        op_rows.append((src, np.arange(src.op_ptr[u], src.op_ptr[u + 1])))
        ptr.append(ptr[-1] + src.op_ptr[u + 1] - src.op_ptr[u])

    def ops(name: str) -> np.ndarray:
        return np.concatenate([getattr(src, name)[rows] for src, rows in op_rows]) if op_rows else \
            getattr(rank_t, name)[:0]

    occurrences = edge_instances(rank_t, held, starts)
    index = np.full(rank_t.n_units, -1, np.int64)
    index[units] = np.arange(len(units))
    edges = np.flatnonzero((occurrences > 0) & keep[rank_t.edge_src] & keep[rank_t.edge_dst])
    after = [tuple(int(new_stage[a]) for a in rank_t.stage_after[s] if held[a] > 0) for s in stages]
    scenarios = [(p, tuple(int(new_stage[s]) for s in chosen if held[s] > 0)) for p, chosen in rank_t.scenarios]
    return dataclasses.replace(
        rank_t, unit_names=[rank_t.unit_names[u] for u in units], unit_kind=rank_t.unit_kind[units],
        unit_stage=new_stage[rank_t.unit_stage[units]],
        unit_capacity_bytes=pick("unit_capacity_bytes") * share,
        unit_kv_bytes=rank_t.unit_kv_bytes[units] * share * kv_scale,
        unit_weight_read=pick("unit_weight_read"), unit_time_s=pick("unit_time_s"),
        unit_energy_j=pick("unit_energy_j"), unit_other_dram=pick("unit_other_dram"),
        unit_out_bytes=pick("unit_out_bytes"), unit_prob=pick("unit_prob"), unit_selection=pick("unit_selection"),
        unit_route_tokens=pick("unit_route_tokens"),
        stage_repeat=held[stages].astype(float), stage_prob=rank_t.stage_prob[stages], stage_after=after,
        scenarios=[(p, s) for p, s in scenarios if s],
        edge_src=index[rank_t.edge_src[edges]], edge_dst=index[rank_t.edge_dst[edges]],
        edge_bytes=rank_t.edge_bytes[edges], edge_repeat=occurrences[edges],
        edge_sync_steps=rank_t.edge_sync_steps[edges],
        op_ptr=np.array(ptr, np.int64), op_time_s=ops("op_time_s"), op_weight_bytes=ops("op_weight_bytes"),
        op_other_bytes=ops("op_other_bytes"), op_prob=ops("op_prob"), op_inv_steps=ops("op_inv_steps"),
        op_energy_j=ops("op_energy_j"))
