"""Latency and energy of one step of a design: the Numba core the population evaluator calls.

Model, per stage s of the workload (repeated ``repeat_s`` times for identical layers):

* Memory: each chiplet holds its units' copies: weights (a full copy per replica, 1/c per shard) and
  KV cache (1/c per copy). Copies fill the chiplet's HBM densest first (bytes read per step per byte
  stored; the fractional-knapsack optimum for DDR traffic, memory.placement) and the rest spills to
  the package's shared DDR, so hot experts sit in HBM and cold ones in DDR. Spill beyond the DDR's
  capacity is a capacity shortfall (a constraint violation); latency counts it as DDR-resident.
* A unit copy takes ``max(compute, memory)`` (roofline overlap of compute and DMA): compute from the
  arch cost table, memory = its HBM bytes / the chiplet's sustained HBM bandwidth + its DDR bytes /
  the package's sustained DDR bandwidth. A replica of a routed expert reads its weights when any of
  its 1/c share of the tokens selects it (dse.evaluator.weight_per_copy). Copies on one chiplet run
  one after another.
* A stage lasts as long as its slowest chiplet, and at least its DDR bytes / DDR bandwidth (shared).
* Shards of a one-to-many unit all-reduce their output with a ring (see `allreduce`).
* Hand-offs into a stage (workload graph edges) follow the package's route tables (dse.routes): the
  stage waits for the longest route (zero-load latency) plus the busiest link's serialisation
  (bytes / bandwidth). A group of r identical layers pays its entry hand-offs once and its
  layer-to-layer ones r - 1 times.
* Stages form a DAG; a workload's scenarios (sets of stages run together, e.g. the expert models an
  ensemble's router picks) each take the longer of their critical path and their busiest chiplet's
  total work; latency is the expectation over scenarios, and the 99th percentile is reported too.
* Energy: compute + SRAM (arch table), DRAM bytes x energy per byte, network bytes x energy per byte
  along each route (links and routers), static power x latency (added by the evaluator).

Failures are evaluated by deltas against this intact pass (dse.failures).

Implementation note (speed): the kernels that evaluate one design (`base_pass`, dse.failures) take the
table tuples (T, R, W) once and bind the arrays they use to locals; the helpers they call in loops take
only arrays and scalars. A helper given a whole namedtuple costs, per call, either a copy of every array
in it (an ordinary call) or a reference-count update of every array in it (an inlined one).
"""
from __future__ import annotations

from collections import namedtuple

import numba as nb
import numpy as np

from memory.placement import spill_first_n

KernelTables = namedtuple("KernelTables", [
    "unit_is_expert", "unit_stage", "unit_read_scale", "unit_capacity", "unit_kv", "unit_w_copy", "unit_time", "unit_energy",
    "unit_other_dram", "unit_out_bytes", "unit_edge_ptr", "unit_edges", "stage_start", "stage_repeat", "stage_prob",
    "after_ptr", "after_ids", "scen_ptr", "scen_stages", "scen_prob", "edge_start", "edge_src", "edge_dst",
    "edge_bytes", "edge_phase", "edge_stage", "chain", "kind_area", "kind_wafer_cost", "kind_d0", "kind_static_w",
    "kind_peak_dyn_w", "tokens", "hbm_cap", "hbm_bw", "hbm_e", "hbm_phy", "hbm_footprint", "hbm_cost", "ddr_cap",
    "ddr_bw", "ddr_e", "ddr_phy", "ddr_cost", "link_bw", "bond_yield", "yield_alpha", "wafer_diameter"])

