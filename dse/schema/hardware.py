"""Study schema: the ``hardware`` section (chiplet library, memory, package network)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import (Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt, PrivateAttr,
                      field_validator, model_validator)

import arch
import memory
import noc

from .common import IntRange, StrictModel, check_range


class ModeSpec(StrictModel):
    """One configuration of a reconfigurable chiplet."""

    array: tuple[PositiveInt, PositiveInt]
    dataflow: Literal["os", "ws", "is"]
    arrays: PositiveInt = 1


class ChipletSpec(StrictModel):
    """One chiplet kind of the library: ``{preset: h100-like}`` (optionally changing some fields) or a
    ``kind`` with its fields. Which fields each kind takes, their units and defaults: docs/arch.md.
    Only the keys written in the study reach arch (the defaults below are placeholders)."""

    name: str = Field(default="", pattern=r"^[A-Za-z0-9_.-]*$")
    kind: Literal["systolic", "gpu", "cpu", "reconfigurable"] = "systolic"
    array: tuple[PositiveInt, PositiveInt] = (1, 1)
    dataflow: Literal["os", "ws", "is"] = "ws"
    sram_mb: PositiveFloat = 1.0
    freq_ghz: PositiveFloat = 1.0
    node: str = "7nm"
    preset: str = ""
    arrays: PositiveInt = 1
    sram_split: tuple[PositiveFloat, PositiveFloat, PositiveFloat] = (3 / 7, 3 / 7, 1 / 7)
    sram_bank_kb: PositiveFloat = 256.0
    pe_precision: Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"] = "bf16"
    vector_lanes: NonNegativeInt = 0
    d2d_phys: NonNegativeInt = 4
    memory_phys: NonNegativeInt = 0
    memory_phy_mm2: NonNegativeFloat = 11.0
    sms: PositiveInt = 1
    die_sms: NonNegativeInt = 0
    tensor_flops_per_sm_cycle: dict[str, PositiveFloat] = Field(default_factory=dict)
    l2_mb: PositiveFloat = 1.0
    smem_kb_per_sm: PositiveFloat = 228.0
    fp32_lanes_per_sm: PositiveInt = 128
    max_efficiency: float = Field(default=0.8, gt=0, le=1)
    io_area_mm2: NonNegativeFloat = 0.0
    sm_area_mm2: NonNegativeFloat = 0.0
    cores: PositiveInt = 1
    simd_bits: PositiveInt = 512
    fma_units: PositiveInt = 2
    llc_mb: PositiveFloat = 1.0
    core_area_mm2: NonNegativeFloat = 0.0
    instruction_pj: NonNegativeFloat = 500.0
    modes: list[ModeSpec] = Field(default_factory=list)
    reconfig_us: NonNegativeFloat = 1.0
    reconfig_uj: NonNegativeFloat = 1.0
    reconfig_area_fraction: NonNegativeFloat = 0.1
    overrides: dict[str, Any] = Field(default_factory=dict)

    _chiplet: Any = PrivateAttr(default=None)

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

    @model_validator(mode="after")
    def _build(self):
        given = self.model_fields_set
        if not self.preset and not self.name:
            raise ValueError("every chiplet needs a 'name' (or a 'preset', whose name it then takes)")
        spec = {k: getattr(self, k) for k in given if k != "preset"}
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
        return self

    @property
    def chiplet_name(self) -> str:
        return self._chiplet.name

    def to_chiplet(self) -> arch.Chiplet:
        return self._chiplet


class MemoryEntry(StrictModel):
    kind: str
    stacks: IntRange | None = None
    channels: IntRange | None = None

    @model_validator(mode="after")
    def _counts(self):
        if self.kind not in memory.memory_kinds():
            raise ValueError(f"unknown memory kind {self.kind!r}; allowed: {', '.join(memory.memory_kinds())}")
        hbm = memory.memory_preset(self.kind).is_hbm
        want, other = ("stacks", "channels") if hbm else ("channels", "stacks")
        if getattr(self, other) is not None:
            raise ValueError(f"{self.kind} is counted in {want}, not {other}")
        if getattr(self, want) is None:
            raise ValueError(f"{self.kind} needs '{want}: [low, high]'")
        check_range(getattr(self, want), 0)
        return self

    @property
    def count_range(self) -> tuple[int, int]:
        return self.stacks if self.stacks is not None else self.channels


class MeshSpec(StrictModel):
    rows: IntRange
    cols: IntRange

    @field_validator("rows", "cols")
    @classmethod
    def _positive(cls, value):
        return check_range(value, 1)


class PackageSpec(StrictModel):
    mesh: MeshSpec
    link: str = "ucie-advanced"

    @field_validator("link")
    @classmethod
    def _known_link(cls, value: str) -> str:
        if value not in noc.link_kinds():
            raise ValueError(f"unknown link technology {value!r}; allowed: {', '.join(noc.link_kinds())}")
        return value


class HardwareSpec(StrictModel):
    chiplets: list[ChipletSpec] = Field(min_length=1)
    memory: list[MemoryEntry] = Field(min_length=1)
    package: PackageSpec

    @model_validator(mode="after")
    def _unique(self):
        names = [c.chiplet_name for c in self.chiplets]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"chiplet names must be unique; repeated: {', '.join(sorted(dup))}")
        hbm = [m.kind for m in self.memory if memory.memory_preset(m.kind).is_hbm]
        ddr = [m.kind for m in self.memory if not memory.memory_preset(m.kind).is_hbm]
        if len(hbm) > 1 or len(ddr) > 1:
            raise ValueError("at most one HBM kind and one DDR/LPDDR kind per study")
        return self
