"""Dynamic energy of compute on a chiplet, from MAC, SRAM and register energies by node and precision.

* MACs: the node's arithmetic energy of the operand precision (TPUv4i for int8/bf16) x the matrix engine's
  class overhead (node table): a GPU tensor core's ``gpu_mac_overhead`` (operand collection, mma issue and
  datapath control per MAC; fitted on an A100 at 7 nm and an H200 at 5 nm, each at its power limit: 2.41 pJ
  per BF16 MAC at both), a systolic array's ``systolic_mac_overhead``, the GPU's over a TPU's perf/W against
  a GPU of the same node (TPU v4 against A100, Jouppi et al. ISCA 2023: 2.245); CPUs pay their instruction
  overhead per SIMD instruction instead (``instruction_pj``).
* SRAM (systolic buffers, GPU shared memory and L2, CPU caches): bytes read and written x the node's
  energy per byte for the bank size (CACTI-derived table, log-linear in bank size).
* Registers: systolic arrays move operands between neighbouring PEs every MAC: both inputs in OS,
  the moving input and a 32-bit partial sum in WS/IS; CPUs read and write three SIMD registers per
  FMA; GPU mma fragments come from the register file (counted as a 16 KB SRAM bank).
* CPU instruction overhead: fetch/decode/issue energy per SIMD instruction.
* Vector unit: one FP32 operation = half an FP32 MAC (with the class overhead: SIMT lanes issue as the
  tensor cores do), plus its operands through SRAM.

Peak dynamic power is the same accounting with every MAC unit busy every cycle (the array also
reads its R + C edge words and writes its C output words each cycle).
"""
from __future__ import annotations

from .chiplet import Chiplet, CpuChiplet, GpuChiplet, ReconfigurableChiplet, SystolicChiplet
from .technology import Node, precision_bytes

ACC_BYTES = 4.0           # 32-bit accumulators
RF_BANK_KB = 16.0         # register-file bank, for its access energy
L2_BANK_KB = 1024.0       # GPU L2 slice / CPU LLC bank
PJ = 1e-12


def flop_pj(nd: Node) -> float:
    """One FP32 vector operation."""
    return nd.mac_energy_pj["fp32"] / 2.0


def mac_overhead(ch: Chiplet) -> float:
    """The chiplet's engine class's energy per operation over the arithmetic (module docstring): a GPU's
    ``gpu_mac_overhead``, a systolic (or reconfigurable) array's ``systolic_mac_overhead``, 1 for a CPU."""
    nd = ch.tech()
    if isinstance(ch, GpuChiplet):
        return nd.gpu_mac_overhead
    if isinstance(ch, SystolicChiplet):
        return nd.systolic_mac_overhead
    return 1.0


def mac_pj(ch: Chiplet, precision: str) -> float:
    """One MAC of the chiplet's matrix engine (module docstring)."""
    return ch.tech().mac_energy_pj[precision] * mac_overhead(ch)


def register_bytes_per_mac(dataflow: str, precision: str) -> float:
    """Bytes moved between neighbouring PEs per MAC of a systolic array."""
    b = precision_bytes(precision)
    return 2.0 * b if dataflow == "os" else b + ACC_BYTES


def gpu_rf_bytes_per_mac(precision: str) -> float:
    """mma.m16n8k16 fragments: A 256 + B 128 elements, C 128 accumulators read and written, per 2,048 MACs."""
    return ((256.0 + 128.0) * precision_bytes(precision) + 2.0 * 128.0 * ACC_BYTES) / 2048.0


def gpu_smem_bytes_per_mac(precision: str) -> float:
    """64 x 64 warp tiles: 2 x 64 elements from shared memory per 64 x 64 MACs."""
    return 2.0 * precision_bytes(precision) / 64.0


def systolic_energy_j(ch: SystolicChiplet, macs, sram_bytes, precision: str):
    nd = ch.tech()
    return PJ * (macs * (mac_pj(ch, precision) + register_bytes_per_mac(ch.dataflow, precision)
                         * nd.register_pj_per_byte)
                 + sram_bytes * nd.sram_pj(ch.sram_bank_kb))


def gpu_energy_j(ch: GpuChiplet, macs, rf_bytes, smem_bytes, l2_bytes, precision: str):
    nd = ch.tech()
    return PJ * (macs * mac_pj(ch, precision) + rf_bytes * nd.sram_pj(RF_BANK_KB)
                 + smem_bytes * nd.sram_pj(ch.smem_bytes_per_sm / 1024.0) + l2_bytes * nd.sram_pj(L2_BANK_KB))


def cpu_energy_j(ch: CpuChiplet, macs, cache_bytes, precision: str):
    nd = ch.tech()
    instructions = macs / ch.simd_lanes(precision)
    return PJ * (macs * (nd.mac_energy_pj[precision] + 3.0 * precision_bytes(precision) * nd.register_pj_per_byte)
                 + instructions * ch.instruction_pj + cache_bytes * nd.sram_pj(L2_BANK_KB))


def vector_energy_j(ch: Chiplet, flops, sram_bytes, bank_kb: float = 256.0):
    nd = ch.tech()
    return PJ * (flops * flop_pj(nd) * mac_overhead(ch) + sram_bytes * nd.sram_pj(bank_kb))


def peak_dynamic_power_w(ch: Chiplet, precision: str = "bf16") -> float:
    """Dynamic power with every MAC unit and vector lane busy (see module docstring)."""
    nd = ch.tech()
    vector = ch.lanes * ch.freq_hz * flop_pj(nd) * mac_overhead(ch) * PJ
    if isinstance(ch, ReconfigurableChiplet):
        return max(peak_dynamic_power_w(ch.mode_chiplet(i), precision) for i in range(2))
    if isinstance(ch, SystolicChiplet):
        macs_per_s = ch.peak_flops(precision) / 2.0
        word = ch.pe_bits(precision) / 8.0
        edge_bytes_per_s = ch.arrays * (ch.rows + 2.0 * ch.cols) * word * ch.freq_hz
        return systolic_energy_j(ch, macs_per_s, edge_bytes_per_s, precision) + vector
    if isinstance(ch, GpuChiplet):
        macs_per_s = ch.peak_flops(precision) / 2.0
        return gpu_energy_j(ch, macs_per_s, macs_per_s * gpu_rf_bytes_per_mac(precision),
                            macs_per_s * gpu_smem_bytes_per_mac(precision), 0.0, precision) + vector
    if isinstance(ch, CpuChiplet):                  # its vector unit is the same SIMD pipes
        return cpu_energy_j(ch, ch.peak_flops(precision) / 2.0, 0.0, precision)
    raise TypeError(f"no energy model for {type(ch).__name__}")