Workspace = namedtuple("Workspace", [
    # intact design (base pass)
    "ct", "sd", "stage_t", "comm", "stage_e_compute", "stage_e_dram", "stage_dram", "stage_net", "stage_e_net",
    "copy_time", "copy_ddr", "ar_time", "f", "loads", "edge_lat", "stored", "overflow", "chip_ptr", "item_u",
    "item_r", "cursor", "buf_size", "buf_read", "buf_density", "buf_order", "buf_spill", "buf_u", "buf_r",
    # one failure (dse.failures)
    "slots2", "count2", "f2", "moved", "moved_list", "stored2", "overflow2", "in_a", "a_list", "dirty", "dirty_list",
    "bk_ct", "bk_sd", "bk_stage_t", "seen", "edge_list", "bk_edge_lat", "affected", "aff_list", "bk_loads",
    "bk_comm", "dead",
    # scenarios
    "finish", "cps", "in_scen", "busy"])

FIRST, REST = 0, 1     # hand-off instances: before the first instance of a stage, before the others


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
        ct=f(S, max_chips), sd=f(S), stage_t=f(S), comm=f(S, 2), stage_e_compute=f(S), stage_e_dram=f(S),
        stage_dram=f(S), stage_net=f(S), stage_e_net=f(S), copy_time=f(U, max_copies), copy_ddr=f(U, max_copies),
        ar_time=f(U), f=f(U, max_copies), loads=f(S, 2, max_links), edge_lat=f(E), stored=f(max_chips),
        overflow=f(max_chips), chip_ptr=i64(max_chips + 1), item_u=i64(items), item_r=i64(items),
        cursor=i64(max_chips), buf_size=f(items), buf_read=f(items), buf_density=f(items), buf_order=i64(items),
        buf_spill=f(items), buf_u=i64(items), buf_r=i64(items),
        slots2=np.full((U, max_copies), -1, np.int64), count2=i64(U), f2=f(U, max_copies), moved=b(U),
        moved_list=i64(U), stored2=f(max_chips), overflow2=f(max_chips), in_a=b(max_chips), a_list=i64(max_chips),
        dirty=b(S), dirty_list=i64(S), bk_ct=f(S, max_chips), bk_sd=f(S), bk_stage_t=f(S), seen=b(E),
        edge_list=i64(E), bk_edge_lat=f(E), affected=b(S, 2), aff_list=i64(2 * S, 2), bk_loads=f(2 * S, max_links),
        bk_comm=f(2 * S), dead=i64(max_chips),
        finish=f(S), cps=f(n_scen), in_scen=b(S), busy=f(max_chips))


@nb.njit(cache=True, inline="always")
def item_size(capacity_u, kv_u, c, split):
    """Bytes one of c copies (or shards) of a unit stores: weights and its share of the KV cache."""
    return (capacity_u / c if split else capacity_u) + kv_u / c


@nb.njit(cache=True, inline="always")
def copy_bytes(w_copy, other_dram, u, c, k):
    """DRAM bytes one of c copies of unit u moves per layer instance on a chiplet of kind k."""
    return w_copy[u, c] + other_dram[u, k] / c


@nb.njit(cache=True, inline="always")
def roofline(compute_s, bytes_, f, hbm_bw_i, ddr_bw, hbm_e, ddr_e):
    """(time, DDR bytes, DRAM energy) of a copy computing for ``compute_s`` while moving ``bytes_``, a
    fraction f of them from DDR (all of them when the chiplet has no HBM)."""
    if hbm_bw_i <= 0.0:
        f = 1.0
    t_mem = bytes_ * f / ddr_bw
    if f < 1.0:
        t_mem += bytes_ * (1.0 - f) / hbm_bw_i
    return max(compute_s, t_mem), bytes_ * f, bytes_ * (1.0 - f) * hbm_e + bytes_ * f * ddr_e


