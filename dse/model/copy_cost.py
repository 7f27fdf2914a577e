"""What one copy of a unit costs on a chiplet: its kernels' roofline time, its DRAM bytes and energy, its
host's issue time, and the framework's work per sequence (the per-copy terms of dse.model.perf_model).

Helpers for the kernels (``inline="always"``): they take arrays and scalars, never a whole table tuple
(dse.model.perf_model, "Implementation note"); a kind's per-kernel figures come as one small tuple of
scalars (`kind_terms`).
"""
from __future__ import annotations

import numba as nb

from arch.roofline import kernel_time_s

nowrap = nb.uintp      # see dse.model.perf_model: an unsigned index skips the negative-index wrap-around


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
def copy_roofline(u, k, c, w_ratio, bytes_, f, memory, kind_k, op_ptr, op_time, op_w, op_o, op_prob, op_inv):
    """(time, DDR bytes, DRAM energy) of one of c copies of unit u on a chiplet of kind k, moving
    ``bytes_`` of which a fraction f from DDR (all of them when the chiplet has no HBM).

    ``memory``: (the chiplet's HBM bandwidth, the package's DDR bandwidth, HBM and DDR energy per byte);
    ``kind_k``: the kind's `kind_terms`. Each operator of the unit runs as one kernel
    (arch.roofline.kernel_time_s): its compute (its 1/c share) and its bytes at the kind's share of the
    HBM / DDR bandwidth overlap in a load-compute pipeline, plus the kind's kernel overhead, never less
    than its host dispatch time. Operators weigh by the probability they run."""
    hbm_bw_i, ddr_bw, hbm_e, ddr_e = memory
    mem_eff_k, overhead_k, dispatch_k = kind_k
    if hbm_bw_i <= 0.0:
        f = 1.0
    x = f / ddr_bw
    if f < 1.0:
        x += (1.0 - f) / hbm_bw_i
    x /= mem_eff_k
    t = 0.0
    for i in range(op_ptr[nowrap(u)], op_ptr[nowrap(u + 1)]):
        mm = (w_ratio * op_w[nowrap(i)] + op_o[nowrap(i), nowrap(k)] / c) * x
        t += op_prob[nowrap(i)] * kernel_time_s(op_time[nowrap(i), nowrap(k)] / c, mm, op_inv[nowrap(i), nowrap(k)],
                                                overhead_k, dispatch_k)
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
