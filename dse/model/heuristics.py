"""Heuristic mappings: good starting points for the search, encoded as decision vectors.

* `greedy_by_load`: stage by stage, longest-processing-time-first list scheduling (Graham 1969): each
  unit, largest first, goes to the chiplet whose work in that stage is lightest, among those with HBM room
  left; with copies allowed (many-to-many, one-to-many) the hottest experts get a second copy.
* `affinity_clustering`: units that exchange the most bytes (workload graph edges: MoE dispatch and
  combine, ensemble hand-offs) go close together: the heaviest talker starts in the middle of the mesh,
  then each unit, in order of the bytes it exchanges with units already placed, joins the chiplet that
  minimises (work already there in its stage + hops from its heaviest placed partner x its own work).

Both work on one package (mesh, chiplet kinds, HBM stacks) and return a placement ``unit -> slots``; their
loops over units are compiled (`_lpt`, `_grow`: a step per unit, 15,000 for DeepSeek-V3 per layer, took
seconds in Python, with the same placements);
`seed_vectors` turns a few of them into gene vectors of the study's space. Each keeps its last few placements
(`remembered`): the EPLB-style seed (dse.search.baseline) starts from the ones `seed_vectors` made.
"""
from __future__ import annotations

import functools
import heapq

import numba as nb
import numpy as np
import scipy.sparse as sp

from ..study.space import Space
from ..study.spec import Study
from .placement import spread_stacks
from .tables import UNIT_KINDS, EvalTables

EXPERT = UNIT_KINDS.index("expert")


def _unit_work(t: EvalTables, kinds: list[int]) -> np.ndarray:
    """Time of each unit per step on the package's average chiplet kind (compute or HBM stream)."""
    kind_time = t.unit_time_s[:, kinds].mean(axis=1)
    stream = (t.unit_weight_read + t.unit_other_dram[:, kinds].mean(axis=1)) / max(t.hbm_bw_Bps, 1.0)
    return np.maximum(kind_time, stream) * t.stage_repeat[t.unit_stage]


def _stored(t: EvalTables) -> np.ndarray:
    return t.unit_capacity_bytes + t.unit_kv_bytes


def _hashable(value):
    return tuple(np.asarray(value).ravel().tolist()) if isinstance(value, (list, tuple, np.ndarray)) else value


def remembered(make):
    """``make(tables, *args)`` kept for its last few tables and arguments (the tables by identity, held while
    kept): each caller gets its own dict of the same slot lists, to be replaced, never changed in place."""
    made: dict = {}

    @functools.wraps(make)
    def wrapper(t, *args, **kwargs):
        key = (id(t),) + tuple(map(_hashable, args)) + tuple((k, _hashable(v)) for k, v in sorted(kwargs.items()))
        hit = made.get(key)
        if hit is None or hit[0] is not t:
            if len(made) >= 8:
                made.clear()
            hit = made[key] = (t, make(t, *args, **kwargs))
        return dict(hit[1])
    return wrapper


