"""Latency and energy of one step of a design: the Numba core the population evaluator calls.

Model, per stage s of the workload (repeated ``repeat_s`` times for identical layers):

* Memory: each chiplet holds its units' copies: weights (a full copy per replica, 1/c per shard) and
  KV cache (1/c per copy). Copies fill the chiplet's HBM densest first (bytes read per step per byte
  stored; the fractional-knapsack optimum for DDR traffic, memory.placement) and the rest spills to
  the package's shared DDR, so hot experts sit in HBM and cold ones in DDR. Spill beyond the DDR's
  capacity is a capacity shortfall (a constraint violation); latency counts it as DDR-resident.
* A unit copy runs its operators one kernel after another, each overlapping its compute (arch cost
  table) with its memory traffic (its HBM bytes / the chiplet's sustained HBM bandwidth + its DDR bytes
  / the package's sustained DDR bandwidth, both at the chiplet's ``mem_efficiency``) in a load-compute
  pipeline, plus the chiplet's kernel overhead (arch.roofline; `copy_roofline`); with ``dispatch_mode``
  per_kernel, never shorter than the host's dispatch time. A replica of a routed expert reads its weights when any of
  its 1/c share of the tokens selects it (dse.model.evaluator.weight_per_copy). Copies on one chiplet run
  one after another.
* A stage lasts as long as its slowest chiplet, and at least its DDR bytes / DDR bandwidth (shared).
* Shards of a one-to-many unit all-reduce their output with a ring (see `allreduce`).
* Hand-offs into a stage (workload graph edges) follow the package's route tables (dse.model.routes): the
  stage waits for the longest route (zero-load latency) plus the collective's software steps (a ring
  all-reduce between tensor-parallel shards takes 2(t - 1), each the link's ``sync_latency_s``) plus
  the busiest link's serialisation (bytes / bandwidth). A group of r identical layers pays its entry hand-offs once and its
  layer-to-layer ones r - 1 times.
* The host of a chiplet whose ``dispatch_mode`` is ahead (the default) issues its kernels, one per
  ``dispatch_s``, while the device runs earlier ones (CUDA streams): its issue time per stage (`ht`,
  `host_issue_s`: operators and all-reduces) runs in parallel with the device's work.
* Stages form a DAG; a workload's scenarios (sets of stages run together, e.g. the expert models an
  ensemble's router picks) each take the longest of their critical path, their busiest chiplet's
  total work and their busiest host's issue time (dse.model.scenarios); latency is the expectation over
  scenarios, and the 99th percentile is reported too. The serving framework's work per sequence
  (``sequence_s``, the slowest kind's) adds batch x that to both (`sequence_wait_s`).
* Energy: compute + SRAM (arch table) plus each chiplet's active power (arch.active_power_w: clocks and
  control of a busy chip) over its copies' kernel time, DRAM bytes x energy per byte, network bytes x
  energy per byte along each route (links and routers), static power x latency (added by the evaluator).

Failures are evaluated by deltas against this intact pass (dse.model.failures).

Implementation note (speed): a population is evaluated in one call (dse.model.evaluator.evaluate_arrays). The
kernels (`base_passes`, dse.model.failures.failures_latency) take the table tuples (T, R, W) once, bind the
arrays they use to locals, and call nothing but ``inline="always"`` helpers: binding an array costs a
reference-count update, so a kernel called per design with ~150 arrays in its tuples pays about 3.5 us a
call, most of a small package's evaluation; `base_passes` therefore loops over a block of designs itself
(failures, which start from each design's own intact pass, still go one design at a time). Array indices are
cast to unsigned (``nowrap``): Numba then leaves out its negative-index wrap-around, a shift, mask and add
on every access that cost a fifth of the time. Link loads are one flat row of ``LM`` floats per (stage,
instance): ``loads[(2 s + instance) LM + link]``.
"""
from __future__ import annotations

from collections import namedtuple

import numba as nb
import numpy as np

from arch.roofline import kernel_time_s
from memory.placement import spill_first_n

