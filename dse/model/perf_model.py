"""Latency and energy of one step of a design: the Numba core the population evaluator calls.

Model, per stage s of the workload (repeated ``repeat_s`` times for identical layers):

* Memory: each chiplet holds its units' copies: weights (a full copy per replica, 1/c per shard) and
  KV cache (1/c per copy). Copies fill the chiplet's HBM (an SRAM-resident kind without HBM: its SRAM, at
  the SRAM's bandwidth and energy; dse.model.hbm_placement.local_capacity) densest first (bytes read per step per byte
  stored; the fractional-knapsack optimum for DDR traffic, memory.placement) and the rest spills to
  the package's shared DDR, so hot experts sit in HBM and cold ones in DDR (dse.model.hbm_placement). Spill
  beyond the DDR's capacity is a capacity shortfall (a constraint violation); latency counts it as DDR-resident.
* A unit copy runs its operators one kernel after another, each overlapping its compute (arch cost
  table) with its memory traffic (its HBM bytes / the chiplet's sustained HBM bandwidth + its DDR bytes
  / the package's sustained DDR bandwidth, both at the chiplet's ``mem_efficiency``) in a load-compute
  pipeline, plus the chiplet's kernel overhead (arch.roofline; dse.model.copy_cost.copy_roofline); with
  ``dispatch_mode`` per_kernel, never shorter than the host's dispatch time. A replica of a routed expert reads
  its weights when any of its 1/c share of the tokens selects it (dse.model.kernel_tables.weight_per_copy).
  Copies on one chiplet run one after another.
* A stage lasts as long as its slowest chiplet, and at least its DDR bytes / DDR bandwidth (shared).
  With host DRAM or SSD tiers below the DDR (dse.model.offload), the bytes it reads from them are
  fetched into HBM first: their fetch time adds to the stage.
* Shards of a one-to-many unit all-reduce their output with a ring (dse.model.hand_offs.allreduce).
* Hand-offs into a stage (workload graph edges; dse.model.hand_offs) follow the package's route tables
  (dse.model.routes): the stage waits for the longest route (zero-load latency) plus the collective's software
  steps (a ring all-reduce between tensor-parallel shards takes 2(t - 1), each the link's ``sync_latency_s``)
  plus the busiest link's serialisation (bytes / bandwidth). A group of r identical layers pays its entry
  hand-offs once and its layer-to-layer ones r - 1 times.
* The host of a chiplet whose ``dispatch_mode`` is ahead (the default) issues its kernels, one per
  ``dispatch_s``, while the device runs earlier ones (CUDA streams): its issue time per stage (`ht`,
  dse.model.copy_cost.host_issue_s: operators and all-reduces) runs in parallel with the device's work.
* Stages form a DAG; a workload's scenarios (sets of stages run together, e.g. the expert models an
  ensemble's router picks) each take the longest of their critical path, their busiest chiplet's
  total work and their busiest host's issue time (dse.model.scenarios); latency is the expectation over
  scenarios, and the 99th percentile is reported too. The serving framework's work per sequence
  (``sequence_s``, the slowest kind's) adds batch x that to both (dse.model.copy_cost.sequence_wait_s).
* Energy: compute + SRAM (arch table) plus each chiplet's active power (arch.active_power_w: clocks and
  control of a busy chip) over its copies' kernel time, DRAM bytes x energy per byte, network bytes x
  energy per byte along each route (links and routers), static power x latency (added by the evaluator).

Failures are evaluated by deltas against this intact pass (dse.model.failures).

Implementation note (speed): a population is evaluated in one call
(dse.model.population_kernel.evaluate_arrays). The kernels (`base_passes`, dse.model.failures.failure_pass)
take the table tuples (T, R, W) once, bind the arrays they use to locals, and call nothing but
``inline="always"`` helpers, with arrays and scalars: binding an array costs a
reference-count update, so a kernel called per design with ~150 arrays in its tuples pays about 3.5 us a
call, most of a small package's evaluation; `base_passes` therefore loops over a block of designs itself, and
so does the failure pass (which calls `base_passes` for one design at a time, each design's failures starting
from its own intact pass). Array indices are
cast to unsigned (``nowrap``): Numba then leaves out its negative-index wrap-around, a shift, mask and add
on every access that cost a fifth of the time. Link loads are one flat row of ``LM`` floats per (stage,
instance): ``loads[(2 s + instance) LM + link]``.
"""
from __future__ import annotations

