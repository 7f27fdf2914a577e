"""Failures and the package's routes: the hand-offs a failure moves, re-routed by deltas on the intact routes,
and the failures that change the routes themselves, evaluated in full on the route table after them.

Delta (`reroute_hand_offs`, for dse.model.failures): the edges touching a moved unit take their old bytes off
copies of their stages' link-load rows and put the new ones on, along the intact routes; only those rows'
busiest links and longest hand-offs are taken again (dse.model.hand_offs). `undo_reroute` puts the intact
figures back.

In full (`rerouted_failures`): a failed router (study ``faults.failed_router: fails``) or link changes routes
(dse.model.routes builds the table after each failure: intact routes kept, broken ones detour), so the
re-mapped design's intact pass runs again on that table, in a second workspace.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .failure_remap import remap, restore
from .hand_offs import busiest_link, edge_amount, handoff_latency, in_instance, longest_edge
from .perf_model import LATENCY, P99, SHORT, base_pass

nowrap = nb.uintp      # see dse.model.perf_model: an unsigned index skips the negative-index wrap-around


@nb.njit(cache=True, error_model="numpy")
def reroute_hand_offs(n, split, n_moved, moved_list, slots, ncopy, slots2, count2, pb, lb, L, LM, unit_edge_ptr,
                      unit_edges, edge_start, edge_stage, edge_src, edge_dst, edge_bytes, edge_phase, edge_sync,
                      stage_repeat, pair_ptr, route_links, pair_latency, link_inv_bw, loads, comm, edge_lat, edge_amt,
                      seen, edge_list, bk_edge_lat, row_slot, aff_rows, new_loads, bk_comm):
    """Re-route the edges touching the moved units (``slots2`` / ``count2``: the mapping after the failure) on
    copies of their stages' load rows (``new_loads``; ``aff_rows`` lists the rows, ``row_slot`` their copy)
    and take those rows' times into ``comm`` again; the intact ``edge_lat`` and ``comm`` of what changed go to
    ``bk_edge_lat`` / ``bk_comm``. Returns (edges re-routed, rows changed) for `undo_reroute`."""
    n_edges = 0
    n_aff = 0
    for x in range(n_moved):
        u = moved_list[nowrap(x)]
        for y in range(unit_edge_ptr[nowrap(u)], unit_edge_ptr[nowrap(u + 1)]):
            e = unit_edges[nowrap(y)]
            if not seen[nowrap(e)]:
                seen[nowrap(e)] = True
                edge_list[nowrap(n_edges)] = e
                n_edges += 1
    for k in range(n_edges):
        e = edge_list[nowrap(k)]
        s = edge_stage[nowrap(e)]
        bk_edge_lat[nowrap(k)] = edge_lat[nowrap(e)]
        a, b = edge_src[nowrap(e)], edge_dst[nowrap(e)]
        ca_old, cb_old = (1 if split else ncopy[nowrap(a)]), ncopy[nowrap(b)]
        ca_new, cb_new = (1 if split else count2[nowrap(a)]), count2[nowrap(b)]
        old_amount = edge_amt[nowrap(e)]
        new_amount = old_amount if ca_new == ca_old and cb_new == cb_old else edge_amount(
            edge_bytes[nowrap(e)], ca_new, cb_new, split)
        for instance in range(2 if stage_repeat[nowrap(s)] > 1 else 1):
            if not in_instance(edge_phase[nowrap(e)], instance):
                continue
            row = 2 * s + instance
            slot = row_slot[nowrap(row)]
            if slot < 0:        # first change of this row: work on a copy of it
                slot = n_aff
                n_aff += 1
                row_slot[nowrap(row)] = slot
                aff_rows[nowrap(slot)] = row
                for link in range(L):
                    new_loads[nowrap(slot * LM + link)] = loads[nowrap(row * LM + link)]
            base = slot * LM
            for ra in range(ca_old):
                i = slots[nowrap(a), nowrap(ra)]
                for rb in range(cb_old):
                    j = slots[nowrap(b), nowrap(rb)]
                    if i != j:
                        p = pb + i * n + j
                        for x in range(pair_ptr[nowrap(p)], pair_ptr[nowrap(p + 1)]):
                            new_loads[nowrap(base + route_links[nowrap(x)])] -= old_amount
            longest = 0.0
            for ra in range(ca_new):
                i = slots2[nowrap(a), nowrap(ra)]
                for rb in range(cb_new):
                    j = slots2[nowrap(b), nowrap(rb)]
                    if i != j:
                        p = pb + i * n + j
                        longest = max(longest, pair_latency[nowrap(p)])
                        for x in range(pair_ptr[nowrap(p)], pair_ptr[nowrap(p + 1)]):
                            new_loads[nowrap(base + route_links[nowrap(x)])] += new_amount
            edge_lat[nowrap(e)] = handoff_latency(longest, edge_sync[nowrap(e)])
    for k in range(n_aff):
        s, instance = aff_rows[nowrap(k)] // 2, aff_rows[nowrap(k)] % 2
        bk_comm[nowrap(k)] = comm[nowrap(s), nowrap(instance)]
        comm[nowrap(s), nowrap(instance)] = (longest_edge(edge_start, edge_phase, edge_lat, s, instance)
                                             + busiest_link(new_loads, k * LM, link_inv_bw, lb, L))
    return n_edges, n_aff


@nb.njit(cache=True, inline="always", error_model="numpy")
def undo_reroute(n_edges, n_aff, aff_rows, row_slot, comm, bk_comm, edge_list, edge_lat, bk_edge_lat, seen):
    """Put back the intact hand-off figures `reroute_hand_offs` changed."""
    for k in range(n_aff):
        s, instance = aff_rows[nowrap(k)] // 2, aff_rows[nowrap(k)] % 2
        comm[nowrap(s), nowrap(instance)] = bk_comm[nowrap(k)]
        row_slot[nowrap(aff_rows[nowrap(k)])] = -1
    for k in range(n_edges):
        e = edge_list[nowrap(k)]
        edge_lat[nowrap(e)] = bk_edge_lat[nowrap(k)]
        seen[nowrap(e)] = False


@nb.njit(cache=True, error_model="numpy")
def rerouted_failures(T, R, n, kind, stacks, ddr, slots, ncopy, split, sets, set_size, set_routes, n_sets, W, W2,
                      out, short_limit):
    """dse.model.failures.failures_latency for the failure sets that change routes (``set_routes[k]`` >= 0: the
    route table after the failure, dse.model.routes): the re-mapped design is evaluated in full on that table,
    in ``W2``.
    Needs `base_pass` of the intact design in ``W`` (for `remap`) and leaves it there."""
    todo = False
    for k_set in range(n_sets):
        todo = todo or set_routes[k_set] >= 0
    if not todo:
        return
    slots2, count2, moved, moved_list, dead, is_dead = W.slots2, W.count2, W.moved, W.moved_list, W.dead, W.is_dead
    slots2[:, :] = slots
    count2[:] = ncopy
    for k_set in range(n_sets):
        if set_routes[k_set] < 0:
            continue
        n_dead = set_size[k_set]
        for x in range(n_dead):
            dead[x] = sets[k_set, x]
            is_dead[dead[x]] = True
        n_moved, ok = remap(T.unit_capacity, T.unit_kv, T.hbm_cap, n, dead, n_dead, is_dead, slots, ncopy, split,
                            stacks, W.chip_ptr, W.item_u, W.stored, slots2, count2, W.stored2, moved, moved_list)
        expected = p99 = short = np.inf
        if ok:
            base = base_pass(T, R, set_routes[k_set], n, kind, stacks, ddr, slots2, count2, split, W2)
            short = base[SHORT]
            expected = p99 = np.nan
            if short <= short_limit:
                expected, p99 = base[LATENCY], base[P99]
        restore(n_moved, moved_list, moved, slots, ncopy, slots2, count2)
        for x in range(n_dead):
            is_dead[dead[x]] = False
        out[k_set, 0] = expected
        out[k_set, 1] = p99
        out[k_set, 2] = short