from .grouped import add_groups
from .scenarios import FIRST, REST, scenario_latency

KernelTables = namedtuple("KernelTables", [
    "unit_is_expert", "unit_stage", "unit_read_scale", "unit_capacity", "unit_kv", "unit_w_copy", "unit_time", "unit_energy",
    "unit_other_dram", "unit_out_bytes", "unit_edge_ptr", "unit_edges", "stage_start", "stage_repeat", "stage_prob",
    "after_ptr", "after_ids", "scen_ptr", "scen_stages", "scen_prob", "edge_start", "edge_src", "edge_dst",
    "edge_bytes", "edge_sync", "edge_phase", "edge_stage", "chain", "kind_area", "kind_wafer_cost", "kind_d0", "kind_static_w",
    "kind_active_w", "kind_peak_dyn_w",
    "tokens", "hbm_cap", "hbm_bw", "hbm_e", "hbm_phy", "hbm_footprint", "hbm_cost", "ddr_cap",
    "ddr_bw", "ddr_e", "ddr_phy", "ddr_cost", "link_bw", "bond_yield", "yield_alpha", "wafer_diameter",
    "unit_w_ratio", "op_ptr", "op_time", "op_w", "op_o", "op_prob", "op_inv", "kind_mem_eff", "kind_overhead",
    "kind_dispatch", "kind_issue", "unit_launches", "hosts", "kind_seq", "sequences", "unit_group_lq",
    "stage_group_kernels"])

Workspace = namedtuple("Workspace", [
    # intact design (base pass)
    "ct", "ht", "sd", "stage_t", "comm", "stage_e_compute", "stage_e_dram", "stage_dram", "stage_net", "stage_e_net",
    "copy_time", "copy_ddr", "ar_time", "f", "loads", "edge_lat", "edge_amt", "stored", "overflow", "chip_ptr",
    "item_u", "item_r", "cursor", "buf_size", "buf_read", "buf_density", "buf_order", "buf_spill", "buf_u", "buf_r",
    # one failure set (dse.model.failures)
    "slots2", "count2", "f2", "moved", "moved_list", "stored2", "overflow2", "in_a", "a_list", "is_dead", "dead",
    "dirty", "dirty_list", "bk_ct", "bk_ht", "bk_sd", "bk_stage_t", "seen", "edge_list", "bk_edge_lat", "row_slot",
    "aff_rows", "new_loads", "bk_comm", "lq", "bk_lq",
    # scenarios
    "finish", "cps", "in_scen", "busy", "host_busy", "order",
    # hand-off bytes per chiplet pair of one (stage, instance), routed once per pair
    "pair_amt", "pair_seen", "pair_list"])

#: what the intact pass gives per design: capacity shortfall [B], expected and p99 latency [s], compute and
#: DRAM energy [J], DRAM bytes, network byte-hops and network energy [J], each of the whole step
PASS_FIELDS = ("short", "latency", "p99", "e_compute", "e_dram", "dram", "net", "e_net")
SHORT, LATENCY, P99, E_COMPUTE, E_DRAM, DRAM, NET, E_NET = range(len(PASS_FIELDS))

# Hot loops index arrays with ``nowrap(i)``: Numba skips the negative-index wrap-around of an unsigned index
# (a shift, a mask and an add per access, and loops left unvectorised). Only for indices never negative.
nowrap = nb.uintp


