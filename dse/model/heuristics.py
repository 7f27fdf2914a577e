"""Heuristic mappings: good starting points for the search, encoded as decision vectors.

* `greedy_by_load`: stage by stage, longest-processing-time-first list scheduling (Graham 1969): each
  unit, largest first, goes to the chiplet whose work in that stage is lightest, among those with HBM room
  left; with copies allowed (many-to-many, one-to-many) the hottest experts get a second copy.
* `affinity_clustering`: units that exchange the most bytes (workload graph edges: MoE dispatch and
  combine, ensemble hand-offs) go close together: the heaviest talker starts in the middle of the mesh,
  then each unit, in order of the bytes it exchanges with units already placed, joins the chiplet that
  minimises (work already there in its stage + hops from its heaviest placed partner x its own work).

Both work on one package (mesh, chiplet kinds, HBM stacks) and return a placement ``unit -> slots``;
`seed_vectors` turns a few of them into gene vectors of the study's space.
"""
from __future__ import annotations

import heapq

import numpy as np
import scipy.sparse as sp

from ..study.space import Space
from ..study.spec import Study
from .tables import UNIT_KINDS, EvalTables

EXPERT = UNIT_KINDS.index("expert")


def _unit_work(t: EvalTables, kinds: list[int]) -> np.ndarray:
    """Time of each unit per step on the package's average chiplet kind (compute or HBM stream)."""
    kind_time = t.unit_time_s[:, kinds].mean(axis=1)
    stream = (t.unit_weight_read + t.unit_other_dram[:, kinds].mean(axis=1)) / max(t.hbm_bw_Bps, 1.0)
    return np.maximum(kind_time, stream) * t.stage_repeat[t.unit_stage]


def _stored(t: EvalTables) -> np.ndarray:
    return t.unit_capacity_bytes + t.unit_kv_bytes


def greedy_by_load(t: EvalTables, n: int, kinds: list[int], stacks: list[int], copies: int = 1) -> dict:
    """LPT list scheduling per stage with HBM room as a tie-breaker (see module docstring)."""
    work = _unit_work(t, kinds)
    capacity = np.array(stacks, float) * (t.hbm.capacity_bytes if t.hbm else 0.0)
    used = np.zeros(n)
    placement: dict[str, list[int]] = {}
    hot = set()
    if copies > 1:
        experts = np.where(t.unit_kind == EXPERT)[0]
        hot = set(experts[np.argsort(-t.unit_selection[experts])][: max(1, len(experts) // 4)].tolist())
    for stage in np.unique(t.unit_stage):
        load = np.zeros(n)
        units = np.where(t.unit_stage == stage)[0]
        for u in units[np.argsort(-work[units], kind="stable")]:
            wanted = min(2 if u in hot else 1, n)
            chosen: list[int] = []
            for _ in range(wanted):
                room = capacity - used >= _stored(t)[u]
                key = np.where(room, 0.0, 1.0) * 1e30 + load      # lightest chiplet with room, else lightest
                key[chosen] = np.inf
                i = int(np.argmin(key))
                chosen.append(i)
            for i in chosen:
                load[i] += work[u] / len(chosen)
                used[i] += _stored(t)[u]
            placement[t.unit_names[u]] = chosen
    return placement


def affinity_clustering(t: EvalTables, rows: int, cols: int, kinds: list[int]) -> dict:
    """Traffic-weighted growth from the mesh centre (see module docstring).

    Sparse: the traffic is a CSR matrix of the workload graph's edges and the unit to place next comes from
    a heap of pulls (bytes to units already placed) updated as each unit lands, so the whole placement
    takes O(E log U + U n) for E edges, U units and n chiplets (DeepSeek-V3 per layer: 15k units)."""
    n = rows * cols
    U = t.n_units
    traffic = sp.coo_matrix((t.edge_bytes * t.edge_repeat, (t.edge_src, t.edge_dst)), shape=(U, U)).tocsr()
    traffic = (traffic + traffic.T).tocsr()
    traffic.sum_duplicates()
    traffic.sort_indices()
    ptr, nbr, val = traffic.indptr, traffic.indices, traffic.data
    work = _unit_work(t, kinds)
    r, c = np.divmod(np.arange(n), cols)
    hops = np.abs(r[:, None] - r[None, :]) + np.abs(c[:, None] - c[None, :])
    load = np.zeros((int(t.unit_stage.max()) + 1, n))
    slot = np.full(U, -1)
    centre = int(np.argmin(hops.sum(axis=1)))
    pull = np.zeros(U)
    heap = [(0.0, u) for u in range(U)]           # (-pull, unit): the most pulled, lowest index first
    first = int(np.argmax(np.asarray(traffic.sum(axis=1)).ravel()))
    heap.remove((0.0, first))
    heapq.heapify(heap)

    def place(u: int, i: int) -> None:
        slot[u] = i
        load[t.unit_stage[u], i] += work[u]
        for x in range(ptr[u], ptr[u + 1]):
            v = nbr[x]
            if slot[v] < 0:
                pull[v] += val[x]
                heapq.heappush(heap, (-pull[v], int(v)))

    place(first, centre)
    while heap:
        minus, u = heapq.heappop(heap)
        if slot[u] >= 0 or -minus != pull[u]:
            continue                                 # placed already, or a stale pull
        anchor = centre
        if pull[u] > 0:
            partners = [(val[x], -nbr[x]) for x in range(ptr[u], ptr[u + 1]) if slot[nbr[x]] >= 0]
            anchor = slot[-max(partners)[1]]
        # one hop further away is worth it only to save more than the unit's own work in waiting
        place(u, int(np.argmin(load[t.unit_stage[u]] + hops[anchor] * work[u])))
    return {t.unit_names[u]: [int(slot[u])] for u in range(U)}


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
    for u, name in enumerate(unit_names):
        slots = placement[name]
        x[place + u] = slots[0]
        x[copies + u] = min(len(slots), space.upper[copies + u])
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
        stacks = [hbm // n + (1 if i < hbm % n else 0) for i in range(n)]
        for k in range(len(tables.kind_names)):
            kinds = [k] * n
            seeds.append(encode(space, rows, cols, kinds, hbm, ddr,
                                greedy_by_load(tables, n, kinds, stacks, copies), tables.unit_names))
            seeds.append(encode(space, rows, cols, kinds, hbm, ddr,
                                affinity_clustering(tables, rows, cols, kinds), tables.unit_names))
    return np.unique(np.array(seeds), axis=0)
