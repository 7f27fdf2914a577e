"""A design after chiplet failures: re-mapping, and latency evaluated by deltas against the intact pass.

Re-mapping (`remap`): surviving copies of a replicated unit take over its tokens; a unit (or shard)
left without a chiplet moves to the survivor with the most free HBM (lowest index on ties), unit by
unit in order. A failed chiplet's compute and memory are lost. Its router either keeps forwarding
(the routes stay as they are) or fails with it (study ``faults.failed_router``); a failed link takes
its two channels down. Failures that change routes use the route tables after them (dse.model.routes).

Evaluation (`failures_latency`): starting from `dse.model.perf_model.base_pass` of the intact design, only
what the failure changes is recomputed: the moved units' copies; the chiplets that lost or gained
copies are re-placed in HBM/DDR (and those of their copies whose DDR fraction changed re-costed); the
hand-offs of edges touching a moved unit are re-routed (link loads by subtraction and addition); and
stage maxima are re-taken only where something changed. Every change is undone afterwards, so the
workspace again holds the intact design. The result equals a full evaluation of the re-mapped design
(tests/test_evaluator_faults.py). Failures that change routes (`rerouted_failures`) are evaluated in
full instead, on the route table after them, in a second workspace. A failure that leaves a larger
capacity shortfall than the intact design counts as lost whatever its latency, so the evaluator skips
its latency (``short_limit``).
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .perf_model import (
    LATENCY,
    P99,
    SHORT,
    allreduce,
    base_pass,
    busiest_link,
    copy_bytes,
    copy_roofline,
    edge_amount,
    handoff_latency,
    host_issue_s,
    in_instance,
    item_size,
    longest_edge,
    nowrap,
    place_chiplet,
    row_max,
    sequence_wait_s,
)
from .grouped import regroup
from .scenarios import scenario_latency


@nb.njit(cache=True, inline="always", error_model="numpy")
def remap(unit_capacity, unit_kv, hbm_cap, n, dead, n_dead, is_dead, slots, ncopy, split, stacks, chip_ptr, item_u,
          stored, slots2, count2, stored2, moved, moved_list):
    """Re-map the units of the failed chiplets ``dead[:n_dead]`` (flagged in ``is_dead``): their rows of
    ``slots2`` / ``count2`` and the whole of ``stored2`` become the mapping after the failure.

    ``slots2`` / ``count2`` must equal ``slots`` / ``ncopy`` on entry; only the rows of moved units change
    (`restore`). Needs the intact design's ``stored`` and item index. Marks ``moved`` and lists the units
    that had a copy on a failed chiplet in ``moved_list`` (ascending). Returns (their count, whether
    every unit found a chiplet: False when none survives).
    """
    for i in range(n):
        stored2[nowrap(i)] = stored[nowrap(i)]
    n_moved = 0
    for x in range(n_dead):
        d = dead[nowrap(x)]
        stored2[nowrap(d)] = 0.0
        for y in range(chip_ptr[nowrap(d)], chip_ptr[nowrap(d + 1)]):
            u = item_u[nowrap(y)]
            if not moved[nowrap(u)]:
                moved[nowrap(u)] = True
                moved_list[nowrap(n_moved)] = u
                n_moved += 1
    if n_dead > 1:              # one chiplet's copies come in unit order already
        for x in range(1, n_moved):
            u = moved_list[nowrap(x)]
            k = x
            while k > 0 and moved_list[nowrap(k - 1)] > u:
                moved_list[nowrap(k)] = moved_list[nowrap(k - 1)]
                k -= 1
            moved_list[nowrap(k)] = u
    for x in range(n_moved):
        u = moved_list[nowrap(x)]
        c = ncopy[nowrap(u)]
        kept = 0
        for r in range(c):
            i = slots[nowrap(u), nowrap(r)]
            if not is_dead[nowrap(i)]:
                slots2[nowrap(u), nowrap(kept)] = i
                kept += 1
        for r in range(kept, c):
            slots2[nowrap(u), nowrap(r)] = -1
        if not split:               # survivors share the lost copy's tokens and KV cache
            for r in range(kept):
                stored2[nowrap(slots2[nowrap(u), nowrap(r)])] += unit_kv[nowrap(u)] / kept - unit_kv[nowrap(u)] / c
        need = c - kept if split else (1 if kept == 0 else 0)
        size = item_size(unit_capacity[nowrap(u)], unit_kv[nowrap(u)], c if split else 1, split)
        for _ in range(need):
            best = -1
            best_free = -np.inf
            for i in range(n):
                if not is_dead[nowrap(i)]:
                    free = stacks[nowrap(i)] * hbm_cap - stored2[nowrap(i)]
                    if free > best_free:
                        best, best_free = i, free
            if best < 0:
                return n_moved, False
            slots2[nowrap(u), nowrap(kept)] = best
            stored2[nowrap(best)] += size
            kept += 1
        count2[nowrap(u)] = kept
    return n_moved, True


@nb.njit(cache=True, inline="always", error_model="numpy")
def restore(n_moved, moved_list, moved, slots, ncopy, slots2, count2):
    """Undo `remap`: the moved units' rows of ``slots2`` / ``count2`` equal the intact mapping again."""
    for x in range(n_moved):
        u = moved_list[nowrap(x)]
        for r in range(ncopy[nowrap(u)]):
            slots2[nowrap(u), nowrap(r)] = slots[nowrap(u), nowrap(r)]
        count2[nowrap(u)] = ncopy[nowrap(u)]
        moved[nowrap(u)] = False