@nb.njit(cache=True)
def place_chiplet(hbm_capacity, kind_i, item_u, item_r, start, n_items, ncopy, split, unit_capacity, unit_kv,
                  w_copy, other_dram, read_scale, buf_size, buf_read, buf_density, buf_order, buf_spill, frac):
    """Put a chiplet's copies (units ``item_u``, copy indices ``item_r``, from ``start``) into its HBM
    densest first (memory.placement); ``frac[u, r]`` gets each copy's DDR fraction.
    Returns (bytes stored, bytes spilled to DDR)."""
    stored = 0.0
    for x in range(n_items):
        u = item_u[start + x]
        c = ncopy[u]
        buf_size[x] = item_size(unit_capacity[u], unit_kv[u], c, split)
        buf_read[x] = copy_bytes(w_copy, other_dram, u, c, kind_i) * read_scale[u]
        stored += buf_size[x]
    spilled = spill_first_n(n_items, buf_size, buf_read, hbm_capacity, buf_density, buf_order, buf_spill)
    for x in range(n_items):
        frac[item_u[start + x], item_r[start + x]] = buf_spill[x]
    return stored, spilled


@nb.njit(cache=True, inline="always")
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
        a, b = slots[u, r], slots[u, (r + 1) % c]
        if a != b:
            crosses = True
            p = pb + a * n + b
            lat = max(lat, pair_latency[p])
            hops += pair_ptr[p + 1] - pair_ptr[p]
            energy += pair_energy[p]
    if not crosses:             # every shard on one chiplet: the reduction never leaves it
        return 0.0, 0.0, 0.0
    per_step = d / c
    steps = 2.0 * (c - 1)
    return steps * (lat + per_step / link_bw), steps * per_step * hops, steps * per_step * energy


@nb.njit(cache=True, inline="always")
def edge_flow(a, b, size, slots, ncopy, split, n, pb, pair_ptr, route_links, pair_latency, pair_energy, loads, s,
              instance, sign):
    """Add ``sign`` x the ``size`` bytes unit a hands unit b to the links their routes cross
    (``loads[s, instance]``). Shards of a one-to-many unit all-reduce first and one of them sends; every
    shard of the receiver needs the whole input; copies of a replicated unit share the bytes evenly.
    Returns (longest route latency, byte-hops, network energy in joules)."""
    ca = 1 if split else ncopy[a]
    cb = ncopy[b]
    amount = sign * size / ca / (1.0 if split else cb)
    longest = 0.0
    net = 0.0
    energy = 0.0
    for ra in range(ca):
        i = slots[a, ra]
        for rb in range(cb):
            j = slots[b, rb]
            if i != j:
                p = pb + i * n + j
                longest = max(longest, pair_latency[p])
                start, end = pair_ptr[p], pair_ptr[p + 1]
                for x in range(start, end):
                    loads[s, instance, route_links[x]] += amount
                net += amount * (end - start)
                energy += amount * pair_energy[p]
    return longest, net, energy


@nb.njit(cache=True, inline="always")
def in_instance(phase, instance):
    """Edge phases: 0 runs before every instance of its stage, 1 only before the first (entry from the
    previous group of layers), 2 before all but the first (a layer feeding the next identical layer)."""
    return phase == 0 or (phase == 1 and instance == FIRST) or (phase == 2 and instance == REST)


@nb.njit(cache=True, inline="always")
def stage_comm(edge_start, edge_phase, edge_lat, loads, s, instance, link_inv_bw, lb, n_links):
    """Hand-off time of one instance of stage s: its longest route plus its busiest link's bytes / bandwidth."""
    longest = 0.0
    for e in range(edge_start[s], edge_start[s + 1]):
        if in_instance(edge_phase[e], instance):
            longest = max(longest, edge_lat[e])
    busiest = 0.0
    for link in range(n_links):
        busiest = max(busiest, loads[s, instance, link] * link_inv_bw[lb + link])
    return longest + busiest


@nb.njit(cache=True, inline="always")
def row_max(a, s, n):
    """max(a[s, :n]) without making a view."""
    m = a[s, 0]
    for i in range(1, n):
        m = max(m, a[s, i])
    return m


