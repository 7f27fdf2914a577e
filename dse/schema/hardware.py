"""Study schema: the ``hardware`` section (chiplet library, memory, package network)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt, field_validator, model_validator

import arch
import memory
import noc

from .common import IntRange, StrictModel, check_range


class ChipletSpec(StrictModel):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    kind: Literal["systolic"] = "systolic"
    array: tuple[PositiveInt, PositiveInt]
    dataflow: Literal["os", "ws", "is"] = "ws"
    sram_mb: PositiveFloat
    freq_ghz: PositiveFloat
    node: str

    @field_validator("node")
    @classmethod
    def _known_node(cls, value: str) -> str:
        if value not in arch.nodes():
            raise ValueError(f"unknown technology node {value!r}; allowed: {', '.join(arch.nodes())}")
        return value

    def to_chiplet(self) -> arch.Chiplet:
        return arch.Chiplet(name=self.name, kind=self.kind, rows=self.array[0], cols=self.array[1],
                            dataflow=self.dataflow, sram_bytes=self.sram_mb * 2**20,
                            freq_hz=self.freq_ghz * 1e9, node=self.node)


class MemoryEntry(StrictModel):
    """One memory kind of the study: how many units the search may attach, and preset overrides."""

    kind: str
    stacks: IntRange | None = None
    channels: IntRange | None = None
    overrides: dict[str, float] = Field(default_factory=dict)

    @field_validator("overrides")
    @classmethod
    def _known_overrides(cls, value: dict, info):
        kind = info.data.get("kind")
        if kind in memory.memory_kinds():
            try:
                memory.memory_preset(kind, value)
            except memory.MemorySpecError as exc:
                raise ValueError(str(exc)) from None
        return value

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

    def spec(self) -> memory.MemorySpec:
        """The preset with this entry's overrides applied (SI units)."""
        return memory.memory_preset(self.kind, self.overrides)


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
        names = [c.name for c in self.chiplets]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"chiplet names must be unique; repeated: {', '.join(sorted(dup))}")
        hbm = [m.kind for m in self.memory if memory.memory_preset(m.kind).is_hbm]
        ddr = [m.kind for m in self.memory if not memory.memory_preset(m.kind).is_hbm]
        if len(hbm) > 1 or len(ddr) > 1:
            raise ValueError("at most one HBM kind and one DDR/LPDDR kind per study")
        return self