@nb.njit(cache=True, inline="always", error_model="numpy")
def placement_unchanged(capacity, stored_before, stored_after):
    """A chiplet without HBM keeps everything in DDR; one whose copies fit in HBM before and after keeps
    everything in HBM: then no copy's DDR share changes and no placement needs computing."""
    return capacity <= 0.0 or (stored_before <= capacity and stored_after <= capacity)


@nb.njit(cache=True, inline="always", error_model="numpy")
def gather_chiplet(i, n_moved, moved, moved_list, chip_ptr, item_u, item_r, slots2, count2, buf_u, buf_r):
    """Chiplet i's copies after re-mapping, in (u, r) order (the order `base_pass` would list them in):
    its intact copies of unmoved units plus the moved units' new copies on it. Returns their count."""
    n_items = 0
    y = chip_ptr[nowrap(i)]
    end = chip_ptr[nowrap(i + 1)]
    for x in range(n_moved + 1):
        bound = moved_list[nowrap(x)] if x < n_moved else 1 << 62
        while y < end and item_u[nowrap(y)] < bound:
            if not moved[nowrap(item_u[nowrap(y)])]:
                buf_u[nowrap(n_items)] = item_u[nowrap(y)]
                buf_r[nowrap(n_items)] = item_r[nowrap(y)]
                n_items += 1
            y += 1
        if x < n_moved:
            for r in range(count2[nowrap(bound)]):
                if slots2[nowrap(bound), nowrap(r)] == i:
                    buf_u[nowrap(n_items)] = bound
                    buf_r[nowrap(n_items)] = r
                    n_items += 1
    return n_items


@nb.njit(cache=True, inline="always", error_model="numpy")
def mark_dirty(s, dirty, dirty_list, n_dirty, n, ct, hosts, ht, sd, stage_t, bk_ct, bk_ht, bk_sd, bk_stage_t, grouping,
               lq, bk_lq):
    """Remember stage s as it is intact before its first change; returns the new count of dirty stages."""
    if dirty[nowrap(s)]:
        return n_dirty
    dirty[nowrap(s)] = True
    dirty_list[nowrap(n_dirty)] = s
    for i in range(n):
        bk_ct[nowrap(s), nowrap(i)] = ct[nowrap(s), nowrap(i)]
        if grouping:
            bk_lq[nowrap(s), nowrap(i)] = lq[nowrap(s), nowrap(i)]
        if hosts:
            bk_ht[nowrap(s), nowrap(i)] = ht[nowrap(s), nowrap(i)]
    bk_sd[nowrap(s)] = sd[nowrap(s)]
    bk_stage_t[nowrap(s)] = stage_t[nowrap(s)]
    return n_dirty + 1