@nb.njit(cache=True)
def scenario_latency(scen_ptr, scen_stages, scen_prob, after_ptr, after_ids, stage_repeat, chain, stage_t, comm, ct,
                     n, finish, cps, in_scen, busy):
    """(expected, p99) over scenarios of each scenario's makespan.

    A scenario's makespan is the longer of its critical path through the stage DAG and the busiest
    chiplet's total work in it (the two classic lower bounds of a schedule: stages on parallel branches
    that share a chiplet cannot overlap). For a chain of stages the critical path always binds.
    """
    S = stage_t.shape[0]
    n_scen = scen_prob.shape[0]
    for k in range(n_scen):
        for s in range(S):
            in_scen[s] = False
        for x in range(scen_ptr[k], scen_ptr[k + 1]):
            in_scen[scen_stages[x]] = True
        longest = 0.0
        for i in range(n):
            busy[i] = 0.0
        for s in range(S):       # stages are numbered in topological order
            start = 0.0
            for x in range(after_ptr[s], after_ptr[s + 1]):
                start = max(start, finish[after_ids[x]])
            w = 0.0
            if in_scen[s]:
                r = stage_repeat[s]
                w = r * stage_t[s] + comm[s, FIRST] + (r - 1.0) * comm[s, REST]
                if not chain:
                    for i in range(n):
                        busy[i] += r * ct[s, i]
            finish[s] = start + w
            longest = max(longest, finish[s])
        for i in range(n):
            longest = max(longest, busy[i])
        cps[k] = longest
    expected = 0.0
    for k in range(n_scen):
        expected += scen_prob[k] * cps[k]
    if n_scen == 1:
        return expected, cps[0]
    order = np.argsort(cps[:n_scen])
    acc = 0.0
    p99 = cps[order[n_scen - 1]]
    for x in range(n_scen):
        acc += scen_prob[order[x]]
        if acc >= 0.99 - 1e-12:
            p99 = cps[order[x]]
            break
    return expected, p99


@nb.njit(cache=True)
def index_items(n, slots, ncopy, chip_ptr, cursor, item_u, item_r):
    """Group the copies by chiplet: CSR ``chip_ptr`` over ``item_u`` / ``item_r``, in (u, r) order."""
    for i in range(n + 1):
        chip_ptr[i] = 0
    for u in range(slots.shape[0]):
        for r in range(ncopy[u]):
            chip_ptr[slots[u, r] + 1] += 1
    for i in range(n):
        chip_ptr[i + 1] += chip_ptr[i]
        cursor[i] = chip_ptr[i]
    for u in range(slots.shape[0]):
        for r in range(ncopy[u]):
            i = slots[u, r]
            item_u[cursor[i]] = u
            item_r[cursor[i]] = r
            cursor[i] += 1


