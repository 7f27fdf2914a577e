"""Latency and energy of one step of a design: the Numba core the population evaluator calls.

Model (per stage s, repeated ``repeat_s`` times, run with probability ``prob_s``):

* Memory placement: each chiplet stores its units' weights (a full copy per replica, 1/c per shard)
  and KV cache (1/c per copy); what exceeds its HBM spills to the package's DDR, so a fraction
  ``f_i`` of chiplet i's traffic goes to DDR. DDR short of the spill is a capacity violation.
* A unit copy on chiplet i takes ``max(compute, memory)`` (roofline overlap): compute from the arch
  cost table, memory = HBM bytes / local HBM bandwidth + DDR bytes / package DDR bandwidth. Each
  replica of a routed expert reads the weights when any of its 1/c share of tokens selects it:
  probability ``1 - (1 - q)^(T/c)``. Units on one chiplet run one after another.
* A stage lasts as long as its slowest chiplet, and at least DDR bytes / DDR bandwidth (shared).
* Shards of a one-to-many unit all-reduce their output with a ring: ``2(c-1)`` steps of
  ``hops x hop latency + D / (c x link bandwidth)``.
* Hand-offs into a stage (graph edges) are routed XY on the mesh; the stage waits for the longest
  zero-load path (hops x hop latency) plus the most loaded link's serialisation (bytes / bandwidth).
  A group of r identical layers pays its entry hand-offs once and its layer-to-layer ones r - 1 times.
* Energy: compute + SRAM (arch table), DRAM bytes x energy per byte, network bytes x hops x energy per
  hop, and static power x latency.
"""
from __future__ import annotations

from collections import namedtuple

import numba as nb
import numpy as np

from noc.mesh import add_xy_route_load, xy_hops

KernelTables = namedtuple("KernelTables", [
    "unit_is_expert", "unit_capacity", "unit_kv", "unit_weight_if_run", "unit_sel", "unit_time", "unit_energy",
    "unit_other_dram", "unit_out_bytes", "stage_start", "stage_repeat", "stage_prob", "edge_start", "edge_src",
    "edge_dst", "edge_bytes", "edge_phase", "kind_area", "kind_wafer_cost", "kind_d0", "kind_static_w", "kind_peak_dyn_w",
    "tokens", "hbm_cap", "hbm_bw", "hbm_e", "hbm_phy", "hbm_footprint", "hbm_cost", "ddr_cap", "ddr_bw", "ddr_e",
    "ddr_phy", "ddr_cost", "link_bw", "hop_lat", "hop_e", "bond_yield", "yield_alpha", "wafer_diameter"])


@nb.njit(cache=True)
def chip_storage(T, n, slots, ncopy, split, alive):
    """Bytes each chiplet must hold (weights and KV of the unit copies it carries)."""
    stored = np.zeros(n)
    for u in range(slots.shape[0]):
        c = ncopy[u]
        w = T.unit_capacity[u] / c if split else T.unit_capacity[u]
        for r in range(c):
            i = slots[u, r]
            if i >= 0 and alive[i]:
                stored[i] += w + T.unit_kv[u] / c
    return stored