def make_workspace(T: KernelTables, max_chips: int, max_links: int, max_copies: int) -> Workspace:
    """Scratch arrays for one design at a time, sized for the largest package of the study."""
    S = T.stage_repeat.shape[0]
    U = T.unit_capacity.shape[0]
    E = T.edge_src.shape[0]
    n_scen = T.scen_prob.shape[0]
    items = U * max_copies
    f = lambda *shape: np.zeros(shape)  # noqa: E731
    i64 = lambda *shape: np.zeros(shape, np.int64)  # noqa: E731
    b = lambda *shape: np.zeros(shape, np.bool_)  # noqa: E731
    return Workspace(
        ct=f(S, max_chips), ht=f(S, max_chips), sd=f(S), stage_t=f(S), comm=f(S, 2), stage_e_compute=f(S),
        stage_e_dram=f(S), stage_dram=f(S), stage_net=f(S), stage_e_net=f(S), copy_time=f(U, max_copies),
        copy_ddr=f(U, max_copies), ar_time=f(U), f=f(U, max_copies), loads=f(2 * S * max_links), edge_lat=f(E),
        edge_amt=f(E), stored=f(max_chips), overflow=f(max_chips), chip_ptr=i64(max_chips + 1), item_u=i64(items),
        item_r=i64(items), cursor=i64(max_chips), buf_size=f(items), buf_read=f(items), buf_density=f(items),
        buf_order=i64(items), buf_spill=f(items), buf_u=i64(items), buf_r=i64(items),
        slots2=np.full((U, max_copies), -1, np.int64), count2=i64(U), f2=f(U, max_copies), moved=b(U),
        moved_list=i64(U), stored2=f(max_chips), overflow2=f(max_chips), in_a=b(max_chips), a_list=i64(max_chips),
        is_dead=b(max_chips), dead=i64(max_chips), dirty=b(S), dirty_list=i64(S), bk_ct=f(S, max_chips),
        bk_ht=f(S, max_chips), bk_sd=f(S), bk_stage_t=f(S), seen=b(E), edge_list=i64(E), bk_edge_lat=f(E),
        row_slot=np.full(2 * S, -1, np.int64), aff_rows=i64(2 * S), new_loads=f(2 * S * max_links), bk_comm=f(2 * S),
        lq=f(S, max_chips), bk_lq=f(S, max_chips),
        finish=f(S), cps=f(n_scen), in_scen=b(S), busy=f(max_chips), host_busy=f(max_chips), order=i64(n_scen),
        pair_amt=f(max_chips * max_chips), pair_seen=b(max_chips * max_chips), pair_list=i64(max_chips * max_chips))


@nb.njit(cache=True, inline="always", error_model="numpy")
def item_size(capacity_u, kv_u, c, split):
    """Bytes one of c copies (or shards) of a unit stores: weights and its share of the KV cache."""
    return (capacity_u / c if split else capacity_u) + kv_u / c


@nb.njit(cache=True, inline="always", error_model="numpy")
def copy_bytes(w_copy, other_dram, u, c, k):
    """DRAM bytes one of c copies of unit u moves per layer instance on a chiplet of kind k."""
    return w_copy[nowrap(u), nowrap(c)] + other_dram[nowrap(u), nowrap(k)] / c


@nb.njit(cache=True, inline="always", error_model="numpy")
def copy_roofline(u, k, c, w_ratio, bytes_, f, hbm_bw_i, ddr_bw, hbm_e, ddr_e, op_ptr, op_time, op_w, op_o, op_prob,
                  op_inv, mem_eff, overhead, dispatch, alone):
    """(time, DDR bytes, DRAM energy) of one of c copies of unit u on a chiplet of kind k, moving
    ``bytes_`` of which a fraction f from DDR (all of them when the chiplet has no HBM).

    Each operator of the unit runs as one kernel (arch.roofline.kernel_time_s): its compute (its 1/c
    share) and its bytes at the chiplet's share ``mem_eff`` of the HBM / DDR bandwidth overlap in a
    load-compute pipeline, plus the kind's kernel ``overhead``, never less than its host ``dispatch``
    time. Operators weigh by the probability they run. ``alone`` 0: the unit's kernels are grouped with
    others' (routed experts, dse.model.grouped), which pay the per-kernel terms."""
    if hbm_bw_i <= 0.0:
        f = 1.0
    x = f / ddr_bw
    if f < 1.0:
        x += (1.0 - f) / hbm_bw_i
    x /= mem_eff[nowrap(k)]
    t = 0.0
    for i in range(op_ptr[nowrap(u)], op_ptr[nowrap(u + 1)]):
        mm = (w_ratio * op_w[nowrap(i)] + op_o[nowrap(i), nowrap(k)] / c) * x
        t += op_prob[nowrap(i)] * kernel_time_s(op_time[nowrap(i), nowrap(k)] / c, mm, op_inv[nowrap(i), nowrap(k)],
                                                overhead[nowrap(k)] * alone, dispatch[nowrap(k)] * alone)
    return t, bytes_ * f, bytes_ * (1.0 - f) * hbm_e + bytes_ * f * ddr_e


