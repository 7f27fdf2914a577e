"""Latency and energy of one step of a design, and of the same design after chiplet failures.

The Numba core the population evaluator (dse.evaluator) calls. Model, per stage s of the workload
(repeated ``repeat_s`` times for identical layers):

* Memory: each chiplet stores its units' weights (a full copy per replica, 1/c per shard) and KV cache
  (1/c per copy); what exceeds its HBM spills to the package's shared DDR, so a fraction ``f_i`` of
  chiplet i's traffic goes to DDR. DDR short of the spill is a capacity violation.
* A unit copy on chiplet i takes ``max(compute, memory)`` (roofline overlap of compute and DMA):
  compute from the arch cost table, memory = HBM bytes / local HBM bandwidth + DDR bytes / package
  DDR bandwidth. A replica of a routed expert reads its weights when any of its 1/c share of the T
  tokens selects it: probability ``1 - (1 - q)^(T/c)``. Units on one chiplet run one after another.
* A stage lasts as long as its slowest chiplet, and at least its DDR bytes / DDR bandwidth (shared).
* Shards of a one-to-many unit all-reduce their output with a ring: ``2(c-1)`` steps of the longest
  neighbour latency plus ``D / (c x link bandwidth)``.
* Hand-offs into a stage (workload graph edges) follow the package's route tables (dse.routes): the
  stage waits for the longest route (zero-load latency) plus the busiest link's serialisation
  (bytes / bandwidth). A group of r identical layers pays its entry hand-offs once and its
  layer-to-layer ones r - 1 times.
* Stages form a DAG; a workload's scenarios (sets of stages run together, e.g. the expert models an
  ensemble's router picks) each take the longer of their critical path and their busiest chiplet's
  total work; latency is the expectation over scenarios, and the 99th percentile is reported too.
* Energy: compute + SRAM (arch table), DRAM bytes x energy per byte, network bytes x energy per byte
  along each route (links and routers), static power x latency (added by the evaluator).

A failure re-maps the units of the failed chiplets (`remap`) and re-evaluates by deltas: the intact
design's per-copy times and per-stage link loads are kept; a failure subtracts the contributions of the
units it moves and adds their new ones, recomputes in full only chiplets whose memory spill changed,
and re-takes maxima only in the stages it touched. The result equals a full re-evaluation (tested).
"""
from __future__ import annotations

from collections import namedtuple

import numba as nb
import numpy as np

KernelTables = namedtuple("KernelTables", [
    "unit_is_expert", "unit_capacity", "unit_kv", "unit_w_copy", "unit_time", "unit_energy",
    "unit_other_dram", "unit_out_bytes", "unit_edge_ptr", "unit_edges", "stage_start", "stage_repeat", "stage_prob",
    "after_ptr", "after_ids", "scen_ptr", "scen_stages", "scen_prob", "edge_start", "edge_src", "edge_dst",
    "edge_bytes", "edge_phase", "edge_stage", "chain", "kind_area", "kind_wafer_cost", "kind_d0", "kind_static_w",
    "kind_peak_dyn_w", "tokens", "hbm_cap", "hbm_bw", "hbm_e", "hbm_phy", "hbm_footprint", "hbm_cost", "ddr_cap",
    "ddr_bw", "ddr_e", "ddr_phy", "ddr_cost", "link_bw", "bond_yield", "yield_alpha", "wafer_diameter"])

Workspace = namedtuple("Workspace", [
    "ct", "sd", "stage_t", "comm", "stage_e_compute", "stage_e_dram", "stage_dram", "stage_net", "stage_e_net",
    "copy_time",
    "copy_ddr", "ar_time", "loads", "backup", "stored", "frac", "hbm_bw", "ct2", "sd2", "stage_t2", "comm2",
    "stored2", "frac2", "slots2", "count2", "changed", "full", "affected", "aff_list", "seen", "edge_list",
    "finish", "cps", "in_scen", "busy"])

FIRST, REST = 0, 1     # hand-off instances: before the first instance of a stage, before the others