@nb.njit(cache=True, error_model="numpy")
def failures_latency(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, sets, set_size, set_routes, n_sets, W,
                     out, short_limit, screen):
    """Per failure set k < n_sets (chiplets ``sets[k, :set_size[k]]`` fail together): ``out[k]`` = (expected
    latency, p99, capacity shortfall) after it. Infinite when nothing survives; latencies NaN (not computed)
    when the shortfall exceeds ``short_limit`` (the evaluator counts such a failure as lost whatever its
    latency; ``np.inf``: always computed).

    Only sets with ``set_routes[k]`` = -1 (the routes stay as they are); `rerouted_failures` does the others.

    Needs `base_pass` of the intact design in ``W`` and leaves it there. All sets in one call, so the
    tables are bound once per design rather than once per failure.

    ``screen`` (the search's screening fidelity, dse.search.screening): the hand-offs keep the intact
    design's routes, link loads and latencies; the moved units' traffic is not re-routed. About half the
    cost of a failure; the exact evaluation re-routes it.
    """
    unit_capacity, unit_kv, w_copy, other_dram = T.unit_capacity, T.unit_kv, T.unit_w_copy, T.unit_other_dram
    read_scale, unit_stage, out_bytes = T.unit_read_scale, T.unit_stage, T.unit_out_bytes
    unit_edge_ptr, unit_edges, stage_repeat = T.unit_edge_ptr, T.unit_edges, T.stage_repeat
    edge_start, edge_src, edge_dst, edge_bytes, edge_phase, edge_stage = (
        T.edge_start, T.edge_src, T.edge_dst, T.edge_bytes, T.edge_phase, T.edge_stage)
    hbm_cap, hbm_bw, hbm_e, ddr_e, link_bw = T.hbm_cap, T.hbm_bw, T.hbm_e, T.ddr_e, T.link_bw
    pair_ptr, route_links, pair_latency, pair_energy = R.pair_ptr, R.route_links, R.pair_latency, R.pair_energy
    link_inv_bw, edge_sync = R.link_inv_bw, T.edge_sync
    w_ratio, op_ptr, op_time, op_w, op_o, op_prob, op_inv = (T.unit_w_ratio, T.op_ptr, T.op_time, T.op_w, T.op_o,
                                                              T.op_prob, T.op_inv)
    mem_eff, overhead, dispatch, issue, launches = (T.kind_mem_eff, T.kind_overhead, T.kind_dispatch, T.kind_issue,
                                                    T.unit_launches)
    pb, lb, L = R.pair_base[nowrap(sh)], R.link_base[nowrap(sh)], R.n_links[nowrap(sh)]
    hosts = T.hosts
    ct, ht, sd, stage_t, comm, loads, edge_lat = W.ct, W.ht, W.sd, W.stage_t, W.comm, W.loads, W.edge_lat
    LM = loads.shape[nowrap(0)] // (2 * stage_repeat.shape[nowrap(0)])
    f, f2, copy_time, copy_ddr, ar_time = W.f, W.f2, W.copy_time, W.copy_ddr, W.ar_time
    chip_ptr, item_u, item_r = W.chip_ptr, W.item_u, W.item_r
    slots2, count2, moved, moved_list, dead, is_dead = W.slots2, W.count2, W.moved, W.moved_list, W.dead, W.is_dead
    stored, stored2, in_a, a_list = W.stored, W.stored2, W.in_a, W.a_list
    dirty, dirty_list, bk_ct, bk_ht, bk_sd, bk_stage_t = W.dirty, W.dirty_list, W.bk_ct, W.bk_ht, W.bk_sd, W.bk_stage_t
    lq, bk_lq, is_expert, group_lq = W.lq, W.bk_lq, T.unit_is_expert, T.unit_group_lq
    group_kernels = T.stage_group_kernels
    grouping = group_kernels.shape[0] > 0 and group_kernels.max() > 0.0
    seen, edge_list, bk_edge_lat, edge_amt = W.seen, W.edge_list, W.bk_edge_lat, W.edge_amt
    row_slot, aff_rows, new_loads, bk_comm = W.row_slot, W.aff_rows, W.new_loads, W.bk_comm
    overflow, overflow2 = W.overflow, W.overflow2
    ddr_bw = max(ddr * T.ddr_bw, 1.0)
    buf_u, buf_r, buf_size, buf_read = W.buf_u, W.buf_r, W.buf_size, W.buf_read
    buf_density, buf_order, buf_spill = W.buf_density, W.buf_order, W.buf_spill
    finish, cps, in_scen, busy, host_busy, order = W.finish, W.cps, W.in_scen, W.busy, W.host_busy, W.order
    ddr_cap = T.ddr_cap
    scen_ptr, scen_stages, scen_prob, after_ptr, after_ids, chain = (T.scen_ptr, T.scen_stages, T.scen_prob,
                                                                     T.after_ptr, T.after_ids, T.chain)
    for u in range(slots.shape[nowrap(0)]):         # remap changes only the moved units' rows, restore puts them back
        count2[nowrap(u)] = ncopy[nowrap(u)]
        for r in range(slots.shape[nowrap(1)]):
            slots2[nowrap(u), nowrap(r)] = slots[nowrap(u), nowrap(r)]
    for k_set in range(n_sets):
        if set_routes[nowrap(k_set)] >= 0:      # routes change: `rerouted_failures`
            continue
        n_dead = set_size[nowrap(k_set)]
        for x in range(n_dead):
            dead[nowrap(x)] = sets[nowrap(k_set), nowrap(x)]
            is_dead[nowrap(dead[nowrap(x)])] = True
        n_moved, ok = remap(unit_capacity, unit_kv, hbm_cap, n, dead, n_dead, is_dead, slots, ncopy, split, stacks,
                            chip_ptr, item_u, stored, slots2, count2, stored2, moved, moved_list)
        if not ok:
            restore(n_moved, moved_list, moved, slots, ncopy, slots2, count2)
            for x in range(n_dead):
                is_dead[nowrap(dead[nowrap(x)])] = False
            out[nowrap(k_set), nowrap(0)] = out[nowrap(k_set), nowrap(1)] = out[nowrap(k_set), nowrap(2)] = np.inf
            continue

        # --- chiplets whose contents change: failed ones and every holder of a moved unit, before or after ---
        n_a = 0
        for x in range(n_dead):
            if not in_a[nowrap(dead[nowrap(x)])]:
                in_a[nowrap(dead[nowrap(x)])] = True
                a_list[nowrap(n_a)] = dead[nowrap(x)]
                n_a += 1
        for x in range(n_moved):
            u = moved_list[nowrap(x)]
            for r in range(ncopy[nowrap(u)]):
                i = slots[nowrap(u), nowrap(r)]
                if not in_a[nowrap(i)]:
                    in_a[nowrap(i)] = True
                    a_list[nowrap(n_a)] = i
                    n_a += 1
            for r in range(count2[nowrap(u)]):
                i = slots2[nowrap(u), nowrap(r)]
                if not in_a[nowrap(i)]:
                    in_a[nowrap(i)] = True
                    a_list[nowrap(n_a)] = i
                    n_a += 1
        for i in range(n):
            overflow2[nowrap(i)] = overflow[nowrap(i)]
        n_full = 0                  # chiplets whose placement is re-computed go first in a_list
        for x in range(n_a):
            i = a_list[nowrap(x)]
            cap = stacks[nowrap(i)] * hbm_cap
            if is_dead[nowrap(i)]:
                overflow2[nowrap(i)] = 0.0
            elif placement_unchanged(cap, stored[nowrap(i)], stored2[nowrap(i)]):
                overflow2[nowrap(i)] = stored2[nowrap(i)] if cap <= 0.0 else 0.0
            else:
                n_items = gather_chiplet(i, n_moved, moved, moved_list, chip_ptr, item_u, item_r, slots2, count2,
                                         buf_u, buf_r)
                _, overflow2[nowrap(i)] = place_chiplet(cap, kind[nowrap(i)], buf_u, buf_r, 0, n_items, count2, split,
                                                unit_capacity, unit_kv, w_copy, other_dram, read_scale, buf_size,
                                                buf_read, buf_density, buf_order, buf_spill, f2)
                a_list[nowrap(x)] = a_list[nowrap(n_full)]
                a_list[nowrap(n_full)] = i
                n_full += 1
        spill = 0.0
        for i in range(n):
            spill += overflow2[nowrap(i)]
        short = max(spill - ddr * ddr_cap, 0.0)
        if short > short_limit:
            for x in range(n_a):
                in_a[nowrap(a_list[nowrap(x)])] = False
            restore(n_moved, moved_list, moved, slots, ncopy, slots2, count2)
            for x in range(n_dead):
                is_dead[nowrap(dead[nowrap(x)])] = False
            out[nowrap(k_set), nowrap(0)] = out[nowrap(k_set), nowrap(1)] = np.nan
            out[nowrap(k_set), nowrap(2)] = short
            continue

        # --- compute: take out the moved copies and put in their new ones; re-cost copies whose DDR share moved ---
        n_dirty = 0
        for x in range(n_moved):
            u = moved_list[nowrap(x)]
            s = unit_stage[nowrap(u)]
            n_dirty = mark_dirty(s, dirty, dirty_list, n_dirty, n, ct, hosts, ht, sd, stage_t, bk_ct, bk_ht, bk_sd,
                                 bk_stage_t, grouping, lq, bk_lq)
            alone = 0.0 if is_expert[nowrap(u)] else 1.0
            for r in range(ncopy[nowrap(u)]):
                i = slots[nowrap(u), nowrap(r)]
                ct[nowrap(s), nowrap(i)] -= copy_time[nowrap(u), nowrap(r)]
                if grouping:
                    lq[nowrap(s), nowrap(i)] -= group_lq[nowrap(u)]
                if hosts:
                    ht[nowrap(s), nowrap(i)] -= host_issue_s(launches, u, ar_time[nowrap(u)] > 0.0,
                                                             issue[nowrap(kind[nowrap(i)])], alone)
                sd[nowrap(s)] -= copy_ddr[nowrap(u), nowrap(r)]
            c = count2[nowrap(u)]
            t_ar = 0.0
            if split and c > 1:
                t_ar, _, _ = allreduce(u, slots2, c, out_bytes[nowrap(u)], n, pb, pair_ptr, pair_latency, pair_energy,
                                       link_bw)
            for r in range(c):
                i = slots2[nowrap(u), nowrap(r)]
                cap = stacks[nowrap(i)] * hbm_cap
                if placement_unchanged(cap, stored[nowrap(i)], stored2[nowrap(i)]):
                    f2[nowrap(u), nowrap(r)] = 1.0 if cap <= 0.0 else 0.0
                k = kind[nowrap(i)]
                t, b_ddr, _ = copy_roofline(u, k, c, w_ratio[nowrap(u), nowrap(c)], copy_bytes(w_copy, other_dram, u, c, k),
                                            f2[nowrap(u), nowrap(r)], stacks[nowrap(i)] * hbm_bw, ddr_bw, hbm_e, ddr_e,
                                            op_ptr, op_time, op_w, op_o, op_prob, op_inv, mem_eff, overhead, dispatch,
                                            alone)
                ct[nowrap(s), nowrap(i)] += t + t_ar
                if grouping:
                    lq[nowrap(s), nowrap(i)] += group_lq[nowrap(u)]
                if hosts:
                    ht[nowrap(s), nowrap(i)] += host_issue_s(launches, u, t_ar > 0.0, issue[nowrap(k)], alone)
                sd[nowrap(s)] += b_ddr
        for x in range(n_full):
            i = a_list[nowrap(x)]
            k = kind[nowrap(i)]
            for y in range(chip_ptr[nowrap(i)], chip_ptr[nowrap(i + 1)]):
                u = item_u[nowrap(y)]
                r = item_r[nowrap(y)]
                if moved[nowrap(u)] or f2[nowrap(u), nowrap(r)] == f[nowrap(u), nowrap(r)]:
                    continue
                s = unit_stage[nowrap(u)]
                n_dirty = mark_dirty(s, dirty, dirty_list, n_dirty, n, ct, hosts, ht, sd, stage_t, bk_ct, bk_ht,
                                     bk_sd, bk_stage_t, grouping, lq, bk_lq)
                c = ncopy[nowrap(u)]
                t, b_ddr, _ = copy_roofline(u, k, c, w_ratio[nowrap(u), nowrap(c)], copy_bytes(w_copy, other_dram, u, c, k),
                                            f2[nowrap(u), nowrap(r)], stacks[nowrap(i)] * hbm_bw, ddr_bw, hbm_e, ddr_e,
                                            op_ptr, op_time, op_w, op_o, op_prob, op_inv, mem_eff, overhead, dispatch,
                                            0.0 if is_expert[nowrap(u)] else 1.0)
                ct[nowrap(s), nowrap(i)] += t + ar_time[nowrap(u)] - copy_time[nowrap(u), nowrap(r)]
                sd[nowrap(s)] += b_ddr - copy_ddr[nowrap(u), nowrap(r)]
        for x in range(n_dirty):
            s = dirty_list[nowrap(x)]
            if group_kernels[nowrap(s)] > 0.0:
                regroup(s, n, kind, lq, bk_lq, group_kernels[nowrap(s)], overhead, issue, hosts, ct, ht)
            for y in range(n_dead):
                ct[nowrap(s), nowrap(dead[nowrap(y)])] = 0.0
                if hosts:
                    ht[nowrap(s), nowrap(dead[nowrap(y)])] = 0.0
            stage_t[nowrap(s)] = max(row_max(ct, s, n), sd[nowrap(s)] / ddr_bw)

        # --- hand-offs: re-route the edges touching moved units on copies of their stages' load rows ---
        n_edges = 0
        n_aff = 0
        if not screen:
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

        expected, p99 = scenario_latency(scen_ptr, scen_stages, scen_prob, after_ptr, after_ids, stage_repeat,
                                         chain, stage_t, comm, ct, hosts, ht, n, finish, cps, in_scen, busy,
                                         host_busy, order)
        wait = sequence_wait_s(T.kind_seq, T.sequences, kind, n)
        expected, p99 = expected + wait, p99 + wait

        # --- undo: the workspace holds the intact design again ---
        for k in range(n_aff):
            s, instance = aff_rows[nowrap(k)] // 2, aff_rows[nowrap(k)] % 2
            comm[nowrap(s), nowrap(instance)] = bk_comm[nowrap(k)]
            row_slot[nowrap(aff_rows[nowrap(k)])] = -1
        for k in range(n_edges):
            e = edge_list[nowrap(k)]
            edge_lat[nowrap(e)] = bk_edge_lat[nowrap(k)]
            seen[nowrap(e)] = False
        for x in range(n_dirty):
            s = dirty_list[nowrap(x)]
            for i in range(n):
                ct[nowrap(s), nowrap(i)] = bk_ct[nowrap(s), nowrap(i)]
                if grouping:
                    lq[nowrap(s), nowrap(i)] = bk_lq[nowrap(s), nowrap(i)]
                if hosts:
                    ht[nowrap(s), nowrap(i)] = bk_ht[nowrap(s), nowrap(i)]
            sd[nowrap(s)] = bk_sd[nowrap(s)]
            stage_t[nowrap(s)] = bk_stage_t[nowrap(s)]
            dirty[nowrap(s)] = False
        for x in range(n_a):
            in_a[nowrap(a_list[nowrap(x)])] = False
        restore(n_moved, moved_list, moved, slots, ncopy, slots2, count2)
        for x in range(n_dead):
            is_dead[nowrap(dead[nowrap(x)])] = False
        out[nowrap(k_set), nowrap(0)] = expected
        out[nowrap(k_set), nowrap(1)] = p99
        out[nowrap(k_set), nowrap(2)] = short


@nb.njit(cache=True, error_model="numpy")
def rerouted_failures(T, R, n, kind, stacks, ddr, slots, ncopy, split, sets, set_size, set_routes, n_sets, W, W2,
                      out, short_limit):
    """`failures_latency` for the failure sets that change routes (``set_routes[k]`` >= 0: the route table
    after the failure, dse.model.routes): the re-mapped design is evaluated in full on that table, in ``W2``.
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