@nb.njit(cache=True, inline="always", error_model="numpy")
def host_issue_s(launches, u, reduces, issue_k, alone):
    """Seconds the host of a chiplet of a kind issuing ahead (``issue_k`` per kernel) takes to issue one copy
    of unit u: its operators (by the probability they run; none if grouped: ``alone`` 0) and its all-reduce."""
    return (launches[nowrap(u)] * alone + (1.0 if reduces else 0.0)) * issue_k


@nb.njit(cache=True, inline="always", error_model="numpy")
def sequence_wait_s(kind_seq, sequences, kind, n):
    """Host work per step that the device waits for: the step's sequences x the framework's time per
    sequence (scheduling, sampling, output processing), the slowest of the design's kinds."""
    per_sequence = 0.0
    for i in range(n):
        per_sequence = max(per_sequence, kind_seq[nowrap(kind[nowrap(i)])])
    return sequences * per_sequence


@nb.njit(cache=True, inline="always", error_model="numpy")
def placement_is_trivial(capacity, stored):
    """A chiplet without HBM keeps everything in DDR, one whose copies fit keeps everything in HBM:
    no density order is needed (memory.placement.spill_first_n)."""
    return capacity <= 0.0 or stored <= capacity


@nb.njit(cache=True, inline="always", error_model="numpy")
def trivial_spill(capacity, size):
    """DDR fraction of a copy of ``size`` bytes on a chiplet whose placement is trivial."""
    return 1.0 if capacity <= 0.0 and size > 0.0 else 0.0


@nb.njit(cache=True, inline="always", error_model="numpy")
def place_chiplet(hbm_capacity, kind_i, item_u, item_r, start, n_items, ncopy, split, unit_capacity, unit_kv,
                  w_copy, other_dram, read_scale, buf_size, buf_read, buf_density, buf_order, buf_spill, frac):
    """Put a chiplet's copies (units ``item_u``, copy indices ``item_r``, from ``start``) into its HBM
    densest first (memory.placement); ``frac[u, r]`` gets each copy's DDR fraction.
    Returns (bytes stored, bytes spilled to DDR)."""
    stored = 0.0
    for x in range(n_items):
        u = item_u[nowrap(start + x)]
        c = ncopy[nowrap(u)]
        buf_size[nowrap(x)] = item_size(unit_capacity[nowrap(u)], unit_kv[nowrap(u)], c, split)
        buf_read[nowrap(x)] = copy_bytes(w_copy, other_dram, u, c, kind_i) * read_scale[nowrap(u)]
        stored += buf_size[nowrap(x)]
    spilled = spill_first_n(n_items, buf_size, buf_read, hbm_capacity, buf_density, buf_order, buf_spill)
    for x in range(n_items):
        frac[nowrap(item_u[nowrap(start + x)]), nowrap(item_r[nowrap(start + x)])] = buf_spill[nowrap(x)]
    return stored, spilled


@nb.njit(cache=True, inline="always", error_model="numpy")
def allreduce(u, slots, c, d, n, pb, pair_ptr, pair_latency, pair_energy, link_bw):
    """(time, byte-hops, energy) of the ring all-reduce of D bytes over the c shards of unit u.

    Ring all-reduce: 2(c - 1) steps, in each every shard sends D/c bytes to the next one; a step takes
    the slowest neighbour route plus D / (c x link bandwidth) (Patarasuk & Yuan 2009). Shards that all
    sit on one chiplet reduce locally: no network time.
    """
    lat = 0.0
    hops = 0.0
    energy = 0.0
    crosses = False
    for r in range(c):
        a, b = slots[nowrap(u), nowrap(r)], slots[nowrap(u), nowrap((r + 1) % c)]
        if a != b:
            crosses = True
            p = pb + a * n + b
            lat = max(lat, pair_latency[nowrap(p)])
            hops += pair_ptr[nowrap(p + 1)] - pair_ptr[nowrap(p)]
            energy += pair_energy[nowrap(p)]
    if not crosses:             # every shard on one chiplet: the reduction never leaves it
        return 0.0, 0.0, 0.0
    per_step = d / c
    steps = 2.0 * (c - 1)
    return steps * (lat + per_step / link_bw), steps * per_step * hops, steps * per_step * energy