def make_workspace(T: KernelTables, max_chips: int, max_links: int, max_copies: int) -> Workspace:
    """Scratch arrays for one design at a time, sized for the largest package of the study."""
    S = T.stage_repeat.shape[0]
    U = T.unit_capacity.shape[0]
    E = T.edge_src.shape[0]
    n_scen = T.scen_prob.shape[0]
    f = lambda *shape: np.zeros(shape)  # noqa: E731
    return Workspace(
        ct=f(S, max_chips), sd=f(S), stage_t=f(S), comm=f(S, 2), stage_e_compute=f(S), stage_e_dram=f(S),
        stage_dram=f(S), stage_net=f(S), stage_e_net=f(S), copy_time=f(U, max_copies), copy_ddr=f(U, max_copies), ar_time=f(U),
        loads=f(S, 2, max_links), backup=f(2 * S, max_links), stored=f(max_chips), frac=f(max_chips),
        hbm_bw=f(max_chips), ct2=f(S, max_chips), sd2=f(S), stage_t2=f(S), comm2=f(S, 2), stored2=f(max_chips),
        frac2=f(max_chips), slots2=np.full((U, max_copies), -1, np.int64), count2=np.ones(U, np.int64),
        changed=np.zeros(U, np.bool_), full=np.zeros(max_chips, np.bool_), affected=np.zeros((S, 2), np.bool_),
        aff_list=np.zeros((2 * S, 2), np.int64), seen=np.zeros(E, np.bool_), edge_list=np.zeros(E, np.int64),
        finish=f(S), cps=f(n_scen), in_scen=np.zeros(S, np.bool_), busy=f(max_chips))


@nb.njit(cache=True)
def memory_state(T, n, stacks, ddr, slots, ncopy, split, alive, stored, frac, hbm_bw):
    """Fill per-chiplet stored bytes, DDR fraction and HBM bandwidth; return the DDR capacity shortfall."""
    stored[:n] = 0.0
    for u in range(slots.shape[0]):
        c = ncopy[u]
        w = T.unit_capacity[u] / c if split else T.unit_capacity[u]
        for r in range(c):
            i = slots[u, r]
            if alive[i]:
                stored[i] += w + T.unit_kv[u] / c
    spill = 0.0
    for i in range(n):
        cap = stacks[i] * T.hbm_cap
        hbm_bw[i] = stacks[i] * T.hbm_bw
        frac[i] = 0.0
        if alive[i] and stored[i] > cap:
            spill += stored[i] - cap
            frac[i] = (stored[i] - cap) / stored[i]
    return max(spill - ddr * T.ddr_cap, 0.0)


@nb.njit(cache=True)
def copy_cost(T, u, c, k, f, hbm_bw_i, ddr_bw):
    """(time, DDR bytes, DRAM bytes, compute energy, DRAM energy) of one of c copies of unit u on a chiplet
    of kind k whose traffic goes a fraction f to DDR."""
    share = 1.0 / c
    b = T.unit_w_copy[u, c] + T.unit_other_dram[u, k] * share
    t_mem = b * f / ddr_bw
    if f < 1.0:
        t_mem += b * (1.0 - f) / hbm_bw_i
    e_dram = b * (1.0 - f) * T.hbm_e + b * f * T.ddr_e
    return max(T.unit_time[u, k] * share, t_mem), b * f, b, T.unit_energy[u, k] * share, e_dram


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
        p = pb + slots[u, r] * n + slots[u, (r + 1) % c]
        if slots[u, r] != slots[u, (r + 1) % c]:
            lat = max(lat, R.pair_latency[p])
            hops += R.pair_ptr[p + 1] - R.pair_ptr[p]
            energy += R.pair_energy[p]
    per_step = d / c
    steps = 2.0 * (c - 1)
    return steps * (lat + per_step / T.link_bw), steps * per_step * hops, steps * per_step * energy


