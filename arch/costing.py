"""Time, energy and off-chip traffic of every operator of a workload on every chiplet of a library.

The table does not depend on where operators are mapped, so a study computes it once and a design's
evaluation becomes lookups. Per operator row and chiplet:

* matrix operators (``engine == "matrix"``, ``batch`` GEMMs of M x K by K x N) run on the chiplet's
  matrix engine: systolic arrays (arch.systolic; the N columns split over the chiplet's arrays, or a grid
  of arrays splitting N and K, arch.grid; stall free: DRAM bandwidth is the study's business), GPU tensor
  cores (arch.gpu), CPU SIMD (arch.cpu);
  a reconfigurable chiplet uses whichever of its two modes finishes first after paying the switch;
* vector operators take ``max(flops, elements) / lanes`` cycles on the elementwise unit, on a GPU never
  less than their operands' bytes plus their atomics' sector traffic (``atomic_bytes``: each scalar atomic
  add a 32-byte sector read and written at the L2) over its L2 bandwidth (`on_chip_Bps`);
* ``energy_j``: MAC, SRAM and register energy (arch.energy);
* ``dram_bytes``: weights and KV-cache reads come from memory as often as the engine re-fetches its
  weight-side operand (1x when it fits on chip); KV writes always; activations only when input plus
  output exceed the on-chip capacity (SRAM, L2 or LLC), then as often as the engine re-reads them;
  plus partial sums that spill.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from . import energy, grid
from .chiplet import Chiplet, CpuChiplet, GpuChiplet, ReconfigurableChiplet, SystolicChiplet
from .cpu import simulate_cpu
from .errors import ArchError
from .gpu import simulate_gpu
from .power import KernelPower, kernel_at_limit
from .roofline import kernel_times_s
from .systolic import (DATAFLOW_CODE, DRAM_FI, DRAM_IF, DRAM_OFR, DRAM_OFW, SRAM_FI, SRAM_IF, SRAM_OFR,
                       SRAM_OFW, double_buffered_cycles, simulate)
from .systolic import CYCLES as S_CYCLES
from .technology import precision_bytes


@dataclass
class CostTable:
    """Per (operator, chiplet) figures, each of shape (n_ops, n_chiplets)."""

    time_s: np.ndarray
    energy_j: np.ndarray
    dram_bytes: np.ndarray
    sram_bytes: np.ndarray          # on-chip buffer / cache traffic
    utilisation: np.ndarray         # achieved FLOP/s over the chiplet's peak at the precision
    mode: np.ndarray                # reconfigurable chiplets: mode used (0 resting, 1 other); -1 otherwise
    overlap_steps: np.ndarray       # steps of the load/compute pipeline (inf: overlap assumed perfect)


@dataclass
class MatrixCost:
    """Cost of a batch of GEMMs on one chiplet; arrays of one entry per GEMM."""

    time_s: np.ndarray
    energy_j: np.ndarray
    sram_bytes: np.ndarray
    dram_a_bytes: np.ndarray        # M x K operand (activations)
    dram_b_bytes: np.ndarray        # K x N operand (weights / KV cache)
    dram_c_bytes: np.ndarray        # outputs (and spilled partial sums)
    mode: np.ndarray
    steps: np.ndarray | None = None  # load/compute pipeline steps per processor (None: perfect overlap)


def on_chip_Bps(ch: Chiplet) -> float:
    """Bandwidth at which an elementwise kernel moves operands that stay on chip: a GPU's L2 bytes per
    clock x clock (A100 and H100: 5,120 B per clock, 7.2 and 9.0 TB/s; Table 3 of PMC10448217, from
    NVIDIA's whitepapers); inf where not modelled (the vector lanes bound it)."""
    if isinstance(ch, GpuChiplet) and ch.l2_bytes_per_cycle > 0:
        return ch.l2_bytes_per_cycle * ch.freq_hz
    return np.inf


def on_chip_bytes(ch: Chiplet) -> float:
    if isinstance(ch, SystolicChiplet):
        return float(ch.sram_bytes)
    if isinstance(ch, GpuChiplet):
        return float(ch.l2_bytes)
    if isinstance(ch, CpuChiplet):
        return float(ch.llc_bytes)
    raise ArchError(f"chiplet {ch.name!r}: unknown kind {ch.kind!r}")


def _systolic(ch: SystolicChiplet, M, N, K, batch, precision) -> MatrixCost:
    """Each array of the grid (arch.grid) runs its block of the GEMM; the grid's links add their fill and
    bound the time by their traffic. DRAM: every array reads its own weight block; the inputs are read once
    per grid row (broadcast along it); outputs once per grid column when its rows sum partial sums (ws, is),
    else once per array."""
    word = ch.pe_bits(precision) / 8.0
    out_b = precision_bytes(precision)
    s_if, s_fi, s_of = ch.sram_words(precision)
    code, pack, (g_r, g_c) = DATAFLOW_CODE[ch.dataflow], ch.pack(precision), ch.grid
    m_a, n_a, k_a = grid.block(M, N, K, ch.grid, code, pack)
    r = simulate(m_a, n_a, k_a, ch.rows, ch.cols, code, pack=pack,
                 sram_ifmap_words=s_if, sram_filter_words=s_fi, sram_ofmap_words=s_of)[:, 0, :]
    arrays = float(ch.arrays)
    sram = batch * (arrays * (r[:, SRAM_IF] + r[:, SRAM_FI]) * word + arrays * (r[:, SRAM_OFW] + r[:, SRAM_OFR]) * out_b)
    macs = M * N * K * batch
    cycles = r[:, S_CYCLES]
    if ch.weight_buffering == "double":
        cycles = double_buffered_cycles(m_a, n_a, k_a, ch.rows, ch.cols, code, pack)
    fill, link = grid.link_cycles(M, N, K, ch.grid, code, pack, ch.array_link_words)
    cycles = np.maximum(cycles, link) + fill
    writers = float(g_c) if (g_r > 1 and code != 0) else arrays
    return MatrixCost(time_s=cycles * batch / ch.freq_hz,
                      energy_j=energy.systolic_energy_j(ch, macs, sram, precision), sram_bytes=sram,
                      dram_a_bytes=batch * g_r * r[:, DRAM_IF] * word,     # broadcast along each grid row
                      dram_b_bytes=batch * arrays * r[:, DRAM_FI] * word,
                      dram_c_bytes=batch * writers * (r[:, DRAM_OFW] + r[:, DRAM_OFR]) * out_b,
                      mode=np.full(len(M), -1))


def _gpu(ch: GpuChiplet, M, N, K, batch, precision) -> MatrixCost:
    r = simulate_gpu(M, N, K, ch, precision, batch)
    macs = M * N * K * batch
    sram = r[:, 5] + r[:, 6] + r[:, 7]
    # each SM pipelines loads of 64-deep K slices with tensor-core work: waves x K slices of its split
    steps = r[:, 11] * np.maximum(np.ceil(K / r[:, 10] / 64.0), 1.0)
    return MatrixCost(time_s=r[:, 0] / ch.freq_hz,
                      energy_j=energy.gpu_energy_j(ch, macs, r[:, 7], r[:, 6], r[:, 5], precision), sram_bytes=sram,
                      dram_a_bytes=r[:, 2], dram_b_bytes=r[:, 3], dram_c_bytes=r[:, 4], mode=np.full(len(M), -1),
                      steps=steps)


def _cpu(ch: CpuChiplet, M, N, K, batch, precision) -> MatrixCost:
    r = simulate_cpu(M, N, K, ch, precision, batch)
    macs = M * N * K * batch
    return MatrixCost(time_s=r[:, 0] / ch.freq_hz, energy_j=energy.cpu_energy_j(ch, macs, r[:, 5], precision),
                      sram_bytes=r[:, 5], dram_a_bytes=r[:, 2], dram_b_bytes=r[:, 3], dram_c_bytes=r[:, 4],
                      mode=np.full(len(M), -1))


def _reconfigurable(ch: ReconfigurableChiplet, M, N, K, batch, precision) -> MatrixCost:
    rest = _systolic(ch.mode_chiplet(0), M, N, K, batch, precision)
    other = _systolic(ch.mode_chiplet(1), M, N, K, batch, precision)
    switch = other.time_s + 2.0 * ch.reconfig_s < rest.time_s
    pick = lambda a, b: np.where(switch, b, a)
    return MatrixCost(time_s=np.where(switch, other.time_s + 2.0 * ch.reconfig_s, rest.time_s),
                      energy_j=np.where(switch, other.energy_j + 2.0 * ch.reconfig_j, rest.energy_j),
                      sram_bytes=pick(rest.sram_bytes, other.sram_bytes),
                      dram_a_bytes=pick(rest.dram_a_bytes, other.dram_a_bytes),
                      dram_b_bytes=pick(rest.dram_b_bytes, other.dram_b_bytes),
                      dram_c_bytes=pick(rest.dram_c_bytes, other.dram_c_bytes), mode=switch.astype(int))


def matrix_costs(ch: Chiplet, M, N, K, batch=1.0, precision: str = "bf16") -> MatrixCost:
    """Cost of ``batch`` GEMMs (M x K) @ (K x N) per entry on one chiplet (arrays broadcast together)."""
    M, N, K, batch = (np.atleast_1d(np.asarray(x, dtype=float)) for x in (M, N, K, batch))
    M, N, K, batch = np.broadcast_arrays(M, N, K, batch)
    if np.any((M <= 0) | (N <= 0) | (K <= 0) | (batch <= 0)):
        raise ArchError("GEMM dimensions M, N, K and batch must be positive")
    if isinstance(ch, ReconfigurableChiplet):
        return _reconfigurable(ch, M, N, K, batch, precision)
    if isinstance(ch, SystolicChiplet):
        return _systolic(ch, M, N, K, batch, precision)
    if isinstance(ch, GpuChiplet):
        return _gpu(ch, M, N, K, batch, precision)
    if isinstance(ch, CpuChiplet):
        return _cpu(ch, M, N, K, batch, precision)
    raise ArchError(f"chiplet {ch.name!r}: no cost model for kind {ch.kind!r}")


#: matrix operators of the attention core: scores and the weighted sum of values
ATTENTION_MATH = ("attn_score", "attn_context")


def math_precision(name: str, precision: str) -> str:
    """Precision an operator computes in: the workload's, except that the attention core of a model with
    weights below 16 bits still runs at 16 bits (FP8 and INT8 recipes quantize the linear layers; fused
    attention computes in FP16 / BF16: NVIDIA Transformer Engine FP8 primer, TensorRT-LLM's FP8 recipe)."""
    if name in ATTENTION_MATH and precision not in ("fp32", "bf16", "fp16"):
        return "bf16"
    return precision


def op_costs(ops: pd.DataFrame, chiplets: list[Chiplet], precision: str = "bf16",
             vector_from_dram: bool = False) -> CostTable:
    """Cost of every operator row of ``ops`` (workloads OP_COLUMNS) on every chiplet; each matrix row at
    its `math_precision`. ``vector_from_dram``: every elementwise kernel reads and writes its operands in
    memory, on chip or not (unfused elementwise kernels between GEMMs that stream more than the L2)."""
    n, c = len(ops), len(chiplets)
    is_matrix = ops["engine"].to_numpy() == "matrix"
    M, N, K = (ops[k].to_numpy(float) for k in ("M", "N", "K"))
    batch = np.maximum(ops["batch"].to_numpy(float), 1.0)
    flops = ops["flops"].to_numpy(float)
    elements = ops["elements"].to_numpy(float)
    weights = ops["weight_bytes"].to_numpy(float)
    act_in = ops["act_in_bytes"].to_numpy(float)
    act_out = ops["act_out_bytes"].to_numpy(float)
    kv_read = ops["kv_read_bytes"].to_numpy(float)
    kv_write = ops["kv_write_bytes"].to_numpy(float)
    atomic = ops["atomic_bytes"].to_numpy(float) if "atomic_bytes" in ops else np.zeros(n)
    elem = precision_bytes(precision)

    out = {k: np.zeros((n, c)) for k in ("time_s", "energy_j", "dram_bytes", "sram_bytes", "utilisation")}
    out["overlap_steps"] = np.full((n, c), np.inf)
    mode = np.full((n, c), -1)
    mm = np.flatnonzero(is_matrix & (M > 0) & (N > 0) & (K > 0))
    mm_names = ops["name"].to_numpy()[mm] if "name" in ops else np.full(len(mm), "")
    attention_bf16 = np.isin(mm_names, ATTENTION_MATH) & (math_precision(ATTENTION_MATH[0], precision) != precision)
    vec = np.flatnonzero(~np.isin(np.arange(n), mm))
    for j, ch in enumerate(chiplets):
        cap = on_chip_bytes(ch)
        spills = (act_in + act_out) > cap
        if len(mm):
            mc = _rows_by_precision(ch, mm_names, M[mm], N[mm], K[mm], batch[mm], precision)
            a0 = batch[mm] * M[mm] * K[mm] * elem
            b0 = batch[mm] * K[mm] * N[mm] * elem
            c0 = batch[mm] * M[mm] * N[mm] * elem
            rf_a = np.maximum(mc.dram_a_bytes / a0, 1.0)
            rf_b = np.maximum(mc.dram_b_bytes / b0, 1.0)
            psum_spill = np.maximum(mc.dram_c_bytes - c0, 0.0)
            out["time_s"][mm, j] = mc.time_s
            out["energy_j"][mm, j] = mc.energy_j
            out["sram_bytes"][mm, j] = mc.sram_bytes
            out["dram_bytes"][mm, j] = ((weights[mm] + kv_read[mm]) * rf_b + kv_write[mm] + psum_spill
                                        + np.where(spills[mm], act_in[mm] * rf_a + act_out[mm], 0.0))
            peak = np.where(attention_bf16, ch.peak_flops("bf16"), ch.peak_flops(precision)) if attention_bf16.any() \
                else ch.peak_flops(precision)
            out["utilisation"][mm, j] = 2.0 * M[mm] * N[mm] * K[mm] * batch[mm] / (mc.time_s * peak)
            mode[mm, j] = mc.mode
            if mc.steps is not None:
                out["overlap_steps"][mm, j] = mc.steps
        if len(vec):
            work = np.maximum(flops[vec], elements[vec])
            moved = act_in[vec] + act_out[vec]
            t = np.maximum(work / ch.vector_flops(), (moved + atomic[vec]) / on_chip_Bps(ch))
            out["time_s"][vec, j] = t
            out["energy_j"][vec, j] = energy.vector_energy_j(ch, flops[vec], moved + atomic[vec])
            out["sram_bytes"][vec, j] = moved + atomic[vec]
            out["dram_bytes"][vec, j] = weights[vec] + kv_read[vec] + kv_write[vec] + \
                np.where(spills[vec] | vector_from_dram, moved, 0.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                out["utilisation"][vec, j] = np.where(t > 0, work / (t * ch.vector_flops()), 0.0)
    return CostTable(mode=mode, **out)


def _rows_by_precision(ch: Chiplet, names, M, N, K, batch, precision) -> MatrixCost:
    """`matrix_costs` of rows that may compute at different precisions (`math_precision`), in row order."""
    codes, distinct = pd.factorize(np.asarray(names))       # one lookup per operator name, not per row
    wanted = np.array([math_precision(name, precision) for name in distinct.tolist()])[codes] if len(names) \
        else np.array([])
    if (wanted == precision).all():
        return matrix_costs(ch, M, N, K, batch, precision)
    parts = {p: (np.flatnonzero(wanted == p), matrix_costs(ch, M[wanted == p], N[wanted == p], K[wanted == p],
                                                            batch[wanted == p], p)) for p in set(wanted)}
    fields = {}
    for f in ("time_s", "energy_j", "sram_bytes", "dram_a_bytes", "dram_b_bytes", "dram_c_bytes", "mode"):
        out = np.zeros(len(M), dtype=int if f == "mode" else float)
        for idx, mc in parts.values():
            out[idx] = getattr(mc, f)
        fields[f] = out
    if any(mc.steps is not None for _, mc in parts.values()):
        steps = np.full(len(M), np.inf)
        for idx, mc in parts.values():
            if mc.steps is not None:
                steps[idx] = mc.steps
        fields["steps"] = steps
    return MatrixCost(**fields)


class GemmKernel(NamedTuple):
    """One kernel per GEMM of a `MatrixCost` (arrays of one entry per GEMM, seconds and bytes)."""

    compute_s: np.ndarray
    memory_s: np.ndarray
    dram_bytes: np.ndarray
    time_s: np.ndarray


def gemm_kernel(ch: Chiplet, mc: MatrixCost, memory_Bps: float) -> GemmKernel:
    """Each GEMM of ``mc`` run alone as one kernel, as the step model runs an operator
    (arch.roofline.kernel_time_s): its compute, its DRAM bytes (A and B read, C written: a GEMM alone
    keeps nothing on chip between kernels) at ``memory_Bps`` x the chiplet's ``mem_efficiency``,
    overlapped in its load-compute pipeline of ``mc.steps``, plus ``kernel_overhead_s``, never under
    ``dispatch_s``. ``memory_Bps``: the attached memory's sustained bandwidth (memory.effective_bandwidth_Bps, as the
    step model's tables), of which ``mem_efficiency`` is a fraction."""
    if not (math.isfinite(memory_Bps) and memory_Bps > 0):
        raise ArchError(f"the memory bandwidth must be a positive finite number, got {memory_Bps!r}")
    dram = mc.dram_a_bytes + mc.dram_b_bytes + mc.dram_c_bytes
    memory_s = dram / (memory_Bps * ch.mem_efficiency)
    inv_steps = np.zeros(len(dram)) if mc.steps is None else 1.0 / mc.steps
    time_s = kernel_times_s(np.asarray(mc.time_s, float), memory_s, inv_steps, ch.kernel_overhead_s, ch.dispatch_s)
    return GemmKernel(compute_s=mc.time_s, memory_s=memory_s, dram_bytes=dram, time_s=time_s)


def gemm_bound(ch: Chiplet, compute_s: float, memory_s: float) -> str:
    """What sets one kernel's time: ``dispatch`` (the host's floor), ``overhead`` (the kernel's fixed
    time exceeds both its compute and its memory time), else the larger of ``compute`` and ``memory``."""
    if ch.dispatch_s > ch.kernel_overhead_s + max(compute_s, memory_s):
        return "dispatch"
    if ch.kernel_overhead_s > max(compute_s, memory_s):
        return "overhead"
    return "memory" if memory_s > compute_s else "compute"


def gemm_at_limit(ch, M: float, N: float, K: float, precision: str, memory_Bps: float, dram_j_per_byte: float
                  ) -> KernelPower:
    """One GEMM run back to back on ``ch`` under its ``power_limit_w`` (`kernel_at_limit`): arch.costing's
    kernel (compute, DRAM traffic at ``memory_Bps`` x ``mem_efficiency``, overhead), its switching energy
    (arch.op_costs: MACs and SRAM) and DRAM energy (``dram_j_per_byte``): what ``dse gemm`` reports."""
    mc = matrix_costs(ch, M, N, K, 1.0, precision)
    k = gemm_kernel(ch, mc, memory_Bps)
    inv = 0.0 if mc.steps is None else 1.0 / float(mc.steps[0])
    return kernel_at_limit(ch, float(k.compute_s[0]), float(k.memory_s[0]), inv, float(mc.energy_j[0]),
                           float(k.dram_bytes[0]) * dram_j_per_byte, precision)


def gemm_report(ch: Chiplet, M: float, N: float, K: float, precision: str = "bf16",
                memory_Bps: float | None = None, dram_j_per_byte: float = 0.0) -> dict:
    """Latency, achieved FLOP/s, energy and traffic of one GEMM on one chiplet (for ``dse gemm``).

    Without ``memory_Bps`` the latency is the compute alone (the chiplet's matrix engine at its full clock)
    and ``energy_j`` its switching energy. With it, the GEMM as one kernel reading from memory of that
    bandwidth (`gemm_kernel`), run back to back as the step model runs it (arch.costing.gemm_at_limit): at the
    clock the chiplet's power limit leaves, ``energy_j`` the board's whole energy over the kernel (leakage,
    active power, switching at the clock's voltage, DRAM at ``dram_j_per_byte``), so ``power_w`` =
    ``energy_j`` / ``latency_s``, and which term bound it."""
    mc = matrix_costs(ch, M, N, K, 1.0, precision)
    t = float(mc.time_s[0])
    energy_j = float(mc.energy_j[0])
    extra = {}
    if memory_Bps is not None:
        kernel = gemm_kernel(ch, mc, memory_Bps)
        at = gemm_at_limit(ch, M, N, K, precision, memory_Bps, dram_j_per_byte)
        compute_s, memory_s, t = float(kernel.compute_s[0]) / at.clock, float(kernel.memory_s[0]), at.time_s
        energy_j = at.energy_j
        extra = {"compute_s": compute_s, "memory_s": memory_s, "kernel_overhead_s": ch.kernel_overhead_s,
                 "dispatch_s": ch.dispatch_s, "dram_bytes": float(kernel.dram_bytes[0]),
                 "bound": gemm_bound(ch, compute_s, memory_s), "clock_fraction": at.clock,
                 "power_w": at.power_w, "power_limit_w": ch.power_limit_w,
                 "switching_energy_j": at.switching_j, "dram_energy_j": at.dram_j,
                 "static_energy_j": at.static_j, "active_energy_j": at.active_j}
    flops = 2.0 * M * N * K
    report = {"chiplet": ch.name, "kind": ch.kind, "precision": precision, "M": M, "N": N, "K": K,
              "latency_s": t, **extra, "achieved_flops": flops / t, "peak_flops": ch.peak_flops(precision),
              "utilisation": flops / t / ch.peak_flops(precision), "energy_j": energy_j,
              "sram_bytes": float(mc.sram_bytes[0]), "dram_a_bytes": float(mc.dram_a_bytes[0]),
              "dram_b_bytes": float(mc.dram_b_bytes[0]), "dram_c_bytes": float(mc.dram_c_bytes[0])}
    if isinstance(ch, ReconfigurableChiplet):
        report["mode"] = int(mc.mode[0])
    return report
