"""Study schema: the chiplet library of the ``hardware`` section (presets or kinds with their fields, and
the ``options`` the search may choose among)."""
from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any, Literal

from pydantic import (
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

import arch

from . import limits
from .common import StrictModel, Tuple, check_finite


class ModeSpec(StrictModel):
    """One configuration of a reconfigurable chiplet."""

    #: the PE array of this configuration, [rows, cols]
    array: Tuple(tuple[PositiveInt, PositiveInt])
    #: os, ws or is
    dataflow: Literal["os", "ws", "is"]
    #: identical arrays in this configuration
    arrays: PositiveInt = 1


def _option_label(value: Any) -> str:
    return "x".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)


class ChipletSpec(StrictModel):
    """One chiplet kind of the library: ``{preset: h100-like}`` (optionally changing some fields) or a
    ``kind`` with its fields. Which fields each kind takes, their units and defaults: docs/arch.md.
    Only the keys written in the study reach arch (the defaults below are placeholders)."""

    #: the kind's name in the library, as designs and reports name it
    name: str = Field(default="", pattern=r"^[A-Za-z0-9_.-]*$")
    #: systolic, gpu, cpu or reconfigurable (arch.KINDS)
    kind: Literal["systolic", "gpu", "cpu", "reconfigurable"] = "systolic"
    #: systolic: the PE array, [rows, cols]
    array: Tuple(tuple[PositiveInt, PositiveInt]) = (1, 1)
    #: systolic: os (output stationary), ws (weight stationary) or is (input stationary)
    dataflow: Literal["os", "ws", "is"] = "ws"
    #: systolic: on-chip SRAM in MiB, split over ifmap, filter and ofmap buffers
    sram_mb: PositiveFloat = 1.0
    #: clock, GHz (100 GHz caps typos: CMOS logic runs below 10 GHz)
    freq_ghz: float = Field(default=1.0, gt=0, le=100)     # GHz; 100 GHz caps typos (CMOS logic runs < 10 GHz)
    #: technology node (5nm, 7nm, ...; arch/data/technology.yaml)
    node: str = "7nm"
    #: a chiplet preset (arch/data/chiplets.yaml); fields given beside it change the preset
    preset: str = ""
    #: systolic: identical arrays sharing a GEMM's N, or a grid [rows, cols] of them whose rows also split K
    #: (ws, is; M under os), each array holding a block of the weights (a wafer's core mesh; arch.grid)
    arrays: PositiveInt | Tuple(tuple[PositiveInt, PositiveInt]) = 1
    #: systolic: PE words per cycle each way between neighbouring arrays of the grid (0: every array fed from the
    #: shared SRAM); inputs pass along a grid row, partial sums down a column, one hop a cycle (arch.grid)
    array_link_words: NonNegativeFloat = 0.0
    #: systolic: ifmap, filter and ofmap shares of the SRAM (sum 1)
    sram_split: Tuple(tuple[PositiveFloat, PositiveFloat, PositiveFloat]) = (3 / 7, 3 / 7, 1 / 7)
    #: systolic: SRAM bank size in KiB (sets the energy per SRAM access)
    sram_bank_kb: PositiveFloat = 256.0
    #: systolic: the PE datapath's type (default: the workload's precision)
    pe_precision: Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"] = "bf16"
    #: systolic: MACs per PE per cycle by precision where the datasheet's rate is not the bit-width ratio
    #: (groq-lpu-like: {int8: 4}, 750 INT8 TOPS against 188 FP16 TFLOP/s)
    macs_per_pe: dict[str, float] = Field(default_factory=dict)
    #: systolic: double (the next tile loads behind the current compute) or single
    weight_buffering: Literal["double", "single"] = "double"
    #: systolic: SRAM bandwidth in TB/s; > 0 makes the SRAM a memory tier holding the units' weights and KV cache
    #: where no HBM stack is attached (SRAM-resident: Groq, IPU, SN40L, WSE), spilling to DDR (docs/arch.md)
    sram_tbps: NonNegativeFloat = 0.0
    #: systolic: > 0 makes a wafer-scale die of this many cores (spares included): exempt from the reticle,
    #: yielded by its spare cores (arch.wafer); it must be the package's only chiplet
    wafer_cores: NonNegativeInt = 0
    #: systolic, wafer-scale: the redundant cores a defect may take (fewer than wafer_cores)
    spare_cores: NonNegativeInt = 0
    #: systolic: false for a die with no HBM interface (Groq LPU, IPU, WSE): the search attaches no HBM stack to it
    hbm_phy: bool = True
    #: elementwise lanes of the vector unit (0: the kind's default)
    vector_lanes: NonNegativeInt = 0
    #: die-to-die PHYs on the die (area)
    d2d_phys: NonNegativeInt = 4
    #: memory PHYs inside the die area (0: one added per attached HBM stack)
    memory_phys: NonNegativeInt = 0
    #: area of one memory PHY, mm²
    memory_phy_mm2: NonNegativeFloat = 11.0
    #: gpu: streaming multiprocessors in use
    sms: PositiveInt = 1
    #: gpu: SMs on the die, for area (0: sms)
    die_sms: NonNegativeInt = 0
    #: gpu: dense tensor-core FLOPs per SM per clock, per precision
    tensor_flops_per_sm_cycle: dict[str, PositiveFloat] = Field(default_factory=dict)
    #: gpu: L2 cache in MiB
    l2_mb: PositiveFloat = 1.0
    #: gpu: shared memory per SM in KiB
    smem_kb_per_sm: PositiveFloat = 228.0
    #: gpu: FP32 lanes per SM (the vector unit)
    fp32_lanes_per_sm: PositiveInt = 128
    #: gpu, cpu: fraction of peak a large, wave-aligned GEMM sustains
    max_efficiency: float = Field(default=0.8, gt=0, le=1)
    #: gpu: max_efficiency per precision where it differs
    precision_efficiency: dict[str, float] = Field(default_factory=dict)
    #: gpu: each thread block's prologue and epilogue, µs
    tile_overhead_us: float = Field(default=0.0, ge=0, lt=1000)
    #: gpu: exponentials an SM computes per clock (attention's softmax)
    sfu_per_sm: PositiveInt = 16
    #: gpu: a fused attention kernel's fixed time, µs
    attention_overhead_us: float = Field(default=0.0, ge=0, lt=1000)
    #: gpu: when fused decode attention splits its keys over blocks: fill (flash-decoding) or gqa
    split_kv: Literal["fill", "gqa"] = "fill"
    #: fraction of the attached memory's sustained bandwidth the kernels draw
    mem_efficiency: float = Field(default=1.0, gt=0, le=1)
    #: time each kernel adds that overlaps nothing (launch, fill, tail), µs
    kernel_overhead_us: float = Field(default=0.0, ge=0, lt=10000)
    #: the host's time to issue one kernel, µs (0: CUDA graphs)
    dispatch_us: float = Field(default=0.0, ge=0, lt=10000)
    #: ahead: the host issues while the device runs; per_kernel: dispatch_us is a floor on each kernel
    dispatch_mode: Literal["ahead", "per_kernel"] = "ahead"
    #: the serving framework's host work per sequence per step, µs
    sequence_us: float = Field(default=0.0, ge=0, lt=10000)
    #: board power limit, W (0: none): a kernel over it runs at a lower clock
    power_limit_w: NonNegativeFloat = 0.0
    #: lowest voltage under the power limit, as a fraction of the nominal
    voltage_floor: float = Field(default=0.7, gt=0, le=1)
    #: power drawn while waiting, W (0: leakage only)
    idle_w: NonNegativeFloat = 0.0
    #: gpu: die area of I/O and other blocks, mm²
    io_area_mm2: NonNegativeFloat = 0.0
    #: gpu: area of one SM, mm² (0: the node's)
    sm_area_mm2: NonNegativeFloat = 0.0
    #: cpu: cores
    cores: PositiveInt = 1
    #: cpu: SIMD width in bits
    simd_bits: PositiveInt = 512
    #: cpu: FMA pipes per core
    fma_units: PositiveInt = 2
    #: cpu: last-level cache in MiB
    llc_mb: PositiveFloat = 1.0
    #: cpu: area of one core, mm² (0: the node's)
    core_area_mm2: NonNegativeFloat = 0.0
    #: cpu: energy per instruction beyond the arithmetic, pJ
    instruction_pj: NonNegativeFloat = 500.0
    #: reconfigurable: the configurations (array, dataflow) it switches between
    modes: list[ModeSpec] = Field(default_factory=list)
    #: reconfigurable: time to switch configuration, µs
    reconfig_us: NonNegativeFloat = 1.0
    #: reconfigurable: energy to switch configuration, µJ
    reconfig_uj: NonNegativeFloat = 1.0
    #: reconfigurable: extra area for reconfigurability, a fraction
    reconfig_area_fraction: NonNegativeFloat = 0.1
    #: technology-node figures changed for this chiplet
    overrides: dict[str, Any] = Field(default_factory=dict)
    options: dict[str, list[Any]] = Field(default_factory=dict, description=(
        "fields the search may choose, each with its candidate values: one library variant per combination"))

    _chiplet: Any = PrivateAttr(default=None)
    _variants: list = PrivateAttr(default_factory=list)

    @field_validator("node")
    @classmethod
    def _known_node(cls, value: str) -> str:
        if value not in arch.nodes():
            raise ValueError(f"unknown technology node {value!r}; allowed: {', '.join(arch.nodes())}")
        return value

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, value: str) -> str:
        if value and value not in arch.preset_names():
            raise ValueError(f"unknown chiplet preset {value!r}; available: {', '.join(arch.preset_names())}")
        return value

    @field_validator("overrides")
    @classmethod
    def _finite_overrides(cls, value: dict) -> dict:
        return check_finite(value, "overrides")

    @model_validator(mode="after")
    def _build(self):
        given = self.model_fields_set
        combinations = 1
        for key, values in self.options.items():
            if key not in type(self).model_fields or key in ("name", "kind", "preset", "options", "overrides"):
                raise ValueError(f"options: {key!r} cannot be left open; any other field of the chiplet can")
            if not values:
                raise ValueError(f"options.{key} needs at least one value")
            combinations *= len(values)
        if combinations > limits.LIBRARY.limit:
            raise ValueError(f"options make {combinations:,} chiplet variants; "
                             + limits.LIBRARY.message("the library holds"))
        if not self.preset and not self.name:
            raise ValueError("every chiplet needs a 'name' (or a 'preset', whose name it then takes)")
        spec = {k: getattr(self, k) for k in given if k not in ("preset", "options")}
        if "modes" in spec:
            spec["modes"] = [m.model_dump() for m in self.modes]
        if self.preset:
            spec = {"preset": self.preset, "name": self.name or self.preset, **{k: v for k, v in spec.items() if k != "name"}}
            if "kind" not in given:
                spec.pop("kind", None)
        try:
            self._chiplet = arch.build_chiplet(spec)
        except arch.ArchError as exc:
            raise ValueError(str(exc)) from None
        if self.options:
            self._variants = self._build_variants()
        return self

    @model_serializer(mode="wrap")
    def _only_given(self, handler):
        """Dump only the keys the study gave: the others are placeholders (a kind's real defaults live in
        arch), and a resolved study must load again."""
        data = handler(self)
        return {k: v for k, v in data.items() if k in self.model_fields_set}

    @property
    def chiplet_name(self) -> str:
        return self._chiplet.name

    def variants(self) -> list[arch.Chiplet]:
        """The chiplets this entry stands for: itself, or one per combination of its ``options`` values,
        named ``name[field=value,...]`` (built and checked when the study loads)."""
        return self._variants or [self._chiplet]

    def _build_variants(self) -> list[arch.Chiplet]:
        given = {k: v for k, v in self.model_dump().items() if k != "options"}
        fields = list(self.options)
        out = []
        for combo in itertools.product(*(self.options[f] for f in fields)):
            values = dict(zip(fields, combo))
            try:
                chiplet = ChipletSpec.model_validate({**given, **values})._chiplet
            except ValidationError as exc:
                err = exc.errors()[0]
                raise ValueError(f"options: {', '.join(f'{k}={v!r}' for k, v in values.items())}: "
                                 f"{re.sub(r'^Value error, ', '', err['msg'])}") from None
            label = ",".join(f"{f}={_option_label(v)}" for f, v in values.items())
            out.append(dataclasses.replace(chiplet, name=f"{self.chiplet_name}[{label}]"))
        return out

    def to_chiplet(self) -> arch.Chiplet:
        return self._chiplet