from collections import namedtuple

import numba as nb
import numpy as np

from .copy_cost import copy_bytes, copy_roofline, host_issue_s, kind_terms, local_memory, power_terms, sequence_wait_s
from .copy_table import table_entry
from .grouped import add_groups
from .hand_offs import allreduce, stage_hand_offs
from .hbm_placement import place_design_ordered, stream_bandwidth
from .offload import place_below, stage_fetch
from .scenarios import scenario_latency

#: what the intact pass gives per design: capacity shortfall [B], expected and p99 latency [s], compute and
#: DRAM energy [J], DRAM bytes, network byte-hops and network energy [J], each of the whole step, and the
#: energy [J] its chiplets draw beyond leakage while they wait (`idle_energy_j`)
PASS_FIELDS = ("short", "latency", "p99", "e_compute", "e_dram", "dram", "net", "e_net", "e_idle")
SHORT, LATENCY, P99, E_COMPUTE, E_DRAM, DRAM, NET, E_NET, E_IDLE = range(len(PASS_FIELDS))

# Hot loops index arrays with ``nowrap(i)``: Numba skips the negative-index wrap-around of an unsigned index
# (a shift, a mask and an add per access, and loops left unvectorised). Only for indices never negative.
nowrap = nb.uintp

#: what dse.model.offload.stage_fetch reads of the kernel tables (`base_passes` hands it these, not the tables)
FetchTerms = namedtuple("FetchTerms", ["link_bps", "ssd_bps", "host_e", "ssd_e"])


@nb.njit(cache=True, inline="always", error_model="numpy")
def row_max(a, s, n):
    """max(a[s, :n]) without making a view."""
    m = a[nowrap(s), nowrap(0)]
    for i in range(1, n):
        m = max(m, a[nowrap(s), nowrap(i)])
    return m


@nb.njit(cache=True, inline="always", error_model="numpy")
def idle_energy_j(latency, ct, stage_prob, stage_repeat, kind, idle_extra, n):
    """Energy the design's chiplets draw beyond their leakage while they wait in a step of ``latency``: each
    chiplet's kind's idle power less its leakage (arch.power.idle_power_w) over the step less its busy time
    (its copies' kernel time, ``ct``, of every stage by repeat and probability): the gaps of a pipeline,
    chiplets that wait for a slower one, and chiplets that hold no unit at all."""
    e = 0.0
    for i in range(n):
        extra = idle_extra[nowrap(kind[nowrap(i)])]
        if extra <= 0.0:
            continue
        busy = 0.0
        for s in range(stage_repeat.shape[nowrap(0)]):
            busy += stage_prob[nowrap(s)] * stage_repeat[nowrap(s)] * ct[nowrap(s), nowrap(i)]
        e += extra * max(latency - busy, 0.0)
    return e


@nb.njit(cache=True, inline="always", error_model="numpy")
def step_totals(stage_prob, stage_repeat, stage_e_compute, stage_e_dram, stage_dram, stage_net, stage_e_net, row):
    """The whole step's compute energy, DRAM energy, DRAM bytes, byte-hops and network energy into its pass
    ``row`` (`PASS_FIELDS`): each stage's per-instance figures weighed by its repeat and probability (the
    network's are already per step)."""
    e_compute = e_dram = dram = net = e_net = 0.0
    for s in range(stage_repeat.shape[nowrap(0)]):
        weight = stage_prob[nowrap(s)] * stage_repeat[nowrap(s)]
        e_compute += weight * stage_e_compute[nowrap(s)]
        e_dram += weight * stage_e_dram[nowrap(s)]
        dram += weight * stage_dram[nowrap(s)]
        net += stage_prob[nowrap(s)] * stage_net[nowrap(s)]
        e_net += stage_prob[nowrap(s)] * stage_e_net[nowrap(s)]
    row[E_COMPUTE] = e_compute
    row[E_DRAM] = e_dram
    row[DRAM] = dram
    row[NET] = net
    row[E_NET] = e_net