@nb.njit(cache=True, inline="always", error_model="numpy")
def edge_amount(size, ca, cb, split):
    """Bytes each (sending copy, receiving copy) pair of an edge carries: shards of a one-to-many unit
    all-reduce first and one of them sends, every receiving shard needs the whole input; copies of a
    replicated unit share the bytes evenly."""
    return size / (1 if split else ca) / (1.0 if split else cb)


@nb.njit(cache=True, inline="always", error_model="numpy")
def handoff_latency(route_s, sync_s):
    """Latency of a hand-off whose longest route takes ``route_s`` (0: it stays on one chiplet): the route
    plus the collective's software steps (``edge_sync``: steps x the link's sync latency)."""
    return route_s + sync_s if route_s > 0.0 else 0.0


@nb.njit(cache=True, inline="always", error_model="numpy")
def in_instance(phase, instance):
    """Edge phases: 0 runs before every instance of its stage, 1 only before the first (entry from the
    previous group of layers), 2 before all but the first (a layer feeding the next identical layer)."""
    return phase == 0 or (phase == 1 and instance == FIRST) or (phase == 2 and instance == REST)


@nb.njit(cache=True, inline="always", error_model="numpy")
def longest_edge(edge_start, edge_phase, edge_lat, s, instance):
    """The longest route latency among the hand-offs into one instance of stage s."""
    longest = 0.0
    for e in range(edge_start[nowrap(s)], edge_start[nowrap(s + 1)]):
        if in_instance(edge_phase[nowrap(e)], instance):
            longest = max(longest, edge_lat[nowrap(e)])
    return longest


@nb.njit(cache=True, inline="always", error_model="numpy")
def busiest_link(row, base, link_inv_bw, lb, n_links):
    """Serialisation time of the busiest link of the load row starting at ``row[base]``."""
    busiest = 0.0
    for link in range(n_links):
        busiest = max(busiest, row[nowrap(base + link)] * link_inv_bw[nowrap(lb + link)])
    return busiest


@nb.njit(cache=True, inline="always", error_model="numpy")
def row_max(a, s, n):
    """max(a[s, :n]) without making a view."""
    m = a[nowrap(s), nowrap(0)]
    for i in range(1, n):
        m = max(m, a[nowrap(s), nowrap(i)])
    return m


@nb.njit(cache=True, inline="always", error_model="numpy")
def index_items(n, slots, ncopy, chip_ptr, cursor, item_u, item_r):
    """Group the copies by chiplet: CSR ``chip_ptr`` over ``item_u`` / ``item_r``, in (u, r) order."""
    for i in range(n + 1):
        chip_ptr[nowrap(i)] = 0
    for u in range(slots.shape[nowrap(0)]):
        for r in range(ncopy[nowrap(u)]):
            chip_ptr[nowrap(slots[nowrap(u), nowrap(r)] + 1)] += 1
    for i in range(n):
        chip_ptr[nowrap(i + 1)] += chip_ptr[nowrap(i)]
        cursor[nowrap(i)] = chip_ptr[nowrap(i)]
    for u in range(slots.shape[nowrap(0)]):
        for r in range(ncopy[nowrap(u)]):
            i = slots[nowrap(u), nowrap(r)]
            item_u[nowrap(cursor[nowrap(i)])] = u
            item_r[nowrap(cursor[nowrap(i)])] = r
            cursor[nowrap(i)] += 1


