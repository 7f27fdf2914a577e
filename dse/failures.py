"""A design after chiplet failures: re-mapping, and latency evaluated by deltas against the intact pass.

Re-mapping (`remap`): surviving copies of a replicated unit take over its tokens; a unit (or shard)
left without a chiplet moves to the survivor with the most free HBM (lowest index on ties), unit by
unit in order. A failed chiplet's compute and memory are lost; the package network keeps routing
through it (its router and links are assumed intact).

Evaluation (`failure_latency`): starting from `dse.perf_model.base_pass` of the intact design, only
what the failure changes is recomputed: the moved units' copies; the chiplets that lost or gained
copies are re-placed in HBM/DDR (and those of their copies whose DDR fraction changed re-costed); the
hand-offs of edges touching a moved unit are re-routed (link loads by subtraction and addition); and
stage maxima are re-taken only where something changed. Every change is undone afterwards, so the
workspace again holds the intact design. The result equals a full evaluation of the re-mapped design
(tests/test_evaluator_faults.py).
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .perf_model import (FIRST, allreduce, copy_cost, edge_flow, in_instance, item_size, place_chiplet,
                         scenario_latency, stage_comm)


@nb.njit(cache=True)
def remap(T, n, n_dead, slots, ncopy, split, stacks, W):
    """Fill ``W.slots2`` / ``W.count2`` with the mapping after the chiplets ``W.dead[:n_dead]`` fail.

    Needs the intact design's ``W.stored`` and item index. Marks ``W.moved`` and lists the units that had
    a copy on a failed chiplet in ``W.moved_list`` (ascending); returns their count, or -1 when no
    chiplet survives.
    """
    R = W.f.shape[1]
    W.slots2[:, :] = slots
    W.count2[:] = ncopy
    W.stored2[:n] = W.stored[:n]
    n_moved = 0
    for x in range(n_dead):
        d = W.dead[x]
        W.stored2[d] = 0.0
        for y in range(W.chip_ptr[d], W.chip_ptr[d + 1]):
            u = W.chip_items[y] // R
            if not W.moved[u]:
                W.moved[u] = True
                W.moved_list[n_moved] = u
                n_moved += 1
    W.moved_list[:n_moved] = np.sort(W.moved_list[:n_moved])
    for x in range(n_moved):
        u = W.moved_list[x]
        c = ncopy[u]
        kept = 0
        for r in range(c):
            i = slots[u, r]
            if not _is_dead(W, n_dead, i):
                W.slots2[u, kept] = i
                kept += 1
        for r in range(kept, c):
            W.slots2[u, r] = -1
        if not split:               # survivors share the lost copy's tokens and KV cache
            for r in range(kept):
                i = W.slots2[u, r]
                W.stored2[i] += T.unit_kv[u] / kept - T.unit_kv[u] / c if kept > 0 else 0.0
        need = c - kept if split else (1 if kept == 0 else 0)
        size = item_size(T, u, c if split else 1, split)
        for _ in range(need):
            best = -1
            best_free = -np.inf
            for i in range(n):
                if not _is_dead(W, n_dead, i):
                    free = stacks[i] * T.hbm_cap - W.stored2[i]
                    if free > best_free:
                        best, best_free = i, free
            if best < 0:
                return -1
            W.slots2[u, kept] = best
            W.stored2[best] += size
            kept += 1
        W.count2[u] = kept
    return n_moved


@nb.njit(cache=True, inline="always")
def _is_dead(W, n_dead, i):
    for x in range(n_dead):
        if W.dead[x] == i:
            return True
    return False


@nb.njit(cache=True)
def _touch_stage(W, s, n, n_dirty):
    """Remember stage s's intact figures before its first change; returns the new dirty count."""
    if not W.dirty[s]:
        W.dirty[s] = True
        W.dirty_list[n_dirty] = s
        W.bk_ct[s, :n] = W.ct[s, :n]
        W.bk_sd[s] = W.sd[s]
        W.bk_stage_t[s] = W.stage_t[s]
        return n_dirty + 1
    return n_dirty