@nb.njit(cache=True, inline="always", error_model="numpy")
def same_package(d, shapes, sizes, kinds, stacks_all, ddrs):
    """Whether design ``d`` has design ``d - 1``'s package (mesh shape, chiplets, kinds, HBM stacks, DDR)."""
    if d == 0 or shapes[nowrap(d)] != shapes[nowrap(d - 1)] or sizes[nowrap(d)] != sizes[nowrap(d - 1)] \
            or ddrs[nowrap(d)] != ddrs[nowrap(d - 1)]:
        return False
    for i in range(sizes[nowrap(d)]):
        if kinds[nowrap(d), nowrap(i)] != kinds[nowrap(d - 1), nowrap(i)] \
                or stacks_all[nowrap(d), nowrap(i)] != stacks_all[nowrap(d - 1), nowrap(i)]:
            return False
    return True


@nb.njit(cache=True, inline="always", error_model="numpy")
def changed_stages(slots, ncopy, prev_slots, prev_ncopy, f, f_prev, stage_start, edge_start, edge_src, edge_dst,
                   moved, dirty):
    """Incremental costing (docs/runtime.md, "Cost"): ``dirty[s]`` whether stage s of a design must be costed
    again after the previous design of the same package (whose per-stage figures the workspace holds): some
    unit of the stage, or an end of a hand-off into it, has other copies, chiplets or HBM fractions
    (``moved[u]``). A stage whose inputs are all equal gives the same figures, bit for bit."""
    for u in range(ncopy.shape[nowrap(0)]):
        c = ncopy[nowrap(u)]
        m = c != prev_ncopy[nowrap(u)]
        for r in range(c if not m else 0):
            if slots[nowrap(u), nowrap(r)] != prev_slots[nowrap(u), nowrap(r)] \
                    or f[nowrap(u), nowrap(r)] != f_prev[nowrap(u), nowrap(r)]:
                m = True
        moved[nowrap(u)] = m
    for s in range(dirty.shape[nowrap(0)]):
        x = False
        for u in range(stage_start[nowrap(s)], stage_start[nowrap(s + 1)]):
            if moved[nowrap(u)]:
                x = True
        for e in range(edge_start[nowrap(s)], edge_start[nowrap(s + 1)]):
            if moved[nowrap(edge_src[nowrap(e)])] or moved[nowrap(edge_dst[nowrap(e)])]:
                x = True
        dirty[nowrap(s)] = x