@nb.njit(cache=True)
def base_pass(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, W):
    """Evaluate the intact design, leaving per-stage and per-copy figures in ``W``; returns the shortfall."""
    unit_capacity, unit_kv, w_copy, other_dram = T.unit_capacity, T.unit_kv, T.unit_w_copy, T.unit_other_dram
    unit_time, unit_energy, read_scale, out_bytes = T.unit_time, T.unit_energy, T.unit_read_scale, T.unit_out_bytes
    stage_start, stage_repeat = T.stage_start, T.stage_repeat
    edge_start, edge_src, edge_dst, edge_bytes, edge_phase = (T.edge_start, T.edge_src, T.edge_dst, T.edge_bytes,
                                                              T.edge_phase)
    hbm_cap, hbm_bw, hbm_e, ddr_e, link_bw = T.hbm_cap, T.hbm_bw, T.hbm_e, T.ddr_e, T.link_bw
    pair_ptr, route_links, pair_latency, pair_energy = R.pair_ptr, R.route_links, R.pair_latency, R.pair_energy
    link_inv_bw = R.link_inv_bw
    pb, lb, L = R.pair_base[sh], R.link_base[sh], R.n_links[sh]
    ct, loads, edge_lat, f = W.ct, W.loads, W.edge_lat, W.f
    copy_time, copy_ddr, ar_time = W.copy_time, W.copy_ddr, W.ar_time
    chip_ptr, item_u, item_r = W.chip_ptr, W.item_u, W.item_r

    index_items(n, slots, ncopy, chip_ptr, W.cursor, item_u, item_r)
    spill = 0.0
    for i in range(n):
        a, b = chip_ptr[i], chip_ptr[i + 1]
        W.stored[i], W.overflow[i] = place_chiplet(
            stacks[i] * hbm_cap, kind[i], item_u, item_r, a, b - a, ncopy, split, unit_capacity, unit_kv, w_copy,
            other_dram, read_scale, W.buf_size, W.buf_read, W.buf_density, W.buf_order, W.buf_spill, f)
        spill += W.overflow[i]
    short = max(spill - ddr * T.ddr_cap, 0.0)
    ddr_bw = max(ddr * T.ddr_bw, 1.0)
    for s in range(stage_repeat.shape[0]):
        for i in range(n):
            ct[s, i] = 0.0
        sd = e_compute = e_dram = dram = net = e_net = 0.0
        for u in range(stage_start[s], stage_start[s + 1]):
            c = ncopy[u]
            ar_time[u] = 0.0
            if split and c > 1:
                t_ar, hops, e_ar = allreduce(u, slots, c, out_bytes[u], n, pb, pair_ptr, pair_latency, pair_energy,
                                             link_bw)
                ar_time[u] = t_ar
                net += hops
                e_net += e_ar
            for r in range(c):
                i = slots[u, r]
                k = kind[i]
                b = copy_bytes(w_copy, other_dram, u, c, k)
                t, b_ddr, ed = roofline(unit_time[u, k] / c, b, f[u, r], stacks[i] * hbm_bw, ddr_bw, hbm_e, ddr_e)
                copy_time[u, r] = t + ar_time[u]
                copy_ddr[u, r] = b_ddr
                ct[s, i] += copy_time[u, r]
                sd += b_ddr
                dram += b
                e_compute += unit_energy[u, k] / c
                e_dram += ed
        W.sd[s] = sd
        W.stage_t[s] = max(row_max(ct, s, n), sd / ddr_bw)
        repeat = stage_repeat[s]
        W.comm[s, REST] = 0.0
        hand_off_net = 0.0
        hand_off_e = 0.0
        for e in range(edge_start[s], edge_start[s + 1]):
            edge_lat[e] = 0.0
        for instance in range(2 if repeat > 1 else 1):
            for link in range(L):
                loads[s, instance, link] = 0.0
            hops = 0.0
            energy = 0.0
            for e in range(edge_start[s], edge_start[s + 1]):
                if in_instance(edge_phase[e], instance):
                    edge_lat[e], h, en = edge_flow(edge_src[e], edge_dst[e], edge_bytes[e], slots, ncopy, split, n,
                                                   pb, pair_ptr, route_links, pair_latency, pair_energy, loads, s,
                                                   instance, 1.0)
                    hops += h
                    energy += en
            W.comm[s, instance] = stage_comm(edge_start, edge_phase, edge_lat, loads, s, instance, link_inv_bw, lb, L)
            times = 1.0 if instance == FIRST else repeat - 1.0
            hand_off_net += times * hops
            hand_off_e += times * energy
        # per instance of the stage, except the network: byte-hops and joules of the whole step
        W.stage_e_compute[s] = e_compute
        W.stage_e_dram[s] = e_dram
        W.stage_dram[s] = dram
        W.stage_net[s] = net * repeat + hand_off_net
        W.stage_e_net[s] = e_net * repeat + hand_off_e
    return short


@nb.njit(cache=True)
def design_latency(T, W, n):
    """(expected, p99) latency of the design whose stage figures ``W`` holds (see `scenario_latency`)."""
    return scenario_latency(T.scen_ptr, T.scen_stages, T.scen_prob, T.after_ptr, T.after_ids, T.stage_repeat,
                            T.chain, W.stage_t, W.comm, W.ct, n, W.finish, W.cps, W.in_scen, W.busy)
