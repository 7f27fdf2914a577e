"""Study schema: the ``hardware`` section: the chiplet library (dse.study.schema.chiplets), the memories
and the package network (dse.study.schema.package). ``hardware.memory`` entries of kind ``host`` or
``ssd`` are the tiers below the package (memory.offload: cold weights fetched into HBM on a miss); they
are read into ``hardware.tiers`` and written back into ``memory``."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationError, field_validator, model_serializer, model_validator

import arch
import memory
from memory.offload import PCIE_GTPS, offload_tiers
from memory.storage import ssd_names

from . import limits
from .chiplets import ChipletSpec
from .common import IntRange, StrictModel, check_range, invalid_at
from .package import PackageSpec


class MemoryEntry(StrictModel):
    """One memory of the study: its kind (or kinds the search may choose among, all HBM or all DDR), how
    many units the search may attach, and preset overrides."""

    #: a memory preset (dse memory lists them), or a list of presets of one class for the search to choose among
    kind: str | list[str]
    #: HBM stacks the search may attach: a number or [low, high]
    stacks: IntRange | None = None
    #: DDR or LPDDR channels the search may attach: a number or [low, high]
    channels: IntRange | None = None
    #: preset fields changed for this study (capacity_gib, ...)
    overrides: dict[str, float] = Field(default_factory=dict)
    #: DDR/LPDDR only: stream the bytes units hold here into the tier above ahead of use, double-buffered
    #: (weight streaming: SN40L's DDR to HBM / SRAM, Cerebras's MemoryX; dse.model.copy_cost); off by default
    stream_weights: bool = False

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
        if hbm and self.stream_weights:
            raise invalid_at(("stream_weights",), f"{name} is HBM, a tier weights are streamed into: stream_weights "
                             f"is a DDR/LPDDR entry's key", True)
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


TIER_KINDS = ("host", "ssd")
MAX_TIER_GIB = 1 << 24        # 16 PiB: above any node's host DRAM or drives
MAX_DRIVES = 64


class TierEntry(StrictModel):
    """A tier below the package's memories (a ``hardware.memory`` entry of kind host or ssd, memory.offload):
    host DRAM (``capacity_gib``) or ``drives`` NVMe drives of preset ``ssd`` (their capacity, or
    ``capacity_gib``), behind the host ``link``."""

    #: host (host DRAM) or ssd (NVMe drives)
    kind: Literal["host", "ssd"]
    #: capacity of the tier in GiB (ssd: default the drives' own)
    capacity_gib: float | None = None
    #: the host link the tier is reached over (PCIe generation and width)
    link: str = "pcie5-x16"
    #: the SSD preset (memory/data/storage.yaml)
    ssd: str = "pm1743"
    #: NVMe drives of the ssd tier
    drives: int = 1

    @model_validator(mode="after")
    def _check(self):
        if self.link not in PCIE_GTPS:
            raise ValueError(f"link: unknown host link {self.link!r}; allowed: {', '.join(PCIE_GTPS)}")
        if self.capacity_gib is not None and not 0 < self.capacity_gib <= MAX_TIER_GIB:
            raise ValueError(f"capacity_gib: must be in (0, {MAX_TIER_GIB:,}] GiB, got {self.capacity_gib}")
        if self.kind == "host":
            if self.capacity_gib is None:
                raise ValueError("a host tier needs 'capacity_gib' (host DRAM for weights)")
            extra = {"ssd", "drives"} & self.model_fields_set
            if extra:
                raise ValueError(f"a host tier has no {', '.join(sorted(extra))} (those are an ssd tier's)")
        else:
            if self.ssd not in ssd_names():
                raise ValueError(f"ssd: unknown drive {self.ssd!r}; allowed: {', '.join(ssd_names())}")
            if not 1 <= self.drives <= MAX_DRIVES:
                raise ValueError(f"drives: must be 1 to {MAX_DRIVES}, got {self.drives}")
        return self


def _check_tier(index: int, entry: dict) -> None:
    """A tier entry validated where it stands: errors at ``memory[index]``."""
    try:
        TierEntry.model_validate(entry)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ("memory", index, *err["loc"][:-1]) if err["type"] == "extra_forbidden" else \
            ("memory", index, *err["loc"])
        message = (f"unknown key {err['loc'][-1]!r}; allowed: {', '.join(TierEntry.model_fields)}"
                   if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, "))
        raise invalid_at(loc, message, entry) from None


def _library_size(value: Any) -> Any:
    """Refuse an oversized library before building any of its chiplets."""
    if isinstance(value, list) and len(value) > limits.LIBRARY.limit:
        raise ValueError(f"{len(value):,} chiplets listed; " + limits.LIBRARY.message("the library holds"))
    return value


class HardwareSpec(StrictModel):
    #: the chiplet library: every mesh slot holds one of these kinds
    chiplets: Annotated[list[ChipletSpec], BeforeValidator(_library_size)] = Field(min_length=1)
    #: the memories: HBM stacks spread over the chiplets, DDR/LPDDR channels shared, host and SSD tiers below
    memory: list[MemoryEntry] = Field(min_length=1)
    #: the package network: topology, mesh size, link technology, routing
    package: PackageSpec
    #: host DRAM and SSD tiers below the package, read from memory entries of kind host or ssd (not written by hand)
    tiers: list[TierEntry] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _split_tiers(cls, data: Any) -> Any:
        """Entries of ``memory`` of kind host or ssd go to ``tiers`` (module docstring)."""
        if isinstance(data, dict) and isinstance(data.get("memory"), list):
            below = [m for m in data["memory"] if isinstance(m, dict) and m.get("kind") in TIER_KINDS]
            for i, entry in enumerate(data["memory"]):       # errors name the entry where the user wrote it
                if any(entry is m for m in below):
                    _check_tier(i, entry)
            if below:
                data = {**data, "memory": [m for m in data["memory"] if not (isinstance(m, dict) and
                                                                            m.get("kind") in TIER_KINDS)],
                        "tiers": list(data.get("tiers") or []) + below}
        return data

    @model_serializer(mode="wrap")
    def _fold_tiers(self, handler):
        out = handler(self)
        tiers = [{k: v for k, v in t.items() if v is not None and not (t.get("kind") == "host" and k in
                                                                         ("ssd", "drives"))}
                 for t in out.pop("tiers", None) or []]
        if isinstance(out.get("memory"), list):
            out["memory"] = out["memory"] + tiers
        return out

    def offload(self):
        """The tiers as memory.offload.OffloadTiers (None without any)."""
        if not self.tiers:
            return None
        host = next((t for t in self.tiers if t.kind == "host"), None)
        ssd = next((t for t in self.tiers if t.kind == "ssd"), None)
        links = {t.link for t in self.tiers}
        return offload_tiers(link=links.pop(), host_gib=host.capacity_gib if host else 0.0,
                             ssd=ssd.ssd if ssd else None, drives=ssd.drives if ssd else 0,
                             ssd_gib=ssd.capacity_gib if ssd else None)

    def _wafer_alone(self) -> None:
        """A wafer-scale chiplet (``wafer_cores`` > 0, arch.wafer) is a whole wafer: it cannot sit beside other
        chiplets on one package, so a library with one needs a package of one slot (mesh 1 x 1); several
        wafers are a ``system`` of packages."""
        for i, spec in enumerate(self.chiplets):
            if any(isinstance(c, arch.SystolicChiplet) and c.wafer_scale for c in spec.variants()):
                mesh = self.package.mesh
                if (mesh.rows[1], mesh.cols[1]) != (1, 1):
                    raise invalid_at(("chiplets", i, "wafer_cores"),
                                     f"chiplet {spec.chiplet_name!r} is a wafer-scale die (a whole wafer): it cannot "
                                     f"be a chiplet among others; give package mesh rows 1 and cols 1 (several "
                                     f"wafers: a system section)", spec.chiplet_name)

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
        self._wafer_alone()
        hbm = [m.kind for m in self.memory if m.is_hbm]
        ddr = [m.kind for m in self.memory if not m.is_hbm]
        if len(hbm) > 1 or len(ddr) > 1:
            raise ValueError("at most one HBM kind and one DDR/LPDDR kind per study")
        tiers = [t.kind for t in self.tiers]
        if len(set(tiers)) < len(tiers):
            raise ValueError("at most one memory entry of kind host and one of kind ssd")
        if len({t.link for t in self.tiers}) > 1:
            raise ValueError("the host and ssd tiers go over one host link: give both the same 'link'")
        return self