@nb.njit(cache=True)
def edge_flow(T, R, sh, n, e, slots, ncopy, split, loads, sign):
    """Add ``sign`` x the bytes of hand-off e to the links its routes cross.

    Returns (longest route latency, byte-hops, network energy in joules).

    Shards of a one-to-many unit all-reduce first and one of them sends; every shard of the receiver
    needs the whole input. Copies of a replicated unit share the bytes evenly.
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
def _in_instance(phase, instance):
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
def longest_route(T, R, sh, n, s, instance, slots, ncopy, split):
    """Zero-load latency of the longest route the hand-offs of one instance of stage s take."""
    pb = R.pair_base[sh]
    longest = 0.0
    for e in range(T.edge_start[s], T.edge_start[s + 1]):
        if not _in_instance(T.edge_phase[e], instance):
            continue
        a = T.edge_src[e]
        b = T.edge_dst[e]
        for ra in range(1 if split else ncopy[a]):
            i = slots[a, ra]
            for rb in range(ncopy[b]):
                j = slots[b, rb]
                if i != j:
                    longest = max(longest, R.pair_latency[pb + i * n + j])
    return longest


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
def base_pass(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, W):
    """Evaluate the intact design, leaving per-stage and per-copy figures in ``W``; returns the shortfall."""
    alive = np.ones(n, np.bool_)
    short = memory_state(T, n, stacks, ddr, slots, ncopy, split, alive, W.stored, W.frac, W.hbm_bw)
    ddr_bw = max(ddr * T.ddr_bw, 1.0)
    L = R.n_links[sh]
    for s in range(T.stage_repeat.shape[0]):
        W.ct[s, :n] = 0.0
        sd = e_compute = e_dram = dram = net = e_net = 0.0
        for u in range(T.stage_start[s], T.stage_start[s + 1]):
            c = ncopy[u]
            for r in range(c):
                i = slots[u, r]
                t, b_ddr, b, ec, ed = copy_cost(T, u, c, kind[i], W.frac[i], W.hbm_bw[i], ddr_bw)
                W.ct[s, i] += t
                W.copy_time[u, r] = t
                W.copy_ddr[u, r] = b_ddr
                sd += b_ddr
                dram += b
                e_compute += ec
                e_dram += ed
            W.ar_time[u] = 0.0
            if split and c > 1:
                t_ar, hops, e_ar = allreduce(T, R, sh, n, u, slots, c)
                W.ar_time[u] = t_ar
                for r in range(c):
                    W.ct[s, slots[u, r]] += t_ar
                net += hops
                e_net += e_ar
        W.sd[s] = sd
        W.stage_t[s] = max(W.ct[s, :n].max(), sd / ddr_bw)
        repeat = T.stage_repeat[s]
        W.comm[s, REST] = 0.0
        hand_off_net = 0.0
        hand_off_e = 0.0
        for instance in range(2 if repeat > 1 else 1):
            loads = W.loads[s, instance]
            loads[:L] = 0.0
            longest = 0.0
            hops = 0.0
            energy = 0.0
            for e in range(T.edge_start[s], T.edge_start[s + 1]):
                if _in_instance(T.edge_phase[e], instance):
                    lat, h, en = edge_flow(T, R, sh, n, e, slots, ncopy, split, loads, 1.0)
                    longest = max(longest, lat)
                    hops += h
                    energy += en
            W.comm[s, instance] = longest + busiest_link(R, sh, loads)
            times = 1.0 if instance == FIRST else repeat - 1.0
            hand_off_net += times * hops
            hand_off_e += times * energy
        # per instance of the stage, except the network: byte-hops of the whole step
        W.stage_e_compute[s] = e_compute
        W.stage_e_dram[s] = e_dram
        W.stage_dram[s] = dram
        W.stage_net[s] = net * repeat + hand_off_net
        W.stage_e_net[s] = e_net * repeat + hand_off_e
    return short


@nb.njit(cache=True)
def remap(T, n, alive, slots, ncopy, split, stacks, stored, new_slots, new_count, changed):
    """The mapping after the chiplets with ``alive == False`` die.

    Surviving copies of a replicated unit take over its tokens; a unit (or shard) left without a chiplet
    moves to the survivor with the most free HBM (lowest index on ties). Fills ``new_slots``,
    ``new_count`` and ``changed`` (units with a copy on a failed chiplet); ``stored`` must hold the
    intact design's per-chiplet bytes and is updated as units move. False when no chiplet survives.
    """
    U = slots.shape[0]
    for u in range(U):
        c = ncopy[u]
        kept = 0
        for r in range(c):
            if alive[slots[u, r]]:
                new_slots[u, kept] = slots[u, r]
                kept += 1
        changed[u] = kept < c
        for r in range(kept, new_slots.shape[1]):
            new_slots[u, r] = -1
        new_count[u] = kept
    for i in range(n):
        if not alive[i]:
            stored[i] = 0.0
    for u in range(U):
        if not changed[u]:
            continue
        c = ncopy[u]
        kept = new_count[u]
        if split or kept == 0:
            shard = (T.unit_capacity[u] / c if split else T.unit_capacity[u]) + T.unit_kv[u] / c
            for _ in range(c - kept if split else 1):
                best = -1
                best_free = -np.inf
                for i in range(n):
                    if alive[i]:
                        free = stacks[i] * T.hbm_cap - stored[i]
                        if free > best_free:
                            best, best_free = i, free
                if best < 0:
                    return False
                new_slots[u, kept] = best
                stored[best] += shard
                kept += 1
            new_count[u] = kept
    return True


@nb.njit(cache=True)
def failure_latency(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, alive, W):
    """(expected latency, p99, capacity shortfall) after the chiplets with ``alive == False`` fail.

    Needs `base_pass` of the intact design in ``W`` (left unchanged). Infinite when nothing survives.
    """
    W.stored2[:n] = W.stored[:n]
    if not remap(T, n, alive, slots, ncopy, split, stacks, W.stored2, W.slots2, W.count2, W.changed):
        return np.inf, np.inf, np.inf
    slots2, count2 = W.slots2, W.count2
    short = memory_state(T, n, stacks, ddr, slots2, count2, split, alive, W.stored2, W.frac2, W.hbm_bw)
    ddr_bw = max(ddr * T.ddr_bw, 1.0)
    S = T.stage_repeat.shape[0]

    # --- compute: deltas of moved units; chiplets whose spill changed are recomputed in full ---
    for i in range(n):
        W.full[i] = (not alive[i]) or W.frac2[i] != W.frac[i]
    W.ct2[:, :n] = W.ct[:, :n]
    W.sd2[:] = W.sd
    for i in range(n):
        if W.full[i]:
            W.ct2[:, i] = 0.0
    for s in range(S):
        for u in range(T.stage_start[s], T.stage_start[s + 1]):
            moved = W.changed[u]
            for r in range(ncopy[u]):
                i = slots[u, r]
                if moved or W.full[i]:
                    W.sd2[s] -= W.copy_ddr[u, r]
                    if not W.full[i]:
                        W.ct2[s, i] -= W.copy_time[u, r] + W.ar_time[u]
            c = count2[u]
            t_ar = W.ar_time[u]
            if moved and split and c > 1:
                t_ar, _, _ = allreduce(T, R, sh, n, u, slots2, c)
            for r in range(c):
                i = slots2[u, r]
                if moved or W.full[i]:
                    t, b_ddr, _, _, _ = copy_cost(T, u, c, kind[i], W.frac2[i], W.hbm_bw[i], ddr_bw)
                    W.ct2[s, i] += t + (t_ar if split and c > 1 else 0.0)
                    W.sd2[s] += b_ddr
        W.stage_t2[s] = max(W.ct2[s, :n].max(), W.sd2[s] / ddr_bw)

    # --- hand-offs: move the flows of edges touching moved units, re-take maxima where touched ---
    n_edges = 0
    for u in range(slots.shape[0]):
        if W.changed[u]:
            for x in range(T.unit_edge_ptr[u], T.unit_edge_ptr[u + 1]):
                e = T.unit_edges[x]
                if not W.seen[e]:
                    W.seen[e] = True
                    W.edge_list[n_edges] = e
                    n_edges += 1
    L = R.n_links[sh]
    n_aff = 0
    for k in range(n_edges):
        e = W.edge_list[k]
        W.seen[e] = False
        s = T.edge_stage[e]
        for instance in range(2 if T.stage_repeat[s] > 1 else 1):
            if not _in_instance(T.edge_phase[e], instance):
                continue
            loads = W.loads[s, instance]
            if not W.affected[s, instance]:
                W.affected[s, instance] = True
                W.backup[n_aff, :L] = loads[:L]
                W.aff_list[n_aff, 0] = s
                W.aff_list[n_aff, 1] = instance
                n_aff += 1
            edge_flow(T, R, sh, n, e, slots, ncopy, split, loads, -1.0)
            edge_flow(T, R, sh, n, e, slots2, count2, split, loads, 1.0)
    W.comm2[:, :] = W.comm
    for k in range(n_aff):
        s, instance = W.aff_list[k, 0], W.aff_list[k, 1]
        W.comm2[s, instance] = (longest_route(T, R, sh, n, s, instance, slots2, count2, split)
                                + busiest_link(R, sh, W.loads[s, instance]))
        W.loads[s, instance, :L] = W.backup[k, :L]
        W.affected[s, instance] = False
    expected, p99 = scenario_latency(T, W.stage_t2, W.comm2, W.ct2, n, W.finish, W.cps, W.in_scen, W.busy)
    return expected, p99, short
