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
"""
from __future__ import annotations

from collections import namedtuple

import numba as nb
import numpy as np

from memory.placement import spill_by_density

KernelTables = namedtuple("KernelTables", [
    "unit_is_expert", "unit_stage", "unit_capacity", "unit_kv", "unit_w_copy", "unit_time", "unit_energy",
    "unit_other_dram", "unit_out_bytes", "unit_edge_ptr", "unit_edges", "stage_start", "stage_repeat", "stage_prob",
    "after_ptr", "after_ids", "scen_ptr", "scen_stages", "scen_prob", "edge_start", "edge_src", "edge_dst",
    "edge_bytes", "edge_phase", "edge_stage", "chain", "kind_area", "kind_wafer_cost", "kind_d0", "kind_static_w",
    "kind_peak_dyn_w", "tokens", "hbm_cap", "hbm_bw", "hbm_e", "hbm_phy", "hbm_footprint", "hbm_cost", "ddr_cap",
    "ddr_bw", "ddr_e", "ddr_phy", "ddr_cost", "link_bw", "bond_yield", "yield_alpha", "wafer_diameter"])

Workspace = namedtuple("Workspace", [
    # intact design (base pass)
    "ct", "sd", "stage_t", "comm", "stage_e_compute", "stage_e_dram", "stage_dram", "stage_net", "stage_e_net",
    "copy_time", "copy_ddr", "ar_time", "f", "loads", "edge_lat", "stored", "overflow", "chip_ptr", "chip_items",
    "cursor", "buf_size", "buf_read", "buf_density", "buf_order", "buf_spill", "buf_item",
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
        overflow=f(max_chips), chip_ptr=i64(max_chips + 1), chip_items=i64(items), cursor=i64(max_chips),
        buf_size=f(items), buf_read=f(items), buf_density=f(items), buf_order=i64(items), buf_spill=f(items),
        buf_item=i64(items),
        slots2=np.full((U, max_copies), -1, np.int64), count2=i64(U), f2=f(U, max_copies), moved=b(U),
        moved_list=i64(U), stored2=f(max_chips), overflow2=f(max_chips), in_a=b(max_chips), a_list=i64(max_chips),
        dirty=b(S), dirty_list=i64(S), bk_ct=f(S, max_chips), bk_sd=f(S), bk_stage_t=f(S), seen=b(E),
        edge_list=i64(E), bk_edge_lat=f(E), affected=b(S, 2), aff_list=i64(2 * S, 2), bk_loads=f(2 * S, max_links),
        bk_comm=f(2 * S), dead=i64(max_chips),
        finish=f(S), cps=f(n_scen), in_scen=b(S), busy=f(max_chips))


@nb.njit(cache=True, inline="always")
def item_size(T, u, c, split):
    """Bytes one of c copies (or shards) of unit u stores: weights and its share of the KV cache."""
    return (T.unit_capacity[u] / c if split else T.unit_capacity[u]) + T.unit_kv[u] / c


@nb.njit(cache=True, inline="always")
def copy_bytes(T, u, c, k):
    """DRAM bytes one of c copies of unit u moves per layer instance on a chiplet of kind k."""
    return T.unit_w_copy[u, c] + T.unit_other_dram[u, k] / c


@nb.njit(cache=True)
def place_chiplet(T, hbm_capacity, kind_i, items, n_items, ncopy, split, W, frac):
    """Put a chiplet's copies into its HBM densest first; ``frac[u, r]`` gets each copy's DDR fraction.

    ``items`` lists the copies as ``u * R + r`` codes (R = copies per unit in the workspace).
    Returns (bytes stored, bytes spilled to DDR).
    """
    R = W.f.shape[1]
    stored = 0.0
    for x in range(n_items):
        code = items[x]
        u = code // R
        c = ncopy[u]
        s = T.unit_stage[u]
        W.buf_size[x] = item_size(T, u, c, split)
        W.buf_read[x] = copy_bytes(T, u, c, kind_i) * T.stage_repeat[s] * T.stage_prob[s]
        stored += W.buf_size[x]
    spilled = spill_by_density(W.buf_size[:n_items], W.buf_read[:n_items], hbm_capacity, W.buf_density,
                               W.buf_order, W.buf_spill)
    for x in range(n_items):
        code = items[x]
        frac[code // R, code % R] = W.buf_spill[x]
    return stored, spilled


@nb.njit(cache=True)
def copy_cost(T, u, c, k, f, hbm_bw_i, ddr_bw):
    """(time, DDR bytes, DRAM bytes, compute energy, DRAM energy) of one of c copies of unit u on a chiplet
    of kind k, a fraction f of whose bytes live in DDR (all of them when the chiplet has no HBM)."""
    if hbm_bw_i <= 0.0:
        f = 1.0
    b = copy_bytes(T, u, c, k)
    t_mem = b * f / ddr_bw
    if f < 1.0:
        t_mem += b * (1.0 - f) / hbm_bw_i
    e_dram = b * (1.0 - f) * T.hbm_e + b * f * T.ddr_e
    return max(T.unit_time[u, k] / c, t_mem), b * f, b, T.unit_energy[u, k] / c, e_dram


@nb.njit(cache=True)
def allreduce(T, R, sh, n, u, slots, c):
    """(time, byte-hops, energy) of the ring all-reduce of a unit split over c shards.

    Ring all-reduce: 2(c - 1) steps, in each every shard sends D/c bytes to the next one; a step takes
    the slowest neighbour route plus D / (c x link bandwidth) (Patarasuk & Yuan 2009).
    """
    pb = R.pair_base[sh]
    d = T.unit_out_bytes[u]
    lat = 0.0
    hops = 0.0
    energy = 0.0
    for r in range(c):
        a, b = slots[u, r], slots[u, (r + 1) % c]
        if a != b:
            p = pb + a * n + b
            lat = max(lat, R.pair_latency[p])
            hops += R.pair_ptr[p + 1] - R.pair_ptr[p]
            energy += R.pair_energy[p]
    per_step = d / c
    steps = 2.0 * (c - 1)
    return steps * (lat + per_step / T.link_bw), steps * per_step * hops, steps * per_step * energy


@nb.njit(cache=True)
def edge_flow(T, R, sh, n, e, slots, ncopy, split, loads, sign):
    """Add ``sign`` x the bytes of hand-off e to the links its routes cross.

    Shards of a one-to-many unit all-reduce first and one of them sends; every shard of the receiver
    needs the whole input. Copies of a replicated unit share the bytes evenly.
    Returns (longest route latency, byte-hops, network energy in joules).
    """
    pb = R.pair_base[sh]
    a = T.edge_src[e]
    b = T.edge_dst[e]
    ca = 1 if split else ncopy[a]
    cb = ncopy[b]
    amount = sign * T.edge_bytes[e] / ca / (1.0 if split else cb)
    longest = 0.0
    net = 0.0
    energy = 0.0
    for ra in range(ca):
        i = slots[a, ra]
        for rb in range(cb):
            j = slots[b, rb]
            if i != j:
                p = pb + i * n + j
                longest = max(longest, R.pair_latency[p])
                start, end = R.pair_ptr[p], R.pair_ptr[p + 1]
                for x in range(start, end):
                    loads[R.route_links[x]] += amount
                net += amount * (end - start)
                energy += amount * R.pair_energy[p]
    return longest, net, energy


@nb.njit(cache=True, inline="always")
def in_instance(phase, instance):
    """Edge phases: 0 runs before every instance of its stage, 1 only before the first (entry from the
    previous group of layers), 2 before all but the first (a layer feeding the next identical layer)."""
    return phase == 0 or (phase == 1 and instance == FIRST) or (phase == 2 and instance == REST)


@nb.njit(cache=True)
def busiest_link(R, sh, loads):
    """Serialisation time of the most loaded link: max over links of bytes / bandwidth."""
    lb = R.link_base[sh]
    busiest = 0.0
    for link in range(R.n_links[sh]):
        busiest = max(busiest, loads[link] * R.link_inv_bw[lb + link])
    return busiest


@nb.njit(cache=True)
def stage_comm(T, R, sh, s, instance, loads, edge_lat):
    """Hand-off time of one instance of stage s: longest route of its edges + busiest link."""
    longest = 0.0
    for e in range(T.edge_start[s], T.edge_start[s + 1]):
        if in_instance(T.edge_phase[e], instance):
            longest = max(longest, edge_lat[e])
    return longest + busiest_link(R, sh, loads)


@nb.njit(cache=True)
def scenario_latency(T, stage_t, comm, ct, n, finish, cps, in_scen, busy):
    """(expected, p99) over scenarios of each scenario's makespan.

    A scenario's makespan is the longer of its critical path through the stage DAG and the busiest
    chiplet's total work in it (the two classic lower bounds of a schedule: stages on parallel branches
    that share a chiplet cannot overlap). For a chain of stages the critical path always binds.
    """
    S = stage_t.shape[0]
    n_scen = T.scen_prob.shape[0]
    for k in range(n_scen):
        in_scen[:] = False
        for x in range(T.scen_ptr[k], T.scen_ptr[k + 1]):
            in_scen[T.scen_stages[x]] = True
        longest = 0.0
        busy[:n] = 0.0
        for s in range(S):       # stages are numbered in topological order
            start = 0.0
            for x in range(T.after_ptr[s], T.after_ptr[s + 1]):
                start = max(start, finish[T.after_ids[x]])
            w = 0.0
            if in_scen[s]:
                r = T.stage_repeat[s]
                w = r * stage_t[s] + comm[s, FIRST] + (r - 1.0) * comm[s, REST]
                if not T.chain:
                    for i in range(n):
                        busy[i] += r * ct[s, i]
            finish[s] = start + w
            longest = max(longest, finish[s])
        cps[k] = max(longest, busy[:n].max())
    expected = 0.0
    for k in range(n_scen):
        expected += T.scen_prob[k] * cps[k]
    if n_scen == 1:
        return expected, cps[0]
    order = np.argsort(cps[:n_scen])
    acc = 0.0
    p99 = cps[order[n_scen - 1]]
    for x in range(n_scen):
        acc += T.scen_prob[order[x]]
        if acc >= 0.99 - 1e-12:
            p99 = cps[order[x]]
            break
    return expected, p99


@nb.njit(cache=True)
def index_items(n, slots, ncopy, W):
    """Group the copies by chiplet (CSR ``chip_ptr`` / ``chip_items``, codes ``u * R + r`` in (u, r) order)."""
    R = W.f.shape[1]
    W.chip_ptr[: n + 1] = 0
    for u in range(slots.shape[0]):
        for r in range(ncopy[u]):
            W.chip_ptr[slots[u, r] + 1] += 1
    for i in range(n):
        W.chip_ptr[i + 1] += W.chip_ptr[i]
        W.cursor[i] = W.chip_ptr[i]
    for u in range(slots.shape[0]):
        for r in range(ncopy[u]):
            i = slots[u, r]
            W.chip_items[W.cursor[i]] = u * R + r
            W.cursor[i] += 1


@nb.njit(cache=True)
def base_pass(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, W):
    """Evaluate the intact design, leaving per-stage and per-copy figures in ``W``; returns the shortfall."""
    index_items(n, slots, ncopy, W)
    spill = 0.0
    for i in range(n):
        a, b = W.chip_ptr[i], W.chip_ptr[i + 1]
        W.stored[i], W.overflow[i] = place_chiplet(T, stacks[i] * T.hbm_cap, kind[i], W.chip_items[a:b], b - a,
                                                   ncopy, split, W, W.f)
        spill += W.overflow[i]
    short = max(spill - ddr * T.ddr_cap, 0.0)
    ddr_bw = max(ddr * T.ddr_bw, 1.0)
    L = R.n_links[sh]
    for s in range(T.stage_repeat.shape[0]):
        W.ct[s, :n] = 0.0
        sd = e_compute = e_dram = dram = net = e_net = 0.0
        for u in range(T.stage_start[s], T.stage_start[s + 1]):
            c = ncopy[u]
            W.ar_time[u] = 0.0
            if split and c > 1:
                t_ar, hops, e_ar = allreduce(T, R, sh, n, u, slots, c)
                W.ar_time[u] = t_ar
                net += hops
                e_net += e_ar
            for r in range(c):
                i = slots[u, r]
                t, b_ddr, b, ec, ed = copy_cost(T, u, c, kind[i], W.f[u, r], stacks[i] * T.hbm_bw, ddr_bw)
                W.copy_time[u, r] = t + W.ar_time[u]
                W.copy_ddr[u, r] = b_ddr
                W.ct[s, i] += W.copy_time[u, r]
                sd += b_ddr
                dram += b
                e_compute += ec
                e_dram += ed
        W.sd[s] = sd
        W.stage_t[s] = max(W.ct[s, :n].max(), sd / ddr_bw)
        repeat = T.stage_repeat[s]
        W.comm[s, REST] = 0.0
        hand_off_net = 0.0
        hand_off_e = 0.0
        for e in range(T.edge_start[s], T.edge_start[s + 1]):
            W.edge_lat[e] = 0.0
        for instance in range(2 if repeat > 1 else 1):
            loads = W.loads[s, instance]
            loads[:L] = 0.0
            hops = 0.0
            energy = 0.0
            for e in range(T.edge_start[s], T.edge_start[s + 1]):
                if in_instance(T.edge_phase[e], instance):
                    W.edge_lat[e], h, en = edge_flow(T, R, sh, n, e, slots, ncopy, split, loads, 1.0)
                    hops += h
                    energy += en
            W.comm[s, instance] = stage_comm(T, R, sh, s, instance, loads, W.edge_lat)
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
