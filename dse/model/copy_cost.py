"""What one copy of a unit costs on a chiplet: its kernels' roofline time, its DRAM bytes and energy, its
host's issue time, and the framework's work per sequence (the per-copy terms of dse.model.perf_model).

Helpers for the kernels (``inline="always"``): they take arrays and scalars, never a whole table tuple
(dse.model.perf_model, "Implementation note"); a kind's per-kernel figures come as one small tuple of
scalars (`kind_terms`), the memory a copy reads from as a `ChipletMemory`.
"""
from __future__ import annotations

from typing import NamedTuple

import numba as nb

from arch.power import sustained_clock

nowrap = nb.uintp      # see dse.model.perf_model: an unsigned index skips the negative-index wrap-around


class ChipletMemory(NamedTuple):
    """The memory one chiplet's copies read from (Numba builds and reads it in the kernels)."""

    hbm_Bps: float          # the chiplet's local tier: its HBM stacks' bandwidth, else an SRAM-resident kind's
                            # SRAM (`local_memory`); 0 with neither
    ddr_Bps: float          # the package's DDR bandwidth
    hbm_j_per_byte: float
    ddr_j_per_byte: float
    sram_Bps: float         # an SRAM-resident kind's SRAM in front of its HBM stacks (three tiers); 0 otherwise
    sram_j_per_byte: float
    stream_Bps: float = 0.0     # weight streaming's path from the DDR into the local tier (`stream_bandwidth`); 0: off


class PowerTerms(NamedTuple):
    """A chiplet kind's power figures for `copy_roofline` (arch.power)."""

    limit_w: float          # board power limit (0: none)
    floor: float            # lowest voltage fraction
    static_w: float         # leakage
    active_w: float         # clocks and control of a busy chip (arch.active_power_w)


class CopyCost(NamedTuple):
    """What one copy of a unit costs (`copy_roofline`)."""

    time_s: float
    ddr_bytes: float
    dram_j: float
    clock_j: float          # energy change from clocks under the power limit (<= 0)
    stream_s: float         # the transfer of its streamed bytes into the local tier (0: none streamed)


@nb.njit(cache=True, inline="always", error_model="numpy")
def local_memory(stacks_i, hbm_bw, hbm_e, sram_bw_k, sram_e_k, ddr_bw, ddr_e, stream_bw):
    """The `ChipletMemory` of a chiplet with ``stacks_i`` HBM stacks: its HBM over the package's DDR (and an
    SRAM-resident kind's SRAM in front of the HBM: three tiers), or, with none, an SRAM-resident kind's SRAM
    (``sram_bw_k`` > 0; 0 for other kinds: everything from DDR), as dse.model.hbm_placement.local_capacity
    places its copies; ``stream_bw`` > 0: its DDR bytes streamed into the local tier at that bandwidth
    (dse.model.hbm_placement.stream_bandwidth)."""
    if stacks_i > 0:
        return ChipletMemory(stacks_i * hbm_bw, ddr_bw, hbm_e, ddr_e, sram_bw_k, sram_e_k, stream_bw)
    return ChipletMemory(sram_bw_k, ddr_bw, sram_e_k, ddr_e, 0.0, 0.0, stream_bw)


@nb.njit(cache=True, inline="always", error_model="numpy")
def copy_bytes(w_copy, other_dram, u, c, k):
    """DRAM bytes one of c copies of unit u moves per layer instance on a chiplet of kind k."""
    return w_copy[nowrap(u), nowrap(c)] + other_dram[nowrap(u), nowrap(k)] / c


@nb.njit(cache=True, inline="always", error_model="numpy")
def kind_terms(mem_eff, overhead, dispatch, k, alone):
    """A kind k's (share of DRAM bandwidth, kernel overhead, host dispatch floor) for `copy_roofline`; the
    per-kernel terms 0 when the unit's kernels are grouped with others' (``alone`` 0: routed experts,
    dse.model.grouped, whose groups pay them)."""
    return mem_eff[nowrap(k)], overhead[nowrap(k)] * alone, dispatch[nowrap(k)] * alone


@nb.njit(cache=True, inline="always", error_model="numpy")
def power_terms(limit, floor, static_w, active_w, k):
    """A kind k's `PowerTerms` for `copy_roofline`."""
    return PowerTerms(limit[nowrap(k)], floor[nowrap(k)], static_w[nowrap(k)], active_w[nowrap(k)])