@nb.njit(cache=True)
def _replace_chiplet(T, i, kind, stacks, n_moved, split, W):
    """Re-place chiplet i's copies after re-mapping: its intact copies of unmoved units plus the moved
    units' new copies on it, in (u, r) order (the order `base_pass` would list them in)."""
    R = W.f.shape[1]
    n_items = 0
    y = W.chip_ptr[i]
    end = W.chip_ptr[i + 1]
    for x in range(n_moved + 1):
        bound = W.moved_list[x] if x < n_moved else 1 << 62
        while y < end and W.chip_items[y] // R < bound:
            if not W.moved[W.chip_items[y] // R]:
                W.buf_item[n_items] = W.chip_items[y]
                n_items += 1
            y += 1
        if x < n_moved:
            u = bound
            for r in range(W.count2[u]):
                if W.slots2[u, r] == i:
                    W.buf_item[n_items] = u * R + r
                    n_items += 1
    _, spilled = place_chiplet(T, stacks[i] * T.hbm_cap, kind[i], W.buf_item, n_items, W.count2, split, W, W.f2)
    return spilled


@nb.njit(cache=True)
def failure_latency(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, n_dead, W):
    """(expected latency, p99, capacity shortfall) after the chiplets ``W.dead[:n_dead]`` fail.

    Needs `base_pass` of the intact design in ``W`` and leaves it there. Infinite when nothing survives.
    """
    R_ = W.f.shape[1]
    n_moved = remap(T, n, n_dead, slots, ncopy, split, stacks, W)
    if n_moved < 0:
        _clear_moved(W, n, n_dead)
        return np.inf, np.inf, np.inf
    ddr_bw = max(ddr * T.ddr_bw, 1.0)

    # --- chiplets whose contents change: failed ones and every holder of a moved unit, before or after ---
    n_a = 0
    for x in range(n_dead):
        d = W.dead[x]
        if not W.in_a[d]:
            W.in_a[d] = True
            W.a_list[n_a] = d
            n_a += 1
    for x in range(n_moved):
        u = W.moved_list[x]
        for r in range(ncopy[u]):
            i = slots[u, r]
            if not W.in_a[i]:
                W.in_a[i] = True
                W.a_list[n_a] = i
                n_a += 1
        for r in range(W.count2[u]):
            i = W.slots2[u, r]
            if not W.in_a[i]:
                W.in_a[i] = True
                W.a_list[n_a] = i
                n_a += 1
    spill = 0.0
    for i in range(n):
        W.overflow2[i] = W.overflow[i]
    for x in range(n_a):
        i = W.a_list[x]
        W.overflow2[i] = 0.0 if _is_dead(W, n_dead, i) else _replace_chiplet(T, i, kind, stacks, n_moved, split, W)
    for i in range(n):
        spill += W.overflow2[i]
    short = max(spill - ddr * T.ddr_cap, 0.0)

    # --- compute: take out the moved copies and put in their new ones; re-cost copies whose DDR share moved ---
    n_dirty = 0
    for x in range(n_moved):
        u = W.moved_list[x]
        s = T.unit_stage[u]
        n_dirty = _touch_stage(W, s, n, n_dirty)
        for r in range(ncopy[u]):
            W.ct[s, slots[u, r]] -= W.copy_time[u, r]
            W.sd[s] -= W.copy_ddr[u, r]
        c = W.count2[u]
        t_ar = 0.0
        if split and c > 1:
            t_ar, _, _ = allreduce(T, R, sh, n, u, W.slots2, c)
        for r in range(c):
            i = W.slots2[u, r]
            t, b_ddr, _, _, _ = copy_cost(T, u, c, kind[i], W.f2[u, r], stacks[i] * T.hbm_bw, ddr_bw)
            W.ct[s, i] += t + t_ar
            W.sd[s] += b_ddr
    for x in range(n_a):
        i = W.a_list[x]
        if _is_dead(W, n_dead, i):
            continue
        for y in range(W.chip_ptr[i], W.chip_ptr[i + 1]):
            code = W.chip_items[y]
            u = code // R_
            r = code % R_
            if W.moved[u] or W.f2[u, r] == W.f[u, r]:
                continue
            s = T.unit_stage[u]
            n_dirty = _touch_stage(W, s, n, n_dirty)
            c = ncopy[u]
            t, b_ddr, _, _, _ = copy_cost(T, u, c, kind[i], W.f2[u, r], stacks[i] * T.hbm_bw, ddr_bw)
            W.ct[s, i] += t + W.ar_time[u] - W.copy_time[u, r]
            W.sd[s] += b_ddr - W.copy_ddr[u, r]
    for x in range(n_dirty):
        s = W.dirty_list[x]
        for y in range(n_dead):
            W.ct[s, W.dead[y]] = 0.0
        W.stage_t[s] = max(W.ct[s, :n].max(), W.sd[s] / ddr_bw)

    # --- hand-offs: move the flows of edges touching moved units, re-take maxima where touched ---
    n_edges = 0
    for x in range(n_moved):
        u = W.moved_list[x]
        for y in range(T.unit_edge_ptr[u], T.unit_edge_ptr[u + 1]):
            e = T.unit_edges[y]
            if not W.seen[e]:
                W.seen[e] = True
                W.edge_list[n_edges] = e
                n_edges += 1
    L = R.n_links[sh]
    n_aff = 0
    for k in range(n_edges):
        e = W.edge_list[k]
        s = T.edge_stage[e]
        W.bk_edge_lat[e] = W.edge_lat[e]
        for instance in range(2 if T.stage_repeat[s] > 1 else 1):
            if not in_instance(T.edge_phase[e], instance):
                continue
            loads = W.loads[s, instance]
            if not W.affected[s, instance]:
                W.affected[s, instance] = True
                W.bk_loads[n_aff, :L] = loads[:L]
                W.bk_comm[n_aff] = W.comm[s, instance]
                W.aff_list[n_aff, 0] = s
                W.aff_list[n_aff, 1] = instance
                n_aff += 1
            edge_flow(T, R, sh, n, e, slots, ncopy, split, loads, -1.0)
            W.edge_lat[e] = edge_flow(T, R, sh, n, e, W.slots2, W.count2, split, loads, 1.0)[0]
    for k in range(n_aff):
        s, instance = W.aff_list[k, 0], W.aff_list[k, 1]
        W.comm[s, instance] = stage_comm(T, R, sh, s, instance, W.loads[s, instance], W.edge_lat)

    expected, p99 = scenario_latency(T, W.stage_t, W.comm, W.ct, n, W.finish, W.cps, W.in_scen, W.busy)

    # --- undo: the workspace holds the intact design again ---
    for k in range(n_aff):
        s, instance = W.aff_list[k, 0], W.aff_list[k, 1]
        W.loads[s, instance, :L] = W.bk_loads[k, :L]
        W.comm[s, instance] = W.bk_comm[k]
        W.affected[s, instance] = False
    for k in range(n_edges):
        e = W.edge_list[k]
        W.edge_lat[e] = W.bk_edge_lat[e]
        W.seen[e] = False
    for x in range(n_dirty):
        s = W.dirty_list[x]
        W.ct[s, :n] = W.bk_ct[s, :n]
        W.sd[s] = W.bk_sd[s]
        W.stage_t[s] = W.bk_stage_t[s]
        W.dirty[s] = False
    for x in range(n_a):
        W.in_a[W.a_list[x]] = False
    _clear_moved(W, n, n_dead)
    return expected, p99, short


@nb.njit(cache=True)
def _clear_moved(W, n, n_dead):
    R = W.f.shape[1]
    for x in range(n_dead):
        d = W.dead[x]
        for y in range(W.chip_ptr[d], W.chip_ptr[d + 1]):
            W.moved[W.chip_items[y] // R] = False