@nb.njit(cache=True)
def step(T, n, cols, kind, stacks, ddr, slots, ncopy, split, alive, loads):
    """(latency_s, dynamic energy_j, capacity_short_bytes, dram_bytes, net_byte_hops) of one step."""
    stored = chip_storage(T, n, slots, ncopy, split, alive)
    ddr_frac = np.zeros(n)
    hbm_bw = np.zeros(n)
    spill = 0.0
    for i in range(n):
        cap = stacks[i] * T.hbm_cap
        hbm_bw[i] = stacks[i] * T.hbm_bw
        if stored[i] > cap:
            spill += stored[i] - cap
            ddr_frac[i] = (stored[i] - cap) / stored[i]
    short = max(spill - ddr * T.ddr_cap, 0.0)
    ddr_bw = max(ddr * T.ddr_bw, 1.0)

    latency = 0.0
    energy = 0.0
    dram_bytes = 0.0
    net_hops = 0.0
    chip_time = np.zeros(n)
    S = T.stage_repeat.shape[0]
    for s in range(S):
        chip_time[:] = 0.0
        stage_energy = 0.0
        stage_ddr = 0.0
        stage_dram = 0.0
        stage_net = 0.0
        for u in range(T.stage_start[s], T.stage_start[s + 1]):
            c = ncopy[u]
            share = 1.0 / c
            q = T.unit_sel[u]
            if split:
                w = T.unit_weight_if_run[u] * (1.0 - (1.0 - q) ** T.tokens) * share
            else:
                w = T.unit_weight_if_run[u] * (1.0 - (1.0 - q) ** (T.tokens * share))
            for r in range(c):
                i = slots[u, r]
                k = kind[i]
                comp = T.unit_time[u, k] * share
                b = w + T.unit_other_dram[u, k] * share
                f = ddr_frac[i]
                t_mem = b * f / ddr_bw
                if f < 1.0:
                    t_mem += b * (1.0 - f) / hbm_bw[i]
                chip_time[i] += max(comp, t_mem)
                stage_ddr += b * f
                stage_dram += b
                stage_energy += T.unit_energy[u, k] * share + b * (1.0 - f) * T.hbm_e + b * f * T.ddr_e
            if split and c > 1:
                d = T.unit_out_bytes[u]
                hops = 0
                for r in range(c):
                    hops = max(hops, xy_hops(slots[u, r], slots[u, (r + 1) % c], cols))
                t_ar = 2.0 * (c - 1) * (hops * T.hop_lat + d / (c * T.link_bw))
                for r in range(c):
                    chip_time[slots[u, r]] += t_ar
                stage_net += 2.0 * (c - 1) * d * hops
        stage_t = max(chip_time.max(), stage_ddr / ddr_bw)

        repeat = T.stage_repeat[s]
        comm_first, net_first = hand_offs(T, s, 2, n, cols, slots, ncopy, split, loads)
        comm_rest, net_rest = 0.0, 0.0
        if repeat > 1:
            comm_rest, net_rest = hand_offs(T, s, 1, n, cols, slots, ncopy, split, loads)
        stage_net = stage_net * repeat + net_first + (repeat - 1.0) * net_rest
        prob = T.stage_prob[s]
        latency += prob * (repeat * stage_t + comm_first + (repeat - 1.0) * comm_rest)
        energy += prob * (repeat * stage_energy + stage_net * T.hop_e)
        dram_bytes += prob * repeat * stage_dram
        net_hops += prob * stage_net
    return latency, energy, short, dram_bytes, net_hops


@nb.njit(cache=True)
def hand_offs(T, s, skip_phase, n, cols, slots, ncopy, split, loads):
    """(time, byte-hops) of one instance of the hand-offs into stage s, leaving out edges of ``skip_phase``.

    Edge phases: 0 runs before every instance of the stage, 1 only before the first (entry from the
    previous group of layers), 2 before all but the first (a layer feeding the next identical layer).
    """
    loads[: n * 4] = 0.0
    max_lat = 0.0
    net = 0.0
    for e in range(T.edge_start[s], T.edge_start[s + 1]):
        if T.edge_phase[e] == skip_phase:
            continue
        a = T.edge_src[e]
        b = T.edge_dst[e]
        ca = 1 if split else ncopy[a]          # shards all-reduce first, then one of them sends
        cb = ncopy[b]
        share = T.edge_bytes[e] / ca / (1.0 if split else cb)   # shards each need the whole input
        for ra in range(ca):
            i = slots[a, ra]
            for rb in range(cb):
                j = slots[b, rb]
                if i != j:
                    add_xy_route_load(i, j, cols, share, loads)
                    h = xy_hops(i, j, cols)
                    max_lat = max(max_lat, h * T.hop_lat)
                    net += share * h
    return max_lat + loads[: n * 4].max() / T.link_bw, net


@nb.njit(cache=True)
def remap_without(T, n, failed, slots, ncopy, split, stacks):
    """Slots after chiplet ``failed`` dies: surviving copies keep serving; a unit (or shard) left
    without a chiplet moves to the survivor with the most free HBM (lowest index on ties)."""
    alive = np.ones(n, np.bool_)
    alive[failed] = False
    new = slots.copy()
    counts = ncopy.copy()
    stored = chip_storage(T, n, slots, ncopy, split, alive)
    for u in range(slots.shape[0]):
        c = counts[u]
        kept = 0
        for r in range(c):
            if slots[u, r] != failed:
                new[u, kept] = slots[u, r]
                kept += 1
        if kept == c:
            continue
        size = (T.unit_capacity[u] / c if split else T.unit_capacity[u]) + T.unit_kv[u] / c
        best = -1
        best_free = -np.inf
        for i in range(n):
            if alive[i]:
                free = stacks[i] * T.hbm_cap - stored[i]
                if free > best_free:
                    best, best_free = i, free
        if split or kept == 0:
            new[u, kept] = best
            stored[best] += size
            kept += 1
        else:
            # replicas share the lost copy's tokens and KV
            for r in range(kept):
                stored[new[u, r]] += T.unit_kv[u] / c / kept
        for r in range(kept, new.shape[1]):
            new[u, r] = -1
        counts[u] = kept
    return new, counts, alive
