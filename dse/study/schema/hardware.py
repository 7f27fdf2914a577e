"""Study schema: the ``hardware`` section: the chiplet library (dse.study.schema.chiplets), the memories
and the package network (dse.study.schema.package)."""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator, model_validator

import arch
import memory

from . import limits
from .chiplets import ChipletSpec
from .common import IntRange, StrictModel, check_range, invalid_at
from .package import PackageSpec


class MemoryEntry(StrictModel):
    """One memory of the study: its kind (or kinds the search may choose among, all HBM or all DDR), how
    many units the search may attach, and preset overrides."""

    kind: str | list[str]
    stacks: IntRange | None = None
    channels: IntRange | None = None
    overrides: dict[str, float] = Field(default_factory=dict)

    @property
    def kinds(self) -> list[str]:
        return list(self.kind) if isinstance(self.kind, list) else [self.kind]

    @field_validator("overrides")
    @classmethod
    def _known_overrides(cls, value: dict, info):
        kind = info.data.get("kind")
        for k in (kind if isinstance(kind, list) else [kind]):
            if k in memory.memory_kinds():
                try:
                    memory.memory_preset(k, value)
                except memory.MemorySpecError as exc:
                    raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _counts(self):
        if not self.kinds:
            raise ValueError("kind needs at least one memory kind")
        for kind in self.kinds:
            if kind not in memory.memory_kinds():
                raise ValueError(f"unknown memory kind {kind!r}; allowed: {', '.join(memory.memory_kinds())}")
        classes = {memory.memory_preset(k).is_hbm for k in self.kinds}
        if len(classes) > 1:
            raise ValueError(f"the kinds of one entry are all HBM or all DDR/LPDDR, got {', '.join(self.kinds)}")
        hbm = classes.pop()
        name = "/".join(self.kinds)
        want, other = ("stacks", "channels") if hbm else ("channels", "stacks")
        if getattr(self, other) is not None:
            raise ValueError(f"{name} is counted in {want}, not {other}")
        if getattr(self, want) is None:
            raise ValueError(f"{name} needs '{want}: [low, high]'")
        check_range(getattr(self, want), 0)
        cap = limits.HBM_STACKS if hbm else limits.DDR_CHANNELS
        if getattr(self, want)[1] > cap.limit:
            raise invalid_at((want,), cap.message(f"{name} {want}:"), list(getattr(self, want)))
        return self

    @property
    def is_hbm(self) -> bool:
        return memory.memory_preset(self.kinds[0]).is_hbm

    @property
    def count_range(self) -> tuple[int, int]:
        return self.stacks if self.stacks is not None else self.channels

    def spec(self) -> memory.MemorySpec:
        """The preset with this entry's overrides applied (SI units); the entry must name one kind."""
        if len(self.kinds) != 1:
            raise ValueError(f"memory entry {self.kind} names several kinds: choose one (Study.variants)")
        return memory.memory_preset(self.kinds[0], self.overrides)


def _library_size(value: Any) -> Any:
    """Refuse an oversized library before building any of its chiplets."""
    if isinstance(value, list) and len(value) > limits.LIBRARY.limit:
        raise ValueError(f"{len(value):,} chiplets listed; " + limits.LIBRARY.message("the library holds"))
    return value


class HardwareSpec(StrictModel):
    chiplets: Annotated[list[ChipletSpec], BeforeValidator(_library_size)] = Field(min_length=1)
    memory: list[MemoryEntry] = Field(min_length=1)
    package: PackageSpec

    def library(self) -> list[arch.Chiplet]:
        """Every chiplet kind the search may place: each entry, or each variant of its ``options``."""
        return [chiplet for spec in self.chiplets for chiplet in spec.variants()]

    @model_validator(mode="after")
    def _unique(self):
        names = [c.chiplet_name for c in self.chiplets]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"chiplet names must be unique; repeated: {', '.join(sorted(dup))}")
        kinds = sum(len(c.variants()) for c in self.chiplets)
        if kinds > limits.LIBRARY.limit:
            raise invalid_at(("chiplets",), f"the chiplets and their options make {kinds:,} kinds; "
                           + limits.LIBRARY.message("the library holds"), len(self.chiplets))
        hbm = [m.kind for m in self.memory if m.is_hbm]
        ddr = [m.kind for m in self.memory if not m.is_hbm]
        if len(hbm) > 1 or len(ddr) > 1:
            raise ValueError("at most one HBM kind and one DDR/LPDDR kind per study")
        return self
