"""Memory technology presets (HBM stacks, DDR channels), loaded from ``memory/data/memory.yaml``."""
from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache
from importlib import resources

import yaml

from .errors import MemorySpecError

GB = 1e9
GIB = 2**30


@dataclass(frozen=True)
class MemorySpec:
    """One memory unit (an HBM stack or a DDR channel). SI units."""

    kind: str
    unit: str
    peak_bandwidth_Bps: float
    capacity_bytes: float
    tRCD_s: float
    tCL_s: float
    tRP_s: float
    tRAS_s: float
    tBL_s: float
    energy_j_per_byte: float
    phy_area_mm2: float
    footprint_mm2: float
    cost_usd_per_byte: float

    @property
    def is_hbm(self) -> bool:
        return self.kind.startswith("hbm")


@lru_cache(maxsize=1)
def _table() -> dict:
    return yaml.safe_load((resources.files("memory") / "data" / "memory.yaml").read_text())


def memory_kinds() -> list[str]:
    return sorted(_table())


def memory_preset(kind: str, overrides: dict | None = None) -> MemorySpec:
    """The preset of ``kind`` in SI units; ``overrides`` use the data file's keys and units."""
    table = _table()
    if kind not in table:
        raise MemorySpecError(f"unknown memory kind {kind!r}; allowed: {', '.join(sorted(table))}")
    raw = {**table[kind], **(overrides or {})}
    unknown = set(overrides or {}) - set(table[kind])
    if unknown:
        raise MemorySpecError(f"memory {kind}: unknown override {sorted(unknown)[0]!r}; "
                              f"allowed: {', '.join(sorted(table[kind]))}")
    ns = 1e-9
    spec = MemorySpec(
        kind=kind, unit=raw["unit"], peak_bandwidth_Bps=raw["peak_bandwidth_gbps"] * GB,
        capacity_bytes=raw["capacity_gib"] * GIB, tRCD_s=raw["tRCD_ns"] * ns, tCL_s=raw["tCL_ns"] * ns,
        tRP_s=raw["tRP_ns"] * ns, tRAS_s=raw["tRAS_ns"] * ns, tBL_s=raw["tBL_ns"] * ns,
        energy_j_per_byte=raw["energy_pj_per_bit"] * 8e-12, phy_area_mm2=raw["phy_area_mm2"],
        footprint_mm2=raw["footprint_mm2"],
        cost_usd_per_byte=raw["cost_usd_per_gib"] / GIB)
    for f in fields(spec):
        value = getattr(spec, f.name)
        if isinstance(value, float) and value < 0:
            raise MemorySpecError(f"memory {kind}: {f.name} must be >= 0")
    return spec