@nb.njit(cache=True, error_model="numpy")
def base_passes(T, R, shapes, sizes, kinds, stacks_all, ddrs, slots_all, ncopies, split, W, res, incremental, first,
                last):
    """The intact pass of designs d = ``first`` .. ``last`` - 1 (mesh shape ``shapes[d]``, ``sizes[d]`` chiplets, its kinds, HBM stacks,
    DDR channels, copy slots and copy counts): its figures into ``res[d]`` (`PASS_FIELDS`); ``W`` is left
    holding the last design's per-stage and per-copy figures (what dse.model.failures starts from).

    The tables are bound once for all the designs: bound per design (a call per design), their reference
    counts took 3.5 us of a small package's 5 us.

    Kept whole: a helper taking the bound arrays would need more than 30 arguments and could not be inlined
    (docs/architecture.md, Speed); the stage loop binds them once per block of designs.

    ``incremental``: a design with the previous design's package costs again only the stages whose inputs
    differ from that design's (`changed_stages`; the others keep the figures ``W`` holds): the same result,
    bit for bit, for a population of nearly equal mappings (dse.runtime's segments) ordered so.

    ``first`` / ``last``: a caller that needs each design's ``W`` (dse.model.failures.failure_pass) runs one
    design at a time on the population's own arrays, without the per-design arrays and reshapes of
    `base_pass` (issue 52, ninth round).

    The call's entry: Numba takes a reference to every array of the tuples T, R and W (about 190) when the
    call starts and gives them back where a tuple is last read. Every read of T, R and W is in the first
    block, before any branch (the arrays the loop needs bound to locals there, `FetchTerms` for
    dse.model.offload.stage_fetch), so both ends of those reference counts fall in one basic block and Numba's
    reference-count pruning removes them; only the locals' own references (about 120) are taken per call.
    When the loop read the tuples, the pairs spanned the loop and stayed: a call over an empty range cost
    5.9 us against 3.9 now (issue 52, tenth round), paid per design by the failure pass."""
    unit_capacity, unit_kv, w_copy, other_dram = T.unit_capacity, T.unit_kv, T.unit_w_copy, T.unit_other_dram
    unit_energy, read_scale, out_bytes = T.unit_energy, T.unit_read_scale, T.unit_out_bytes
    active_w, is_expert, group_lq, group_kernels = (T.kind_active_w, T.unit_is_expert, T.unit_group_lq,
                                                    T.stage_group_kernels)
    lq = W.lq
    stage_start, stage_repeat = T.stage_start, T.stage_repeat
    edge_start, edge_src, edge_dst, edge_bytes, edge_phase = (T.edge_start, T.edge_src, T.edge_dst, T.edge_bytes,
                                                              T.edge_phase)
    hbm_cap, hbm_bw, hbm_e, ddr_e, link_bw = T.hbm_cap, T.hbm_bw, T.hbm_e, T.ddr_e, T.link_bw
    sram_cap, sram_bw, sram_e = T.kind_sram_cap, T.kind_sram_bw, T.kind_sram_e
    pair_ptr, pad_ptr, pad_links, pair_latency, pair_energy = (R.pair_ptr, R.pad_ptr, R.pad_links, R.pair_latency,
                                                               R.pair_energy)
    link_inv_bw, edge_sync = R.link_inv_bw, T.edge_sync
    w_ratio, op_ptr, op_time, op_w, op_o, op_prob, op_inv = (T.unit_w_ratio, T.op_ptr, T.op_time, T.op_w, T.op_o,
                                                              T.op_prob, T.op_inv)
    limit, floor, static_w, op_e, idle_extra = T.kind_limit, T.kind_floor, T.kind_static_w, T.op_e, T.kind_idle_extra
    mem_eff, overhead, dispatch, issue, launches = (T.kind_mem_eff, T.kind_overhead, T.kind_dispatch, T.kind_issue,
                                                    T.unit_launches)
    ct, ht, loads, edge_lat, edge_amt, f, comm = W.ct, W.ht, W.loads, W.edge_lat, W.edge_amt, W.f, W.comm
    copy_time, copy_ddr, ar_time = W.copy_time, W.copy_ddr, W.ar_time
    chip_ptr, item_u, item_r, stored, overflow = W.chip_ptr, W.item_u, W.item_r, W.stored, W.overflow
    buf_size, buf_read, buf_density, buf_order, buf_spill = (W.buf_size, W.buf_read, W.buf_density, W.buf_order,
                                                             W.buf_spill)
    sd_, stage_t = W.sd, W.stage_t
    pair_amt, pair_seen, pair_list = W.pair_amt, W.pair_seen, W.pair_list
    stage_e_compute, stage_e_dram, stage_dram, stage_net, stage_e_net = (
        W.stage_e_compute, W.stage_e_dram, W.stage_dram, W.stage_net, W.stage_e_net)

    scen_ptr, scen_stages, scen_prob, after_ptr, after_ids = (T.scen_ptr, T.scen_stages, T.scen_prob, T.after_ptr,
                                                          T.after_ids)
    finish, cps, in_scen, busy, order, stage_prob = W.finish, W.cps, W.in_scen, W.busy, W.order, T.stage_prob
    host_busy, hosts = W.host_busy, T.hosts
    offload, f_host, f_ssd = T.offload, W.f_host, W.f_ssd
    f_prev, moved, dirty = W.f2, W.moved, W.dirty       # incremental: the previous design's HBM fractions
    f_sram = W.f_sram
    three = f_sram.shape[nowrap(0)] > 0                 # SRAM in front of HBM somewhere: no incremental costing
    stream_buf = T.stream_buf                           # weight streaming (> 0): no incremental costing either
    copy_tab, copy_fixed, n_stacks = T.copy_table, T.copy_fixed, T.copy_stacks      # dse.model.copy_table
    pair_base, link_base, n_links = R.pair_base, R.link_base, R.n_links
    cursor, item_order, chip_sorted, buf_u = W.cursor, W.item_order, W.chip_sorted, W.buf_u
    ddr_cap, host_cap, ssd_cap, ddr_bw_channel = T.ddr_cap, T.host_cap, T.ssd_cap, T.ddr_bw
    chain, kind_seq, sequences = T.chain, T.kind_seq, T.sequences
    fetch = FetchTerms(T.link_bps, T.ssd_bps, T.host_e, T.ssd_e)
    # T, R and W are read last above, before the first branch: see the docstring (the call's entry)
    grouping = group_kernels.shape[0] > 0 and group_kernels.max() > 0.0
    LM = loads.shape[nowrap(0)] // (2 * stage_repeat.shape[nowrap(0)])
    n_fixed = copy_fixed.shape[nowrap(1)]
    for d in range(first, last):
        sh, n, ddr = shapes[nowrap(d)], sizes[nowrap(d)], ddrs[nowrap(d)]
        kind, stacks, slots, ncopy = kinds[nowrap(d)], stacks_all[nowrap(d)], slots_all[nowrap(d)], ncopies[nowrap(d)]
        pb, lb, L = pair_base[nowrap(sh)], link_base[nowrap(sh)], n_links[nowrap(sh)]
        same = False
        if incremental and not offload and not three and stream_buf <= 0.0:
            same = same_package(d, shapes, sizes, kinds, stacks_all, ddrs)
        if same:
            f_prev[:, :] = f

        # --- memory: each chiplet's copies into its HBM, densest first; the rest spills to DDR ---
        spill = place_design_ordered(n, kind, stacks, slots, ncopy, split, hbm_cap, sram_cap, stream_buf,
                                     unit_capacity, unit_kv, w_copy, other_dram, read_scale, chip_ptr, cursor, item_u, item_r,
                                     stored, overflow, f, f_sram, buf_size, buf_read, buf_density, buf_order,
                                     buf_spill, item_order, chip_sorted)
        short = max(spill - ddr * ddr_cap, 0.0)
        if offload:       # host DRAM and SSD below the DDR (dse.model.offload)
            short = place_below(n, kind, chip_ptr, item_u, item_r, ncopy, split, unit_capacity, unit_kv, w_copy,
                                other_dram, read_scale, ddr * ddr_cap, host_cap, ssd_cap, f, f_host, f_ssd,
                                buf_size, buf_read, buf_density, buf_order, buf_spill, buf_u)
        ddr_bw = max(ddr * ddr_bw_channel, 1.0)
        if same:
            changed_stages(slots, ncopy, slots_all[nowrap(d - 1)], ncopies[nowrap(d - 1)], f, f_prev, stage_start,
                           edge_start, edge_src, edge_dst, moved, dirty)

        # --- compute per stage, then the hand-offs into it ---
        fill = 0.0              # weight streaming's fill: the first streamed stage's longest transfer
        fill_stage = -1
        for s in range(stage_repeat.shape[nowrap(0)]):
            if same and not dirty[nowrap(s)]:
                continue
            for i in range(n):
                ct[nowrap(s), nowrap(i)] = 0.0
                if grouping:
                    lq[nowrap(s), nowrap(i)] = 0.0
                if hosts:                           # else ht stays all 0
                    ht[nowrap(s), nowrap(i)] = 0.0
            sd = e_compute = e_dram = dram = net = e_net = 0.0
            for u in range(stage_start[nowrap(s)], stage_start[nowrap(s + 1)]):
                c = ncopy[nowrap(u)]
                ar_time[nowrap(u)] = 0.0
                if split and c > 1:
                    t_ar, hops, e_ar = allreduce(u, slots, c, out_bytes[nowrap(u)], n, pb, pair_ptr, pair_latency,
                                                 pair_energy, link_bw)
                    ar_time[nowrap(u)] = t_ar
                    net += hops
                    e_net += e_ar
                alone = 0.0 if is_expert[nowrap(u)] else 1.0
                for r in range(c):
                    i = slots[nowrap(u), nowrap(r)]
                    k = kind[nowrap(i)]
                    if c <= n_fixed:        # the study's figures of (u, c, k) (dse.model.copy_table)
                        b = copy_fixed[nowrap(u), nowrap(c - 1), nowrap(k), nowrap(0)]
                        e_unit = copy_fixed[nowrap(u), nowrap(c - 1), nowrap(k), nowrap(1)]
                    else:
                        b = copy_bytes(w_copy, other_dram, u, c, k)
                        e_unit = unit_energy[nowrap(u), nowrap(k)] / c
                    v = table_entry(copy_tab, n_stacks, c, k, stacks[nowrap(i)], hbm_bw, sram_bw[nowrap(k)], ddr,
                                    f[nowrap(u), nowrap(r)])
                    if v >= 0:              # a cost of the study alone, looked up (dse.model.copy_table)
                        t = copy_tab[nowrap(u), nowrap(c - 1), nowrap(k), nowrap(v), nowrap(0)]
                        b_ddr = copy_tab[nowrap(u), nowrap(c - 1), nowrap(k), nowrap(v), nowrap(1)]
                        ed = copy_tab[nowrap(u), nowrap(c - 1), nowrap(k), nowrap(v), nowrap(2)]
                        de = copy_tab[nowrap(u), nowrap(c - 1), nowrap(k), nowrap(v), nowrap(3)]
                    else:
                        cc = copy_roofline(u, k, c, w_ratio[nowrap(u), nowrap(c)], b, f[nowrap(u), nowrap(r)],
                                           f_sram[nowrap(u), nowrap(r)] if three else 0.0,
                                           local_memory(stacks[nowrap(i)], hbm_bw, hbm_e, sram_bw[nowrap(k)],
                                                        sram_e[nowrap(k)], ddr_bw, ddr_e,
                                                        stream_bandwidth(stream_buf, stacks[nowrap(i)], hbm_cap,
                                                                         sram_cap[nowrap(k)], ddr_bw)),
                                           kind_terms(mem_eff, overhead, dispatch, k, alone), op_ptr, op_time, op_w,
                                           op_o, op_prob, op_inv, power_terms(limit, floor, static_w, active_w, k),
                                           op_e)
                        t, b_ddr, ed, de = cc.time_s, cc.ddr_bytes, cc.dram_j, cc.clock_j
                        if cc.stream_s > 0.0 and (fill_stage < 0 or fill_stage == s):
                            fill_stage = s
                            fill = max(fill, cc.stream_s)
                    copy_time[nowrap(u), nowrap(r)] = t + ar_time[nowrap(u)]
                    copy_ddr[nowrap(u), nowrap(r)] = b_ddr
                    ct[nowrap(s), nowrap(i)] += copy_time[nowrap(u), nowrap(r)]
                    if grouping:
                        lq[nowrap(s), nowrap(i)] += group_lq[nowrap(u)]
                    if hosts:
                        ht[nowrap(s), nowrap(i)] += host_issue_s(launches, u, ar_time[nowrap(u)] > 0.0,
                                                                 issue[nowrap(k)], alone)
                    sd += b_ddr
                    dram += b
                    e_compute += e_unit + active_w[nowrap(k)] * copy_time[nowrap(u), nowrap(r)] + de
                    e_dram += ed
            if group_kernels[nowrap(s)] > 0.0:
                e_compute += add_groups(s, n, kind, lq, group_kernels[nowrap(s)], overhead, issue, active_w, hosts, ct,
                                        ht)
            sd_[nowrap(s)] = sd
            stage_t[nowrap(s)] = max(row_max(ct, s, n), sd / ddr_bw)
            if offload:       # misses fetched into HBM before the stage computes (a loop of its own)
                t_fetch, e_fetch = stage_fetch(stage_start[nowrap(s)], stage_start[nowrap(s + 1)], kind, slots, ncopy,
                                               w_copy, other_dram, f_host, f_ssd, fetch, hbm_e)
                stage_t[nowrap(s)] += t_fetch
                e_dram += e_fetch
            repeat = stage_repeat[nowrap(s)]
            hand_off_net, hand_off_e = stage_hand_offs(s, n, split, slots, ncopy, pb, lb, L, LM, repeat, edge_start,
                                                       edge_phase, edge_src, edge_dst, edge_bytes, edge_sync, pair_ptr,
                                                       pad_ptr, pad_links, pair_latency, pair_energy, link_inv_bw,
                                                       comm, loads, edge_lat, edge_amt, pair_amt, pair_seen, pair_list)
            # per instance of the stage, except the network: byte-hops and joules of the whole step
            stage_e_compute[nowrap(s)] = e_compute
            stage_e_dram[nowrap(s)] = e_dram
            stage_dram[nowrap(s)] = dram
            stage_net[nowrap(s)] = net * repeat + hand_off_net
            stage_e_net[nowrap(s)] = e_net * repeat + hand_off_e
        latency, p99 = scenario_latency(scen_ptr, scen_stages, scen_prob, after_ptr, after_ids, stage_repeat, chain,
                                        stage_t, comm, ct, hosts, ht, n, finish, cps, in_scen, busy, host_busy,
                                        order)
        # the host's work per sequence, and weight streaming's fill (the first transfer hides behind nothing)
        wait = sequence_wait_s(kind_seq, sequences, kind, n) + fill
        row = res[nowrap(d)]
        row[SHORT], row[LATENCY], row[P99] = short, latency + wait, p99 + wait
        step_totals(stage_prob, stage_repeat, stage_e_compute, stage_e_dram, stage_dram, stage_net, stage_e_net, row)
        row[E_IDLE] = idle_energy_j(latency + wait, ct, stage_prob, stage_repeat, kind, idle_extra, n)
    if incremental:         # the failure kernels' scratch left as they expect it (dse.model.failures)
        moved[:] = False
        dirty[:] = False


@nb.njit(cache=True, error_model="numpy")
def base_pass(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, W):
    """`base_passes` of one design (``slots`` [U, copies], the rest of its arrays 1-D): its `PASS_FIELDS`."""
    res = np.empty((1, len(PASS_FIELDS)))
    base_passes(T, R, np.full(1, sh), np.full(1, n), kind.reshape((1, kind.shape[0])),
                stacks.reshape((1, stacks.shape[0])), np.full(1, ddr),
                slots.reshape((1, slots.shape[0], slots.shape[1])), ncopy.reshape((1, ncopy.shape[0])), split, W, res,
                np.bool_(False), np.int64(0), np.int64(1))   # typed as the other callers' (no literals: one compile)
    return res[0]