@nb.njit(cache=True, error_model="numpy")
def base_passes(T, R, shapes, sizes, kinds, stacks_all, ddrs, slots_all, ncopies, split, W, res):
    """The intact pass of every design d (mesh shape ``shapes[d]``, ``sizes[d]`` chiplets, its kinds, HBM stacks,
    DDR channels, copy slots and copy counts): its figures into ``res[d]`` (`PASS_FIELDS`); ``W`` is left
    holding the last design's per-stage and per-copy figures (what dse.model.failures starts from).

    The tables are bound once for all the designs: bound per design (a call per design), their reference
    counts took 3.5 us of a small package's 5 us."""
    unit_capacity, unit_kv, w_copy, other_dram = T.unit_capacity, T.unit_kv, T.unit_w_copy, T.unit_other_dram
    unit_time, unit_energy, read_scale, out_bytes = T.unit_time, T.unit_energy, T.unit_read_scale, T.unit_out_bytes
    active_w, is_expert, group_lq, group_kernels = (T.kind_active_w, T.unit_is_expert, T.unit_group_lq,
                                                    T.stage_group_kernels)
    lq, grouping = W.lq, group_kernels.shape[0] > 0 and group_kernels.max() > 0.0
    stage_start, stage_repeat = T.stage_start, T.stage_repeat
    edge_start, edge_src, edge_dst, edge_bytes, edge_phase = (T.edge_start, T.edge_src, T.edge_dst, T.edge_bytes,
                                                              T.edge_phase)
    hbm_cap, hbm_bw, hbm_e, ddr_e, link_bw = T.hbm_cap, T.hbm_bw, T.hbm_e, T.ddr_e, T.link_bw
    pair_ptr, route_links, pair_latency, pair_energy = R.pair_ptr, R.route_links, R.pair_latency, R.pair_energy
    link_inv_bw, edge_sync = R.link_inv_bw, T.edge_sync
    w_ratio, op_ptr, op_time, op_w, op_o, op_prob, op_inv = (T.unit_w_ratio, T.op_ptr, T.op_time, T.op_w, T.op_o,
                                                              T.op_prob, T.op_inv)
    mem_eff, overhead, dispatch, issue, launches = (T.kind_mem_eff, T.kind_overhead, T.kind_dispatch, T.kind_issue,
                                                    T.unit_launches)
    ct, ht, loads, edge_lat, edge_amt, f, comm = W.ct, W.ht, W.loads, W.edge_lat, W.edge_amt, W.f, W.comm
    LM = loads.shape[nowrap(0)] // (2 * stage_repeat.shape[nowrap(0)])
    copy_time, copy_ddr, ar_time = W.copy_time, W.copy_ddr, W.ar_time
    chip_ptr, item_u, item_r, stored, overflow = W.chip_ptr, W.item_u, W.item_r, W.stored, W.overflow
    buf_size, buf_read, buf_density, buf_order, buf_spill = W.buf_size, W.buf_read, W.buf_density, W.buf_order, W.buf_spill
    sd_, stage_t = W.sd, W.stage_t
    pair_amt, pair_seen, pair_list = W.pair_amt, W.pair_seen, W.pair_list
    stage_e_compute, stage_e_dram, stage_dram, stage_net, stage_e_net = (
        W.stage_e_compute, W.stage_e_dram, W.stage_dram, W.stage_net, W.stage_e_net)

    scen_ptr, scen_stages, scen_prob, after_ptr, after_ids = (T.scen_ptr, T.scen_stages, T.scen_prob, T.after_ptr,
                                                          T.after_ids)
    finish, cps, in_scen, busy, order, stage_prob = W.finish, W.cps, W.in_scen, W.busy, W.order, T.stage_prob
    host_busy, hosts = W.host_busy, T.hosts
    for d in range(sizes.shape[nowrap(0)]):
        sh, n, ddr = shapes[nowrap(d)], sizes[nowrap(d)], ddrs[nowrap(d)]
        kind, stacks, slots, ncopy = kinds[nowrap(d)], stacks_all[nowrap(d)], slots_all[nowrap(d)], ncopies[nowrap(d)]
        pb, lb, L = R.pair_base[nowrap(sh)], R.link_base[nowrap(sh)], R.n_links[nowrap(sh)]

        # --- memory: each chiplet's copies into its HBM, densest first; the rest spills to DDR ---
        index_items(n, slots, ncopy, chip_ptr, W.cursor, item_u, item_r)
        spill = 0.0
        for i in range(n):
            a, b = chip_ptr[nowrap(i)], chip_ptr[nowrap(i + 1)]
            total = 0.0
            for y in range(a, b):
                u = item_u[nowrap(y)]
                total += item_size(unit_capacity[nowrap(u)], unit_kv[nowrap(u)], ncopy[nowrap(u)], split)
            cap = stacks[nowrap(i)] * hbm_cap
            if placement_is_trivial(cap, total):
                for y in range(a, b):
                    u = item_u[nowrap(y)]
                    size = item_size(unit_capacity[nowrap(u)], unit_kv[nowrap(u)], ncopy[nowrap(u)], split)
                    f[nowrap(u), nowrap(item_r[nowrap(y)])] = trivial_spill(cap, size)
                stored[nowrap(i)] = total
                overflow[nowrap(i)] = total if cap <= 0.0 and total > 0.0 else 0.0
            else:
                stored_i, overflow_i = place_chiplet(cap, kind[nowrap(i)], item_u, item_r, a, b - a, ncopy, split,
                                                     unit_capacity, unit_kv, w_copy, other_dram, read_scale, buf_size,
                                                     buf_read, buf_density, buf_order, buf_spill, f)
                stored[nowrap(i)], overflow[nowrap(i)] = stored_i, overflow_i
            spill += overflow[nowrap(i)]
        short = max(spill - ddr * T.ddr_cap, 0.0)
        ddr_bw = max(ddr * T.ddr_bw, 1.0)

        # --- compute per stage, then the hand-offs into it ---
        for s in range(stage_repeat.shape[nowrap(0)]):
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
                    b = copy_bytes(w_copy, other_dram, u, c, k)
                    t, b_ddr, ed = copy_roofline(u, k, c, w_ratio[nowrap(u), nowrap(c)], b, f[nowrap(u), nowrap(r)],
                                                 stacks[nowrap(i)] * hbm_bw, ddr_bw, hbm_e, ddr_e, op_ptr, op_time, op_w,
                                                 op_o, op_prob, op_inv, mem_eff, overhead, dispatch, alone)
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
                    e_compute += (unit_energy[nowrap(u), nowrap(k)] / c
                                  + active_w[nowrap(k)] * copy_time[nowrap(u), nowrap(r)])
                    e_dram += ed
            if group_kernels[nowrap(s)] > 0.0:
                e_compute += add_groups(s, n, kind, lq, group_kernels[nowrap(s)], overhead, issue, active_w, hosts, ct,
                                        ht)
            sd_[nowrap(s)] = sd
            stage_t[nowrap(s)] = max(row_max(ct, s, n), sd / ddr_bw)
            repeat = stage_repeat[nowrap(s)]
            comm[nowrap(s), nowrap(REST)] = 0.0
            hand_off_net = 0.0
            hand_off_e = 0.0
            for e in range(edge_start[nowrap(s)], edge_start[nowrap(s + 1)]):
                edge_lat[nowrap(e)] = 0.0
            for instance in range(2 if repeat > 1 else 1):
                base = (2 * s + instance) * LM
                for link in range(L):
                    loads[nowrap(base + link)] = 0.0
                hops = 0.0
                energy = 0.0
                n_pairs = 0         # bytes per chiplet pair first, then each pair's route walked once
                slowest = 0.0       # the longest hand-off route into this instance
                for e in range(edge_start[nowrap(s)], edge_start[nowrap(s + 1)]):
                    if not in_instance(edge_phase[nowrap(e)], instance):
                        continue
                    a, b = edge_src[nowrap(e)], edge_dst[nowrap(e)]
                    ca = 1 if split else ncopy[nowrap(a)]
                    cb = ncopy[nowrap(b)]
                    amount = edge_amount(edge_bytes[nowrap(e)], ca, cb, split)
                    edge_amt[nowrap(e)] = amount
                    longest = 0.0
                    for ra in range(ca):
                        i = slots[nowrap(a), nowrap(ra)]
                        for rb in range(cb):
                            j = slots[nowrap(b), nowrap(rb)]
                            if i != j:
                                q = i * n + j
                                longest = max(longest, pair_latency[nowrap(pb + q)])
                                if not pair_seen[nowrap(q)]:
                                    pair_seen[nowrap(q)] = True
                                    pair_amt[nowrap(q)] = 0.0
                                    pair_list[nowrap(n_pairs)] = q
                                    n_pairs += 1
                                pair_amt[nowrap(q)] += amount
                    edge_lat[nowrap(e)] = handoff_latency(longest, edge_sync[nowrap(e)])
                    slowest = max(slowest, edge_lat[nowrap(e)])
                for x in range(n_pairs):
                    q = pair_list[nowrap(x)]
                    pair_seen[nowrap(q)] = False
                    amount = pair_amt[nowrap(q)]
                    p = pb + q
                    start, end = pair_ptr[nowrap(p)], pair_ptr[nowrap(p + 1)]
                    for y in range(start, end):
                        loads[nowrap(base + route_links[nowrap(y)])] += amount
                    hops += amount * (end - start)
                    energy += amount * pair_energy[nowrap(p)]
                comm[nowrap(s), nowrap(instance)] = slowest + busiest_link(loads, base, link_inv_bw, lb, L)
                times = 1.0 if instance == FIRST else repeat - 1.0
                hand_off_net += times * hops
                hand_off_e += times * energy
            # per instance of the stage, except the network: byte-hops and joules of the whole step
            stage_e_compute[nowrap(s)] = e_compute
            stage_e_dram[nowrap(s)] = e_dram
            stage_dram[nowrap(s)] = dram
            stage_net[nowrap(s)] = net * repeat + hand_off_net
            stage_e_net[nowrap(s)] = e_net * repeat + hand_off_e
        latency, p99 = scenario_latency(scen_ptr, scen_stages, scen_prob, after_ptr, after_ids, stage_repeat, T.chain,
                                        stage_t, comm, ct, hosts, ht, n, finish, cps, in_scen, busy, host_busy,
                                        order)
        wait = sequence_wait_s(T.kind_seq, T.sequences, kind, n)
        latency, p99 = latency + wait, p99 + wait
        e_compute = e_dram = dram = net = e_net = 0.0      # of the whole step: stages weighed by repeat and probability
        for s in range(stage_repeat.shape[nowrap(0)]):
            weight = stage_prob[nowrap(s)] * stage_repeat[nowrap(s)]
            e_compute += weight * stage_e_compute[nowrap(s)]
            e_dram += weight * stage_e_dram[nowrap(s)]
            dram += weight * stage_dram[nowrap(s)]
            net += stage_prob[nowrap(s)] * stage_net[nowrap(s)]
            e_net += stage_prob[nowrap(s)] * stage_e_net[nowrap(s)]
        row = res[nowrap(d)]
        row[SHORT], row[LATENCY], row[P99], row[E_COMPUTE], row[E_DRAM] = short, latency, p99, e_compute, e_dram
        row[DRAM], row[NET], row[E_NET] = dram, net, e_net

@nb.njit(cache=True, error_model="numpy")
def base_pass(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, W):
    """`base_passes` of one design (``slots`` [U, copies], the rest of its arrays 1-D): its `PASS_FIELDS`."""
    res = np.empty((1, len(PASS_FIELDS)))
    base_passes(T, R, np.full(1, sh), np.full(1, n), kind.reshape((1, kind.shape[0])),
                stacks.reshape((1, stacks.shape[0])), np.full(1, ddr),
                slots.reshape((1, slots.shape[0], slots.shape[1])), ncopy.reshape((1, ncopy.shape[0])), split, W, res)
    return res[0]
