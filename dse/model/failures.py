"""Chiplet failures evaluated by deltas against the intact pass.

`failure_pass`: per design, its intact pass, then per failure set the design is re-mapped
(dse.model.failure_remap) and, starting from the intact pass, only what the failure changes is recomputed: the
moved units' copies; the chiplets that lost or gained copies are re-placed in HBM/DDR and those of their
copies whose DDR fraction changed re-costed; the hand-offs of edges touching a moved unit are re-routed (link
loads by subtraction and addition, on copies of their stages' load rows); and stage maxima are re-taken only
where something changed. Every change is undone afterwards, so the workspace again holds the intact design.
A failure whose latency provably stays within the intact design's needs no re-routing for a metrics row
(dse.model.failure_bound.settled_by_bound: its retained fraction is 1 either way).
A moved unit's new copies are costed (dse.model.copy_cost.copy_roofline) once per design for each (cost class,
chiplet class, copy count) held wholly in HBM (DDR fraction +0, on a re-placed chiplet too) or on a chiplet
without HBM (fraction 1): units of one class (dse.model.kernel_tables.cost_classes: every figure the roofline
reads of them the same bits; DeepSeek-V3 per layer: 262 classes of 14,972 units) on chiplets of one kind and HBM
stack count cost the same bits, so each such cost is kept in a memo (``W.memo_*``, valid for one design), seeded
with the intact pass's copies of that kind (no all-reduce, the same DDR fraction). The result equals a full evaluation
of the re-mapped design (tests/test_evaluator_faults.py). Failures that change routes are evaluated in full
instead (dse.model.failure_routes.rerouted_failures).

Its helpers are ``inline="always"`` and take arrays and scalars, not the table tuples (dse.model.perf_model,
"Implementation note"), except `remap`, `restore` and `settled_by_bound`, which are called (dse.model.failure_remap's
docstring says why); `failure_pass` itself is kept whole (its docstring says why).
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np

from .copy_cost import copy_bytes, copy_roofline, host_issue_s, kind_terms, local_memory, power_terms, sequence_wait_s
from .failure_bound import package_bounds, settled_by_bound
from .failure_remap import gather_chiplet, placement_unchanged, remap, restore
from .failure_routes import rerouted_failures
from .failure_sets import failure_sets
from .grouped import regroup
from .hand_offs import (add_route_once, allreduce, busiest_link, edge_amount, handoff_latency, in_instance,
                        longest_edge, next_copy_pair)
from .hbm_placement import local_capacity, place_merged
from .metric_rows import failure_summary, no_failures, within, write_metrics
from .perf_model import LATENCY, SHORT, base_passes, row_max
from .scenarios import scenario_latency

nowrap = nb.uintp      # see dse.model.perf_model: an unsigned index skips the negative-index wrap-around


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
def failure_pass(T, R, shapes, sizes, kinds, stacks_all, ddrs, slots_all, ncopies, split, W, W2, res, figures,
                 unplaced, limits, mc_sets, screen, sets, set_size, set_routes, after, out, first, last):
    """Designs d = ``first`` .. ``last`` - 1 (mesh shape ``shapes[d]``, ``sizes[d]`` chiplets, its kinds, HBM
    stacks, DDR channels, copy slots and copy counts), each with its failures: its intact pass
    (dse.model.perf_model.base_passes) into ``res[d]`` and ``W``; its metrics row ``out[d]``
    (dse.model.metric_rows.write_metrics, from its package ``figures[d]``); when that row lies within
    ``limits`` (dse.model.contract.FaultsWithin; +inf: always), its failure sets (dse.model.failure_sets) and per
    set k (chiplets ``sets[k, :set_size[k]]`` fail together) ``after[k]`` = (expected latency, p99, capacity
    shortfall) after it: infinite when nothing survives, latencies NaN (not computed) when the shortfall exceeds
    the intact design's (the evaluator counts such a failure as lost whatever its latency); then the row's
    failure columns (dse.model.metric_rows.failure_summary; with rows, a failure settled by dse.model.failure_bound
    holds upper bounds). ``out`` without rows (a report's, single_failures): every latency exact, left in ``after``.

    Sets with ``set_routes[k]`` = -1 (the routes stay as they are) are evaluated here by deltas from the intact
    pass in ``W``, which is left holding it; dse.model.failure_routes.rerouted_failures does the others in ``W2``.
    ``screen`` (the search's screening fidelity, dse.search.screening): the hand-offs keep the intact design's
    routes, link loads and latencies (the moved units' traffic is not re-routed): about half a failure's cost.

    The design loop is here, not in the caller: binding its ~150 arrays once per design cost 3.4-3.8 us of an
    exact design's ~170 (issue 52, fourteenth round; docs/performance.md has this round and the next).
    Kept whole: its re-placement, copy deltas and re-routing each need 33 to 57 of its arrays, more than Numba's
    inliner takes (called, they cost 30 to 60 % of the failure rate; smaller pieces inlined, 17 %).
    """
    unit_capacity, unit_kv, w_copy, other_dram = T.unit_capacity, T.unit_kv, T.unit_w_copy, T.unit_other_dram
    read_scale, unit_stage, out_bytes = T.unit_read_scale, T.unit_stage, T.unit_out_bytes
    unit_edge_ptr, unit_edges, stage_repeat = T.unit_edge_ptr, T.unit_edges, T.stage_repeat
    edge_start, edge_src, edge_dst, edge_bytes, edge_phase, edge_stage = (
        T.edge_start, T.edge_src, T.edge_dst, T.edge_bytes, T.edge_phase, T.edge_stage)
    hbm_cap, hbm_bw, hbm_e, ddr_e, link_bw = T.hbm_cap, T.hbm_bw, T.hbm_e, T.ddr_e, T.link_bw
    sram_cap, sram_bw, sram_e = T.kind_sram_cap, T.kind_sram_bw, T.kind_sram_e
    pair_ptr, pair_latency, pair_energy, walk_ptr, walk_links = (R.pair_ptr, R.pair_latency, R.pair_energy,
                                                                 R.walk_ptr, R.walk_links)
    link_inv_bw, edge_sync, row_bytes, row_sync = R.link_inv_bw, T.edge_sync, T.row_bytes, T.row_sync
    w_ratio, op_ptr, op_time, op_w, op_o, op_prob, op_inv = (T.unit_w_ratio, T.op_ptr, T.op_time, T.op_w, T.op_o,
                                                              T.op_prob, T.op_inv)
    mem_eff, overhead, dispatch, issue, launches = (T.kind_mem_eff, T.kind_overhead, T.kind_dispatch, T.kind_issue,
                                                    T.unit_launches)
    limit, floor, static_w, active_w, op_e = T.kind_limit, T.kind_floor, T.kind_static_w, T.kind_active_w, T.op_e
    pair_base, link_base, n_links = R.pair_base, R.link_base, R.n_links
    node_alt, link_alt, n_phys, mc_alt, hosts = R.node_alt, R.link_alt, R.n_phys, R.mc_alt, T.hosts
    ct, ht, sd, stage_t, comm, loads, edge_lat = W.ct, W.ht, W.sd, W.stage_t, W.comm, W.loads, W.edge_lat
    LM = loads.shape[nowrap(0)] // (2 * stage_repeat.shape[nowrap(0)])
    LF = W.new_loads.shape[nowrap(0)] // (2 * stage_repeat.shape[nowrap(0)])     # its rows' spare lanes: walk_routes
    f, f2, copy_time, copy_ddr, ar_time = W.f, W.f2, W.copy_time, W.copy_ddr, W.ar_time
    full = T.offload or W.f_sram.shape[0] > 0 or T.stream_buf > 0.0    # host/SSD, 3 tiers, streaming: in_full
    slots2, count2, moved, moved_list, dead, is_dead = W.slots2, W.count2, W.moved, W.moved_list, W.dead, W.is_dead
    chip_ptr, item_u, item_r, stored, stored2, in_a, a_list = W.chip_ptr, W.item_u, W.item_r, W.stored, W.stored2, W.in_a, W.a_list
    dirty, dirty_list, bk_ct, bk_ht, bk_sd, bk_stage_t = W.dirty, W.dirty_list, W.bk_ct, W.bk_ht, W.bk_sd, W.bk_stage_t
    lq, bk_lq, is_expert, group_lq, group_kernels = W.lq, W.bk_lq, T.unit_is_expert, T.unit_group_lq, T.stage_group_kernels
    grouping = group_kernels.shape[0] > 0 and group_kernels.max() > 0.0
    seen, edge_list, bk_edge_lat, edge_amt = W.seen, W.edge_list, W.bk_edge_lat, W.edge_amt
    row_slot, aff_rows, new_loads, bk_comm = W.row_slot, W.aff_rows, W.new_loads, W.bk_comm
    overflow, overflow2, ddr_bw_channel, tokens, ddr_cap = W.overflow, W.overflow2, T.ddr_bw, T.tokens, T.ddr_cap
    free, kind_seq, sequences = W.free, T.kind_seq, T.sequences      # read per failure: bound here once
    buf_u, buf_r, buf_size, buf_read = W.buf_u, W.buf_r, W.buf_size, W.buf_read
    buf_density, buf_order, buf_spill = W.buf_density, W.buf_order, W.buf_spill
    item_order, chip_sorted, buf_pos, buf_in = W.item_order, W.chip_sorted, W.buf_pos, W.buf_in
    finish, cps, in_scen, busy, host_busy, order = W.finish, W.cps, W.in_scen, W.busy, W.host_busy, W.order
    scen_ptr, scen_stages, scen_prob, after_ptr, after_ids, chain = (T.scen_ptr, T.scen_stages, T.scen_prob,
                                                                     T.after_ptr, T.after_ids, T.chain)
    ucls, memo_t, memo_d, memo_stamp, combo = T.unit_cost_class, W.memo_t, W.memo_d, W.memo_stamp, W.combo
    memo_calls, n_combos, memo_c = W.memo_calls, memo_t.shape[nowrap(1)], memo_t.shape[nowrap(2)]
    rows = out.shape[nowrap(0)] > 0
    for d in range(first, last):
        base_passes(T, R, shapes, sizes, kinds, stacks_all, ddrs, slots_all, ncopies, split, W, res, np.bool_(False),
                    d, d + 1)      # one compiled form for every caller: booleans and int64, no literals
        sh, n, ddr = shapes[nowrap(d)], sizes[nowrap(d)], ddrs[nowrap(d)]
        kind, stacks, slots, ncopy = kinds[nowrap(d)], stacks_all[nowrap(d)], slots_all[nowrap(d)], ncopies[nowrap(d)]
        latency, short_limit = res[nowrap(d), LATENCY], res[nowrap(d), SHORT]
        if rows:
            write_metrics(out[nowrap(d)], res[nowrap(d)], figures[nowrap(d)], tokens, unplaced[nowrap(d)])
            if not within(out[nowrap(d)], limits):
                no_failures(out[nowrap(d)])
                continue
        else:
            short_limit = np.inf
        singles, samples = failure_sets(sh, n, node_alt, link_alt, n_phys, mc_alt, mc_sets, full, sets, set_size,
                                        set_routes)
        n_sets = singles + samples
        pb, lb, L = pair_base[nowrap(sh)], link_base[nowrap(sh)], n_links[nowrap(sh)]
        ddr_bw = max(ddr * ddr_bw_channel, 1.0)
        route_s, byte_s = package_bounds(pair_latency, pb, n, link_inv_bw, lb, L, slots.shape[nowrap(1)] if split else 1)
        for u in range(slots.shape[nowrap(0)]):         # remap changes only the moved units' rows, restore puts them back
            count2[nowrap(u)] = ncopy[nowrap(u)]
            for r in range(slots.shape[nowrap(1)]):
                slots2[nowrap(u), nowrap(r)] = slots[nowrap(u), nowrap(r)]
        # --- the copy-cost memo (module docstring), per design: chiplet classes, then the intact pass costs ---
        memo_calls[0] += 1
        stamp = memo_calls[0]
        deltas = False
        for k_set in range(n_sets):
            deltas = deltas or set_routes[nowrap(k_set)] < 0
        if deltas:
            n_c = 0
            for i in range(n):
                same = -1
                for j in range(i):
                    if kind[nowrap(j)] == kind[nowrap(i)] and stacks[nowrap(j)] == stacks[nowrap(i)]:
                        same = j
                        break
                if same >= 0:
                    combo[nowrap(i)] = combo[nowrap(same)]
                elif n_c < n_combos:
                    combo[nowrap(i)] = n_c
                    n_c += 1
                else:
                    combo[nowrap(i)] = -1
            for u in range(slots.shape[nowrap(0)]):
                c = ncopy[nowrap(u)]
                if c >= memo_c or ar_time[nowrap(u)] != 0.0:      # copy_time holds t + all-reduce
                    continue
                for r in range(c):
                    i = slots[nowrap(u), nowrap(r)]
                    j = combo[nowrap(i)]
                    fr = f[nowrap(u), nowrap(r)]
                    cap = local_capacity(stacks[nowrap(i)], hbm_cap, sram_cap[nowrap(kind[nowrap(i)])])
                    if j >= 0 and fr == (1.0 if cap <= 0.0 else 0.0) and math.copysign(1.0, fr) > 0.0:
                        memo_stamp[nowrap(ucls[nowrap(u)]), nowrap(j), nowrap(c)] = stamp
                        memo_t[nowrap(ucls[nowrap(u)]), nowrap(j), nowrap(c)] = copy_time[nowrap(u), nowrap(r)]
                        memo_d[nowrap(ucls[nowrap(u)]), nowrap(j), nowrap(c)] = copy_ddr[nowrap(u), nowrap(r)]
        for k_set in range(n_sets):
            if set_routes[nowrap(k_set)] >= 0:      # routes change: failure_routes.rerouted_failures
                continue
            n_dead = set_size[nowrap(k_set)]
            for x in range(n_dead):
                dead[nowrap(x)] = sets[nowrap(k_set), nowrap(x)]
                is_dead[nowrap(dead[nowrap(x)])] = True
            n_moved, ok = remap(unit_capacity, unit_kv, hbm_cap, sram_cap, kind, n, dead, n_dead, is_dead, slots, ncopy,
                                split, stacks, chip_ptr, item_u, stored, slots2, count2, stored2, moved, moved_list,
                                free)
            if not ok:
                restore(n_moved, moved_list, moved, slots, ncopy, slots2, count2)
                for x in range(n_dead):
                    is_dead[nowrap(dead[nowrap(x)])] = False
                after[nowrap(k_set), nowrap(0)] = after[nowrap(k_set), nowrap(1)] = after[nowrap(k_set), nowrap(2)] = np.inf
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
                cap = local_capacity(stacks[nowrap(i)], hbm_cap, sram_cap[nowrap(kind[nowrap(i)])])
                if is_dead[nowrap(i)]:
                    overflow2[nowrap(i)] = 0.0
                elif placement_unchanged(cap, stored[nowrap(i)], stored2[nowrap(i)]):
                    overflow2[nowrap(i)] = stored2[nowrap(i)] if cap <= 0.0 else 0.0
                else:
                    n_items = gather_chiplet(i, n_moved, moved, moved_list, chip_ptr, item_u, item_r, slots2, count2,
                                             buf_u, buf_r, buf_pos)
                    # from the intact density order where the base pass sorted this chiplet's copies, else a full sort
                    b_i = chip_ptr[nowrap(i + 1)] if chip_sorted[nowrap(i)] else chip_ptr[nowrap(i)]
                    overflow2[nowrap(i)] = place_merged(cap, kind[nowrap(i)], chip_ptr[nowrap(i)], b_i, item_u,
                                                        item_order, moved, buf_pos, buf_u, buf_r, n_items, count2, split,
                                                        unit_capacity, unit_kv, w_copy, other_dram, read_scale, buf_size,
                                                        buf_read, buf_density, buf_order, buf_spill, buf_in, f2)
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
                after[nowrap(k_set), nowrap(0)] = after[nowrap(k_set), nowrap(1)] = np.nan
                after[nowrap(k_set), nowrap(2)] = short
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
                    cap = local_capacity(stacks[nowrap(i)], hbm_cap, sram_cap[nowrap(kind[nowrap(i)])])
                    j = combo[nowrap(i)] if c < memo_c else -1      # its slot in the memo, -1: none
                    if placement_unchanged(cap, stored[nowrap(i)], stored2[nowrap(i)]):
                        f2[nowrap(u), nowrap(r)] = 1.0 if cap <= 0.0 else 0.0
                    elif f2[nowrap(u), nowrap(r)] != 0.0 or math.copysign(1.0, f2[nowrap(u), nowrap(r)]) < 0.0:
                        j = -1          # re-placed (so with HBM; place_merged set f2): the memo holds HBM copies only
                    k = kind[nowrap(i)]
                    if j >= 0 and memo_stamp[nowrap(ucls[nowrap(u)]), nowrap(j), nowrap(c)] == stamp:
                        t = memo_t[nowrap(ucls[nowrap(u)]), nowrap(j), nowrap(c)]
                        b_ddr = memo_d[nowrap(ucls[nowrap(u)]), nowrap(j), nowrap(c)]
                    else:
                        cc = copy_roofline(u, k, c, w_ratio[nowrap(u), nowrap(c)],
                                           copy_bytes(w_copy, other_dram, u, c, k), f2[nowrap(u), nowrap(r)], 0.0,
                                           local_memory(stacks[nowrap(i)], hbm_bw, hbm_e, sram_bw[nowrap(k)],
                                                        sram_e[nowrap(k)], ddr_bw, ddr_e, 0.0),
                                           kind_terms(mem_eff, overhead, dispatch, k, alone), op_ptr, op_time,
                                           op_w, op_o, op_prob, op_inv,
                                           power_terms(limit, floor, static_w, active_w, k), op_e)
                        t, b_ddr = cc.time_s, cc.ddr_bytes
                        if j >= 0:
                            memo_stamp[nowrap(ucls[nowrap(u)]), nowrap(j), nowrap(c)] = stamp
                            memo_t[nowrap(ucls[nowrap(u)]), nowrap(j), nowrap(c)] = t
                            memo_d[nowrap(ucls[nowrap(u)]), nowrap(j), nowrap(c)] = b_ddr
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
                    cc = copy_roofline(u, k, c, w_ratio[nowrap(u), nowrap(c)],
                                       copy_bytes(w_copy, other_dram, u, c, k), f2[nowrap(u), nowrap(r)], 0.0,
                                       local_memory(stacks[nowrap(i)], hbm_bw, hbm_e, sram_bw[nowrap(k)],
                                                    sram_e[nowrap(k)], ddr_bw, ddr_e, 0.0),
                                       kind_terms(mem_eff, overhead, dispatch, k,
                                                  0.0 if is_expert[nowrap(u)] else 1.0),
                                       op_ptr, op_time, op_w, op_o, op_prob, op_inv,
                                       power_terms(limit, floor, static_w, active_w, k), op_e)
                    t, b_ddr = cc.time_s, cc.ddr_bytes
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

            # --- hand-offs: re-route the edges touching moved units on copies of their stages' load rows, unless a
            # bound on the latency settles the failure's metrics without (dse.model.failure_bound) ---
            wait = sequence_wait_s(kind_seq, sequences, kind, n)
            n_edges, n_aff, settled, expected, p99 = 0, 0, False, 0.0, 0.0
            if not screen:
                for x in range(n_moved):
                    u = moved_list[nowrap(x)]
                    for y in range(unit_edge_ptr[nowrap(u)], unit_edge_ptr[nowrap(u + 1)]):
                        e = unit_edges[nowrap(y)]
                        if not seen[nowrap(e)]:
                            seen[nowrap(e)] = True
                            edge_list[nowrap(n_edges)] = e
                            n_edges += 1
                if rows:
                    settled, expected, p99 = settled_by_bound(
                        edge_list, n_edges, edge_stage, edge_phase, stage_repeat, row_bytes, row_sync, route_s, byte_s,
                        comm, row_slot, aff_rows, bk_comm, latency, wait, scen_ptr, scen_stages, scen_prob, after_ptr,
                        after_ids, chain, stage_t, ct, hosts, ht, n, finish, cps, in_scen, busy, host_busy, order)
                for k in range(0 if settled else n_edges):
                    e = edge_list[nowrap(k)]
                    s = edge_stage[nowrap(e)]
                    bk_edge_lat[nowrap(k)] = edge_lat[nowrap(e)]
                    a, b = edge_src[nowrap(e)], edge_dst[nowrap(e)]
                    ca_old, cb_old = (1 if split else ncopy[nowrap(a)]), ncopy[nowrap(b)]
                    ca_new, cb_new = (1 if split else count2[nowrap(a)]), count2[nowrap(b)]
                    old_amount = edge_amt[nowrap(e)]       # edge_amount of the intact counts, as the base pass took it
                    new_amount = edge_amount(edge_bytes[nowrap(e)], ca_new, cb_new, split)
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
                            for link in range(L):       # its spare lanes are written to, never read
                                new_loads[nowrap(slot * LF + link)] = loads[nowrap(row * LM + link)]
                        base = slot * LF
                        # a chiplet's route to itself is empty and takes no time on the intact routes: no i != j test.
                        # Each edge's copy pairs in one loop per side, in the nested loops' order (`next_copy_pair`)
                        ra = 0
                        rb = 0
                        for _ in range(ca_old * cb_old):
                            add_route_once(new_loads, base, walk_ptr, walk_links,
                                           pb + slots[nowrap(a), nowrap(ra)] * n + slots[nowrap(b), nowrap(rb)],
                                           -old_amount)
                            ra, rb = next_copy_pair(ra, rb, cb_old)
                        longest = 0.0
                        ra = 0
                        rb = 0
                        for _ in range(ca_new * cb_new):
                            p = pb + slots2[nowrap(a), nowrap(ra)] * n + slots2[nowrap(b), nowrap(rb)]
                            longest = max(longest, pair_latency[nowrap(p)])
                            add_route_once(new_loads, base, walk_ptr, walk_links, p, new_amount)
                            ra, rb = next_copy_pair(ra, rb, cb_new)
                        edge_lat[nowrap(e)] = handoff_latency(longest, edge_sync[nowrap(e)])
                for k in range(n_aff):
                    s, instance = aff_rows[nowrap(k)] // 2, aff_rows[nowrap(k)] % 2
                    bk_comm[nowrap(k)] = comm[nowrap(s), nowrap(instance)]
                    comm[nowrap(s), nowrap(instance)] = (longest_edge(edge_start, edge_phase, edge_lat, s, instance)
                                         + busiest_link(new_loads, k * LF, link_inv_bw, lb, L))

            if not settled:
                expected, p99 = scenario_latency(scen_ptr, scen_stages, scen_prob, after_ptr, after_ids, stage_repeat,
                                                 chain, stage_t, comm, ct, hosts, ht, n, finish, cps, in_scen, busy,
                                                 host_busy, order)
                expected, p99 = expected + wait, p99 + wait

            # --- undo: the workspace holds the intact design again ---
            for k in range(n_aff):
                s, instance = aff_rows[nowrap(k)] // 2, aff_rows[nowrap(k)] % 2
                comm[nowrap(s), nowrap(instance)] = bk_comm[nowrap(k)]
                row_slot[nowrap(aff_rows[nowrap(k)])] = -1
            for k in range(n_edges):
                e = edge_list[nowrap(k)]
                edge_lat[nowrap(e)] = edge_lat[nowrap(e)] if settled else bk_edge_lat[nowrap(k)]
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
            after[nowrap(k_set), nowrap(0)] = expected
            after[nowrap(k_set), nowrap(1)] = p99
            after[nowrap(k_set), nowrap(2)] = short
        # sets that change routes: failed routers or links (and their Monte Carlo sets), or every set in full
        if full or node_alt[nowrap(sh)] >= 0 or n_phys[nowrap(sh)] > 0:
            rerouted_failures(T, R, n, kind, stacks, ddr, slots, ncopy, split, sets, set_size, set_routes, n_sets, W,
                              W2, after, short_limit)
        if rows:
            failure_summary(latency, short_limit, after, singles, samples, out[nowrap(d)])
