"""Compute-chiplet descriptions: one dataclass per kind, each with an elementwise (vector) unit.

=================  =========================================================================
kind               what it is (cost model)
=================  =========================================================================
systolic           R x C MAC array(s), OS/WS/IS dataflow, SRAM split into ifmap/filter/ofmap
                   buffers (arch.systolic, after SCALE-Sim)
gpu                SMs with tensor cores (FLOPs per SM per cycle by precision), L2, shared
                   memory; achieved throughput from tile and wave quantization (arch.gpu)
cpu                cores x SIMD FMA units; register-blocked GEMM micro-kernels (arch.cpu)
reconfigurable     one PE array that switches between two systolic modes, paying a
                   reconfiguration time and energy to leave its resting mode (arch.costing)
=================  =========================================================================

A systolic chiplet with ``sram_Bps`` > 0 is SRAM-resident (Groq's LPU, Graphcore's IPU, SambaNova's
SN40L, Cerebras's WSE): its on-die SRAM is a memory tier that holds units' weights and KV cache, read at
``sram_Bps``; what does not fit spills to the next tier (its HBM stacks, else the package's DDR), at that
tier's bandwidth (dse.model.hbm_placement). One with ``wafer_cores`` > 0 is wafer-scale: one die far above
the reticle, stitched across exposure fields, yielded by redundant cores (arch.wafer).

Every kind has a vector unit of ``lanes`` FP32 lanes for softmax, norms and activations (default:
the array's columns, the GPU's CUDA cores, the CPU's SIMD lanes). SI units throughout.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from .errors import ArchError
from .technology import Node, check_overrides, precision_bits, precisions
from .technology import node as tech_node

DATAFLOWS = ("os", "ws", "is")
BUFFERING = ("double", "single")
SPLIT_KV = ("fill", "gqa")                    # when a fused decode attention splits its keys (GpuChiplet)
DISPATCH_MODES = ("ahead", "per_kernel")    # how the host's issue time counts (Chiplet docstring)
KINDS = ("systolic", "gpu", "cpu", "reconfigurable")

#: ifmap / filter / ofmap shares of a systolic chiplet's SRAM: SCALE-Sim's TPU-like google.cfg
#: (6 MB / 6 MB / 2 MB)
DEFAULT_SRAM_SPLIT = (3 / 7, 3 / 7, 1 / 7)


def _need(cond: bool, name: str, message: str) -> None:
    if not cond:
        raise ArchError(f"chiplet {name!r}: {message}")


@dataclass(frozen=True, kw_only=True)
class Chiplet:
    """Fields every kind has. ``memory_phys`` counts memory PHYs inside the die area (0 by default:
    a study's evaluator adds one PHY per HBM stack it attaches).

    How the chiplet's operators run (calibrated per chiplet by `arch.calibrate`; the defaults are an
    ideal machine): ``mem_efficiency`` is the fraction of the attached memory's sustained bandwidth its
    kernels draw (A100 GEMV: 1.56 of 2.04 TB/s, Vidur's profiling); ``kernel_overhead_s`` the time each
    operator (one kernel) adds that overlaps nothing: launch, pipeline fill and drain, the tail of the
    last wave; ``dispatch_s`` the host's time to issue one operator (an eager framework issues kernels at
    about one per 25-40 us). ``dispatch_mode`` says how that time counts: ``ahead`` (the default), the host
    issues kernels while the device runs earlier ones, so a step takes at least its host's issue time of
    all its kernels (CUDA streams; see dse.model.perf_model); ``per_kernel``, each kernel takes at least
    ``dispatch_s``, as when operators are timed one at a time (LLMCompass's harness). ``sequence_s``: the
    serving framework's host work per sequence per step that the device waits for (scheduling, sampling,
    output processing between steps; vLLM's profile of its own CPU overhead, vLLM v0.6.0 release blog).

    Power (arch.power): ``power_limit_w`` is the board power the chip may draw (the datasheet TDP; 0: no
    limit): a kernel that would draw more runs at a lower clock, its voltage following the clock down to
    ``voltage_floor`` of its value at ``freq_hz``. ``idle_w`` is what the provisioned chip draws while it
    waits (0: its leakage only)."""

    kind: ClassVar[str] = "base"
    name: str
    node: str
    freq_hz: float
    vector_lanes: int = 0
    d2d_phys: int = 4
    memory_phys: int = 0
    memory_phy_mm2: float = 11.0      # HBM3 PHY, same figure as memory/data/memory.yaml (L)
    overrides: dict = field(default_factory=dict)
    mem_efficiency: float = 1.0
    kernel_overhead_s: float = 0.0
    dispatch_s: float = 0.0
    dispatch_mode: str = "ahead"
    sequence_s: float = 0.0
    power_limit_w: float = 0.0
    voltage_floor: float = 0.7
    idle_w: float = 0.0

    def __post_init__(self):
        _need(self.power_limit_w >= 0 and self.idle_w >= 0, self.name, "power_limit_w and idle_w must be >= 0")
        _need(0 < self.voltage_floor <= 1, self.name, f"voltage_floor must be in (0, 1], got {self.voltage_floor}")
        _need(self.freq_hz > 0, self.name, f"clock must be positive, got {self.freq_hz}")
        _need(0 < self.mem_efficiency <= 1, self.name, f"mem_efficiency must be in (0, 1], got {self.mem_efficiency}")
        _need(0 <= self.kernel_overhead_s < 1e-2 and 0 <= self.dispatch_s < 1e-2, self.name,
              "kernel_overhead_us and dispatch_us must be in [0, 10000)")
        _need(0 <= self.sequence_s < 1e-2, self.name, "sequence_us must be in [0, 10000)")
        _need(self.dispatch_mode in DISPATCH_MODES, self.name,
              f"dispatch_mode must be one of {', '.join(DISPATCH_MODES)}, got {self.dispatch_mode!r}")
        _need(self.vector_lanes >= 0 and self.d2d_phys >= 0 and self.memory_phys >= 0, self.name,
              "vector_lanes, d2d_phys and memory_phys must be >= 0")
        tech_node(self.node)                               # validates the node name
        try:
            object.__setattr__(self, "overrides", check_overrides(self.overrides))
        except ArchError as exc:
            raise ArchError(f"chiplet {self.name!r}: {exc}") from None

    def tech(self) -> Node:
        """The chiplet's technology node with its overrides applied."""
        return tech_node(self.node, self.overrides)

    @property
    def lanes(self) -> int:
        return self.vector_lanes or self.default_lanes()

    def default_lanes(self) -> int:
        raise NotImplementedError

    def peak_flops(self, precision: str = "bf16") -> float:
        """Peak matrix FLOP/s (2 per MAC) at an operand precision."""
        raise NotImplementedError

    def vector_flops(self) -> float:
        """Elementwise operations per second of the vector unit."""
        return float(self.lanes) * self.freq_hz

    @property
    def takes_hbm(self) -> bool:
        """Whether HBM stacks can attach to the die (a kind without an HBM interface says False)."""
        return True


@dataclass(frozen=True, kw_only=True)
class SystolicChiplet(Chiplet):
    """``arrays`` identical R x C arrays share the work of a GEMM by splitting N (the ifmap is broadcast).
    With ``grid_rows`` > 1 they form a grid of ``grid_rows`` x ``arrays / grid_rows`` arrays (a core mesh, as a
    wafer's): the grid's columns split N, its rows split the dataflow's row dimension (K under ws and is, whose
    partial sums are then summed down the grid's columns; M under os), so every array holds a block of the
    stationary operand. ``array_link_words`` > 0 joins neighbouring arrays by links of that many PE words per
    cycle each way: inputs pass array to array along a grid row and partial sums down a column, one hop a
    cycle, and no link may carry more than that rate (arch.costing); 0 feeds every array from the shared SRAM.

    ``pe_precision`` is the PE datapath (default: the workload's precision). Narrower operands pack
    ``bits(pe) / bits(operand)`` MACs into one PE per cycle; wider ones are an error.
    """

    kind: ClassVar[str] = "systolic"
    rows: int
    cols: int
    dataflow: str = "ws"
    sram_bytes: float
    arrays: int = 1
    sram_split: tuple[float, float, float] = DEFAULT_SRAM_SPLIT
    sram_bank_kb: float = 256.0
    pe_precision: str | None = None
    weight_buffering: str = "double"   # double: the next stationary tile loads behind the current one's
                                       # compute (TPU v1 onwards); single: SCALE-Sim's fold after fold
    sram_Bps: float = 0.0              # > 0: SRAM-resident, the SRAM a memory tier at this bandwidth (module doc)
    wafer_cores: int = 0               # > 0: wafer-scale, this many cores on the wafer, spares included
    spare_cores: int = 0               # of them, the redundant ones a defect may take (arch.wafer)
    hbm_phy: bool = True               # False: the die has no HBM interface (Groq LPU, IPU, WSE): no stack attaches
    macs_per_pe: dict = field(default_factory=dict)   # {precision: MACs per PE per cycle} where the datasheet's
                                                      # rate is not the bit-width ratio (`pack`)
    grid_rows: int = 1                 # the arrays form a grid_rows x (arrays / grid_rows) grid (class doc)
    array_link_words: float = 0.0      # > 0: PE words per cycle each way between neighbouring arrays of the grid

    def __post_init__(self):
        super().__post_init__()
        _need(self.dataflow in DATAFLOWS, self.name,
              f"unknown dataflow {self.dataflow!r}; allowed: {', '.join(DATAFLOWS)}")
        _need(self.rows >= 1 and self.cols >= 1 and self.arrays >= 1, self.name,
              f"array must be at least 1 x 1 (and arrays >= 1), got {self.rows} x {self.cols} x {self.arrays}")
        _need(isinstance(self.grid_rows, int) and self.grid_rows >= 1 and self.arrays % self.grid_rows == 0,
              self.name, f"arrays: a grid [rows, cols] of arrays or a count, got {self.grid_rows} rows of {self.arrays}")
        _need(isinstance(self.array_link_words, (int, float)) and not isinstance(self.array_link_words, bool)
              and self.array_link_words >= 0, self.name,
              f"array_link_words must be >= 0 (0: arrays fed from the shared SRAM), got {self.array_link_words!r}")
        _need(self.sram_bytes > 0, self.name, "SRAM size must be positive")
        _need(len(self.sram_split) == 3 and all(s > 0 for s in self.sram_split)
              and abs(sum(self.sram_split) - 1.0) < 1e-6, self.name,
              f"sram_split must be three positive shares (ifmap, filter, ofmap) summing to 1, got {self.sram_split}")
        _need(self.sram_bank_kb > 0, self.name, "sram_bank_kb must be positive")
        _need(self.weight_buffering in BUFFERING, self.name,
              f"unknown weight_buffering {self.weight_buffering!r}; allowed: {', '.join(BUFFERING)}")
        if self.pe_precision is not None:
            _need(self.pe_precision in precisions(), self.name,
                  f"unknown pe_precision {self.pe_precision!r}; allowed: {', '.join(precisions())}")
        _need(self.sram_Bps >= 0, self.name, "sram_tbps must be >= 0 (0: the SRAM only buffers the array)")
        _need(self.wafer_cores >= 0 and 0 <= self.spare_cores < max(self.wafer_cores, 1), self.name,
              "wafer_cores must be >= 0 and spare_cores in [0, wafer_cores)")
        _need(isinstance(self.macs_per_pe, dict), self.name, "macs_per_pe must map precisions to MACs per PE per cycle")
        for p, v in self.macs_per_pe.items():
            _need(p in precisions() and isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 64,
                  self.name, f"macs_per_pe.{p}: a precision ({', '.join(precisions())}) and MACs per PE per "
                             f"cycle in (0, 64], got {v!r}")

    @property
    def takes_hbm(self) -> bool:
        return self.hbm_phy

    @property
    def sram_resident(self) -> bool:
        """Whether units' weights and KV cache live in the SRAM (``sram_Bps`` > 0)."""
        return self.sram_Bps > 0

    @property
    def wafer_scale(self) -> bool:
        return self.wafer_cores > 0

    @property
    def grid(self) -> tuple[int, int]:
        """(rows, cols) of the grid of arrays; (1, arrays) for arrays splitting N alone."""
        return self.grid_rows, self.arrays // self.grid_rows

    def default_lanes(self) -> int:
        return self.cols * self.arrays

    def pe_bits(self, precision: str) -> int:
        return precision_bits(self.pe_precision or precision)

    def pack(self, precision: str) -> float:
        """MACs per PE per cycle at an operand precision: ``macs_per_pe`` where the datasheet gives it (Groq's
        TSP: INT8 at 4x its FP16 rate, 750 against 188 TOPS, TechPowerUp Feb 2024: its four INT8 MXM planes
        combine for one FP16 MAC), else ``bits(pe) / bits(operand)`` packed operands."""
        pe, op = self.pe_bits(precision), precision_bits(precision)
        _need(op <= pe, self.name, f"{precision} operands are wider than its {self.pe_precision} PEs")
        if precision in self.macs_per_pe:
            return float(self.macs_per_pe[precision])
        return float(pe // op)

    def peak_flops(self, precision: str = "bf16") -> float:
        return 2.0 * self.rows * self.cols * self.arrays * self.pack(precision) * self.freq_hz

    def sram_words(self, precision: str) -> tuple[float, float, float]:
        """(ifmap, filter, ofmap) buffer sizes per array in PE-wide words."""
        word = self.pe_bits(precision) / 8.0
        return tuple(self.sram_bytes * s / self.arrays / word for s in self.sram_split)


@dataclass(frozen=True, kw_only=True)
class GpuChiplet(Chiplet):
    """SMs with tensor cores. ``tensor_flops_per_sm_cycle`` maps precision -> dense FLOPs per SM per
    clock; ``max_efficiency`` is the fraction of peak a large, wave-aligned GEMM sustains (clock and
    power throttling, instruction overhead); ``tile_overhead_s`` each thread block's prologue and epilogue
    (arch.gpu); ``sfu_per_sm`` the exponentials an SM computes a clock and ``attention_overhead_s`` a fused
    attention kernel's fixed time (arch.gpu.flash_attention). Area counts ``die_sms`` (default ``sms``):
    products often ship with SMs fused off. ``l2_bytes_per_cycle``: the L2's bandwidth per clock, at which
    an elementwise kernel moves its operands when they stay on chip (0: not modelled). ``split_kv``: when a
    fused decode attention splits its keys over thread blocks: ``fill`` whenever its blocks are too few to
    fill the SMs (flash-decoding), ``gqa`` only for grouped-query heads (FlashAttention-2's mha_fwd, as
    PyTorch's scaled_dot_product_attention runs it) (arch.gpu.flash_attention)."""

    kind: ClassVar[str] = "gpu"
    sms: int
    tensor_flops_per_sm_cycle: dict
    l2_bytes: float
    smem_bytes_per_sm: float = 228 * 1024
    fp32_lanes_per_sm: int = 128
    max_efficiency: float = 0.8
    precision_efficiency: dict = field(default_factory=dict)
    tile_overhead_s: float = 0.0
    sfu_per_sm: int = 16
    attention_overhead_s: float = 0.0
    die_sms: int = 0
    io_area_mm2: float = 0.0
    sm_area_mm2: float = 0.0           # 0: the node's gpu_sm_area_mm2
    d2d_phys: int = 0
    l2_bytes_per_cycle: float = 0.0
    split_kv: str = "fill"

    def __post_init__(self):
        super().__post_init__()
        _need(self.split_kv in SPLIT_KV, self.name, f"split_kv must be one of {', '.join(SPLIT_KV)}")
        _need(self.sms >= 1, self.name, f"sms must be >= 1, got {self.sms}")
        _need(isinstance(self.tensor_flops_per_sm_cycle, dict) and self.tensor_flops_per_sm_cycle, self.name,
              "tensor_flops_per_sm_cycle must map precisions to FLOPs per SM per cycle")
        for p, v in self.tensor_flops_per_sm_cycle.items():
            _need(p in precisions(), self.name, f"tensor_flops_per_sm_cycle: unknown precision {p!r}; "
                                                f"allowed: {', '.join(precisions())}")
            _need(v > 0, self.name, f"tensor_flops_per_sm_cycle.{p} must be positive")
        _need(0 < self.max_efficiency <= 1, self.name, "max_efficiency must be in (0, 1]")
        _need(0 <= self.tile_overhead_s < 1e-3 and 0 <= self.attention_overhead_s < 1e-3, self.name,
              "tile_overhead_us and attention_overhead_us must be in [0, 1000)")
        _need(self.sfu_per_sm >= 1, self.name, f"sfu_per_sm must be >= 1, got {self.sfu_per_sm}")
        for p, v in self.precision_efficiency.items():
            _need(p in precisions() and isinstance(v, (int, float)) and 0 < v <= 1, self.name,
                  f"precision_efficiency.{p}: a precision ({', '.join(precisions())}) and a fraction in (0, 1]")
        _need(self.l2_bytes > 0 and self.smem_bytes_per_sm > 0, self.name, "l2_bytes and smem_bytes_per_sm must be positive")
        _need(self.die_sms == 0 or self.die_sms >= self.sms, self.name, "die_sms must be >= sms")
        _need(self.io_area_mm2 >= 0 and self.sm_area_mm2 >= 0 and self.l2_bytes_per_cycle >= 0, self.name,
              "io_area_mm2, sm_area_mm2 and l2_bytes_per_cycle must be >= 0")

    def default_lanes(self) -> int:
        return self.sms * self.fp32_lanes_per_sm

    def efficiency(self, precision: str) -> float:
        """Fraction of peak a large, wave-aligned GEMM sustains at ``precision`` (``precision_efficiency``
        where given, else ``max_efficiency``): fp8 on H100 reaches 70.9 % against 80.3 % for bf16
        (maximum achievable matmul FLOPS, S. Bekman, ml-engineering)."""
        return float(self.precision_efficiency.get(precision, self.max_efficiency))

    def sm_flops_per_cycle(self, precision: str) -> float:
        table = self.tensor_flops_per_sm_cycle
        _need(precision in table, self.name,
              f"no tensor-core rate for {precision}; it supports {', '.join(table)}")
        return float(table[precision])

    def peak_flops(self, precision: str = "bf16") -> float:
        return self.sms * self.sm_flops_per_cycle(precision) * self.freq_hz


@dataclass(frozen=True, kw_only=True)
class CpuChiplet(Chiplet):
    """``cores`` x ``fma_units`` SIMD FMA pipes of ``simd_bits`` each; ``llc_bytes`` of shared cache."""

    kind: ClassVar[str] = "cpu"
    cores: int
    simd_bits: int = 512
    fma_units: int = 2
    llc_bytes: float
    max_efficiency: float = 0.9
    core_area_mm2: float = 0.0         # 0: the node's cpu_core_area_mm2
    instruction_pj: float = 500.0
    # core energy per SIMD FMA instruction beyond its MACs (fetch, decode, rename, scheduling, caches,
    # clocks): an AMD EPYC 9654 draws 360 W (TDP) for 96 cores x 3.55 GHz x 2 FMA instructions per
    # cycle, about 0.5 nJ per instruction (L; an upper bound that includes the uncore)

    def __post_init__(self):
        super().__post_init__()
        _need(self.cores >= 1 and self.fma_units >= 1, self.name, "cores and fma_units must be >= 1")
        _need(self.simd_bits in (128, 256, 512, 1024, 2048), self.name,
              f"simd_bits must be one of 128, 256, 512, 1024, 2048, got {self.simd_bits}")
        _need(self.llc_bytes > 0, self.name, "llc_bytes must be positive")
        _need(0 < self.max_efficiency <= 1, self.name, "max_efficiency must be in (0, 1]")
        _need(self.instruction_pj >= 0 and self.core_area_mm2 >= 0, self.name,
              "instruction_pj and core_area_mm2 must be >= 0")

    def default_lanes(self) -> int:
        return self.cores * self.fma_units * self.simd_bits // 32

    def simd_lanes(self, precision: str) -> int:
        return self.simd_bits // precision_bits(precision)

    def peak_flops(self, precision: str = "bf16") -> float:
        return 2.0 * self.cores * self.fma_units * self.simd_lanes(precision) * self.freq_hz


@dataclass(frozen=True, kw_only=True)
class SystolicMode:
    """One configuration of a reconfigurable array: ``arrays`` arrays of rows x cols."""

    rows: int
    cols: int
    dataflow: str
    arrays: int = 1


@dataclass(frozen=True, kw_only=True)
class ReconfigurableChiplet(SystolicChiplet):
    """A PE array that runs in ``modes[0]`` (resting) or ``modes[1]``.

    An operator runs in whichever mode finishes first once the switch is paid: leaving the resting
    mode and coming back costs ``2 x reconfig_s`` and ``2 x reconfig_j``. The rows/cols/arrays fields
    give the physical PEs (area); every mode must fit in them. ``reconfig_area_fraction`` adds the
    muxes and wiring of the switchable array to the PE area.
    """

    kind: ClassVar[str] = "reconfigurable"
    modes: tuple[SystolicMode, SystolicMode]
    reconfig_s: float = 1e-6
    reconfig_j: float = 1e-6
    reconfig_area_fraction: float = 0.1

    def __post_init__(self):
        super().__post_init__()
        _need(len(self.modes) == 2, self.name, f"needs exactly two modes, got {len(self.modes)}")
        pes = self.rows * self.cols * self.arrays
        for i, m in enumerate(self.modes):
            _need(m.dataflow in DATAFLOWS, self.name,
                  f"modes[{i}]: unknown dataflow {m.dataflow!r}; allowed: {', '.join(DATAFLOWS)}")
            _need(m.rows >= 1 and m.cols >= 1 and m.arrays >= 1, self.name, f"modes[{i}]: bad array shape")
            _need(m.rows * m.cols * m.arrays <= pes, self.name,
                  f"modes[{i}] uses {m.rows * m.cols * m.arrays} PEs, more than the {pes} it has")
        _need(self.reconfig_s >= 0 and self.reconfig_j >= 0 and self.reconfig_area_fraction >= 0, self.name,
              "reconfig_s, reconfig_j and reconfig_area_fraction must be >= 0")

    def mode_chiplet(self, i: int) -> SystolicChiplet:
        """Mode ``i`` as a plain systolic chiplet sharing this chiplet's SRAM and clock."""
        m = self.modes[i]
        return SystolicChiplet(name=f"{self.name}[{i}]", node=self.node, freq_hz=self.freq_hz, rows=m.rows,
                               cols=m.cols, arrays=m.arrays, dataflow=m.dataflow, sram_bytes=self.sram_bytes,
                               sram_split=self.sram_split, sram_bank_kb=self.sram_bank_kb,
                               pe_precision=self.pe_precision, overrides=self.overrides,
                               vector_lanes=self.lanes, d2d_phys=self.d2d_phys,
                               weight_buffering=self.weight_buffering, macs_per_pe=self.macs_per_pe)

    def peak_flops(self, precision: str = "bf16") -> float:
        return max(self.mode_chiplet(i).peak_flops(precision) for i in range(2))


CLASSES = {cls.kind: cls for cls in (SystolicChiplet, GpuChiplet, CpuChiplet, ReconfigurableChiplet)}