@nb.njit(cache=True, inline="always", error_model="numpy")
def copy_roofline(u, k, c, w_ratio, bytes_, f, g, memory, kind_k, op_ptr, op_time, op_w, op_o, op_prob, op_inv,
                  power_k, op_e):
    """`CopyCost` (time, DDR bytes, DRAM energy, energy change from clocks under the power limit) of one of c copies of
    unit u on a chiplet of kind k, moving ``bytes_`` of which a fraction f from DDR (all of them when the
    chiplet has no HBM), g from an SRAM-resident kind's SRAM in front of its HBM (0 unless three tiers;
    dse.model.hbm_placement.place_chiplet) and the rest from the local tier: each tier's bytes at its own
    bandwidth, their times summed (f / B_ddr + g / B_sram + (1 - f - g) / B_hbm per byte).

    ``memory``: the `ChipletMemory` it reads from;
    ``kind_k``: the kind's `kind_terms`; ``power_k``: its `power_terms`. Each operator of the unit runs as one
    kernel (arch.roofline.kernel_time_s): its compute (its 1/c share) and its bytes at the kind's share of the
    HBM / DDR bandwidth overlap in a load-compute pipeline, plus the kind's kernel overhead, never less
    than its host dispatch time; a kernel that would draw more than the kind's power limit runs at the
    clock it sustains under it (arch.power.sustained_clock: compute stretched, switching energy down by
    v^2, the active power by s v^2: the last return value, <= 0, is that change against the full clock's
    operation energy and active power over the kernel's time). Operators weigh by the probability they run.

    Weight streaming (``memory.stream_Bps`` > 0): the DDR fraction f is copied into the local tier ahead of
    use, into one of two buffers while the copy before it computes from the other (SambaNova SN40L's DDR to
    HBM / SRAM copies, Prabhakar et al., arXiv 2405.07518; Cerebras's weight streaming from MemoryX), so
    the kernels read all their bytes from the local tier and the copy takes max(that time, its transfer:
    f x bytes / (B_stream x the kind's share)); its energy adds the local tier's write of the f bytes to
    their DDR read. The pipeline's fill (the first transfer, hidden behind nothing) is the step's
    (dse.model.perf_model)."""
    mem_eff_k, overhead_k, dispatch_k = kind_k
    limit_k, floor_k, static_k, active_k = power_k.limit_w, power_k.floor, power_k.static_w, power_k.active_w
    if memory.hbm_Bps <= 0.0:
        f = 1.0
        g = 0.0
    fs = 0.0            # the streamed fraction
    if memory.stream_Bps > 0.0 and memory.hbm_Bps > 0.0 and f > 0.0:
        fs = f
        f = 0.0
    x = f / memory.ddr_Bps
    if f < 1.0:
        if g > 0.0:                 # three tiers (the terms below are the two-tier ones when g is 0)
            x += g / memory.sram_Bps
            if f + g < 1.0:
                x += (1.0 - f - g) / memory.hbm_Bps
        else:
            x += (1.0 - f) / memory.hbm_Bps
    x /= mem_eff_k
    j_per_byte = f * memory.ddr_j_per_byte + (1.0 - f) * memory.hbm_j_per_byte
    local_j = bytes_ * (1.0 - f) * memory.hbm_j_per_byte
    if g > 0.0:
        h = max(1.0 - f - g, 0.0)
        j_per_byte = f * memory.ddr_j_per_byte + g * memory.sram_j_per_byte + h * memory.hbm_j_per_byte
        local_j = bytes_ * h * memory.hbm_j_per_byte + bytes_ * g * memory.sram_j_per_byte
    t = 0.0
    de = 0.0
    # 1 / c is exact for a power of two c, and then x * (1 / c) is x / c to the bit (both round the same
    # real number): a multiplication instead of three divisions per operator for c = 1, 2, 4, ...
    inv_c = 1.0 / c
    exact_inv = (c & (c - 1)) == 0
    for i in range(op_ptr[nowrap(u)], op_ptr[nowrap(u + 1)]):
        if exact_inv:
            o_c, e_op, t_c = op_o[nowrap(i), nowrap(k)] * inv_c, op_e[nowrap(i), nowrap(k)] * inv_c, \
                op_time[nowrap(i), nowrap(k)] * inv_c
        else:
            o_c, e_op, t_c = op_o[nowrap(i), nowrap(k)] / c, op_e[nowrap(i), nowrap(k)] / c, \
                op_time[nowrap(i), nowrap(k)] / c
        moved = w_ratio * op_w[nowrap(i)] + o_c
        s, ti = sustained_clock(t_c, moved * x, op_inv[nowrap(i), nowrap(k)],
                                overhead_k, dispatch_k, e_op, moved * j_per_byte, static_k, active_k, limit_k, floor_k)
        t += op_prob[nowrap(i)] * ti
        if s < 1.0:
            v = max(s, floor_k)
            de += op_prob[nowrap(i)] * (e_op * (v * v - 1.0) + active_k * ti * (s * v * v - 1.0))
    if fs > 0.0:
        ts = bytes_ * fs / (memory.stream_Bps * mem_eff_k)
        return CopyCost(max(t, ts), bytes_ * fs,
                        local_j + bytes_ * fs * (memory.ddr_j_per_byte + memory.hbm_j_per_byte), de, ts)
    return CopyCost(t, bytes_ * f, local_j + bytes_ * f * memory.ddr_j_per_byte, de, 0.0)


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