@remembered
def greedy_by_load(t: EvalTables, n: int, kinds: list[int], stacks: list[int], copies: int = 1) -> dict:
    """LPT list scheduling per stage with HBM room as a tie-breaker (see module docstring)."""
    work = _unit_work(t, kinds)
    capacity = np.array(stacks, float) * (t.hbm.capacity_bytes if t.hbm else 0.0)
    hot = np.zeros(t.n_units, np.bool_)
    if copies > 1:
        experts = np.where(t.unit_kind == EXPERT)[0]
        hot[experts[np.argsort(-t.unit_selection[experts])][: max(1, len(experts) // 4)]] = True
    order = [units[np.argsort(-work[units], kind="stable")]
             for units in (np.where(t.unit_stage == stage)[0] for stage in np.unique(t.unit_stage))]
    order = np.concatenate(order).astype(np.int64) if order else np.zeros(0, np.int64)
    stage = t.unit_stage[order]
    new_stage = np.concatenate([[True], stage[1:] != stage[:-1]]) if len(order) else np.zeros(0, np.bool_)
    chosen = _lpt(order, new_stage, work, _stored(t).astype(float), capacity, hot, n).tolist()
    names = t.unit_names
    return {names[u]: [i for i in chosen[u] if i >= 0] for u in order.tolist()}


@nb.njit(cache=True)
def _lpt(order, new_stage, work, stored, capacity, hot, n):
    """`greedy_by_load`'s loop: units in ``order`` (stage by stage, ``new_stage`` marking each stage's first,
    largest work first), each to the chiplet lightest in its stage among those with HBM room for it (else the
    lightest), a ``hot`` one to two; returns each unit's chiplets ``[U, 2]`` (-1: none)."""
    chosen = np.full((len(work), 2), -1, np.int64)
    used = np.zeros(n)
    load = np.zeros(n)
    for j in range(len(order)):
        u = order[j]
        if new_stage[j]:
            load[:] = 0.0
        wanted = min(2 if hot[u] else 1, n)
        for c in range(wanted):
            best, best_key = -1, 0.0
            for i in range(n):
                if c == 1 and chosen[u, 0] == i:
                    key = np.inf
                else:
                    key = (0.0 if capacity[i] - used[i] >= stored[u] else 1.0) * 1e30 + load[i]
                if best < 0 or key < best_key:
                    best, best_key = i, key
            chosen[u, c] = best
        for c in range(wanted):
            i = chosen[u, c]
            load[i] += work[u] / wanted
            used[i] += stored[u]
    return chosen


@remembered
def affinity_clustering(t: EvalTables, rows: int, cols: int, kinds: list[int]) -> dict:
    """Traffic-weighted growth from the mesh centre (see module docstring).

    Sparse: the traffic is a CSR matrix of the workload graph's edges and the unit to place next comes from
    a heap of pulls (bytes to units already placed) updated as each unit lands (units nobody pulls are taken
    in index order, as ties of zero pull), so the whole placement
    takes O(E log U + U n) for E edges, U units and n chiplets (DeepSeek-V3 per layer: 15k units)."""
    n = rows * cols
    U = t.n_units
    traffic = sp.coo_matrix((t.edge_bytes * t.edge_repeat, (t.edge_src, t.edge_dst)), shape=(U, U)).tocsr()
    traffic = (traffic + traffic.T).tocsr()
    traffic.sum_duplicates()
    traffic.sort_indices()
    work = _unit_work(t, kinds)
    r, c = np.divmod(np.arange(n), cols)
    hops = (np.abs(r[:, None] - r[None, :]) + np.abs(c[:, None] - c[None, :])).astype(float)
    centre = int(np.argmin(hops.sum(axis=1)))
    first = int(np.argmax(np.asarray(traffic.sum(axis=1)).ravel()))
    slot = _grow(traffic.indptr.astype(np.int64), traffic.indices.astype(np.int64), traffic.data.astype(float),
                 work.astype(float), hops, t.unit_stage.astype(np.int64), int(t.unit_stage.max()) + 1, first, centre)
    return {name: [i] for name, i in zip(list(t.unit_names), slot.tolist())}


@nb.njit(cache=True)
def _grow(ptr, nbr, val, work, hops, stage, n_stages, first, centre):
    """`affinity_clustering`'s loop over the CSR traffic (``ptr``, ``nbr``, ``val``): each unit's chiplet."""
    U, n = len(work), hops.shape[0]
    slot = np.full(U, -1, np.int64)
    load = np.zeros((n_stages, n))
    pull = np.zeros(U)
    heap = [(0.0, np.int64(-1))]     # (-pull, unit) of pulled units: the most pulled, lowest index first
    heap.pop()
    unpulled = 0             # below it every unit is placed: the next unit no one pulls, in index order
    u, i = first, centre
    for _ in range(U):
        slot[u] = i                                  # place u on i
        load[stage[u], i] += work[u]
        for x in range(ptr[u], ptr[u + 1]):
            v = nbr[x]
            if slot[v] < 0:
                pull[v] += val[x]
                heapq.heappush(heap, (-pull[v], v))
        # the next unit
        while len(heap) and (heap[0][0] >= 0.0 or slot[heap[0][1]] >= 0 or -heap[0][0] != pull[heap[0][1]]):
            heapq.heappop(heap)                      # placed already, a stale pull, or no pull at all
        if len(heap):
            u = heapq.heappop(heap)[1]
            best_val, best_neg = -np.inf, 0
            for x in range(ptr[u], ptr[u + 1]):      # its heaviest placed partner, the lowest index of ties
                if slot[nbr[x]] >= 0 and (val[x] > best_val or (val[x] == best_val and -nbr[x] > best_neg)):
                    best_val, best_neg = val[x], -nbr[x]
            anchor = slot[-best_neg]
        else:                                        # every unplaced unit has zero pull: lowest index first
            while unpulled < U and slot[unpulled] >= 0:
                unpulled += 1
            if unpulled == U:
                break
            u, anchor = unpulled, centre
        # one hop further away is worth it only to save more than the unit's own work in waiting
        i = np.argmin(load[stage[u]] + hops[anchor] * work[u])
    return slot


def encode(space: Space, rows: int, cols: int, kinds: list[int], hbm: int, ddr: int,
           placement: dict, unit_names: list[str]) -> np.ndarray:
    """Gene vector of a package and placement. The genes hold a unit's first slot and its number of copies;
    the decoder (dse.model.placement) puts further copies at its own stride, so only first slots survive exactly."""
    x = np.array(space.lower, dtype=np.int64)
    sl = space.slices
    x[sl["rows"]] = rows
    x[sl["cols"]] = cols
    kind_genes = np.zeros(space.max_slots, np.int64)
    kind_genes[: rows * cols] = kinds
    x[sl["kind"]] = kind_genes
    x[sl["hbm"]] = hbm
    x[sl["ddr"]] = ddr
    place = sl["place"].start
    copies = sl["copies"].start
    U = len(unit_names)
    slots = [placement[name] for name in unit_names]
    x[place: place + U] = [s[0] for s in slots]
    x[copies: copies + U] = np.minimum([len(s) for s in slots], space.upper[copies: copies + U])
    return np.clip(x, space.lower, space.upper)


def seed_vectors(study: Study, tables: EvalTables, space: Space) -> np.ndarray:
    """A few heuristic designs as gene vectors: both heuristics on the largest and a middle mesh, every
    slot of the library's first kind (and of each other kind), HBM and DDR at their upper bounds."""
    mesh = study.hardware.package.mesh
    shapes = {(mesh.rows[1], mesh.cols[1]), ((mesh.rows[0] + mesh.rows[1]) // 2, (mesh.cols[0] + mesh.cols[1]) // 2)}
    hbm = int(space.upper[space.slices["hbm"]][0])
    ddr = int(space.upper[space.slices["ddr"]][0])
    copies = int(space.upper[space.slices["copies"]].max())
    seeds = []
    for rows, cols in sorted(shapes):
        n = rows * cols
        for k in range(len(tables.kind_names)):
            kinds = [k] * n
            stacks = spread_stacks(hbm, kinds, tables.kind_hbm_phy)
            seeds.append(encode(space, rows, cols, kinds, hbm, ddr,
                                greedy_by_load(tables, n, kinds, stacks, copies), tables.unit_names))
            seeds.append(encode(space, rows, cols, kinds, hbm, ddr,
                                affinity_clustering(tables, rows, cols, kinds), tables.unit_names))
    return unique_rows(seeds)


def unique_rows(rows: list[np.ndarray]) -> np.ndarray:
    """The distinct rows, sorted in lexicographic order: ``np.unique(np.array(rows), axis=0)``, which sorts
    the rows as records of one field per gene (0.2 s for eight DeepSeek-V3 per-layer vectors of 30,012 genes)
    where Python's tuples take 15 ms."""
    distinct = sorted({tuple(row) for row in np.array(rows, np.int64).tolist()})
    return np.array(distinct, np.int64).reshape(len(distinct), -1)
