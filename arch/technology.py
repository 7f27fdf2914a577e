"""Technology-node figures (energy per MAC and SRAM byte, densities, defects, wafer cost).

The numbers live in ``arch/data/technology.yaml`` with their sources; a study may override any of them.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import yaml

from .errors import ArchError


@dataclass(frozen=True)
class Node:
    name: str
    mac_energy_pj: dict
    sram_read_pj_per_byte: float
    sram_mm2_per_mb: float
    pe_area_um2: dict
    static_w_per_mm2: float
    defect_density_per_cm2: float
    wafer_cost_usd: float


@lru_cache(maxsize=1)
def _table() -> dict:
    return yaml.safe_load((resources.files("arch") / "data" / "technology.yaml").read_text())


def nodes() -> list[str]:
    return sorted(_table()["nodes"])


def node(name: str, overrides: dict | None = None) -> Node:
    """Figures of one technology node, optionally with some overridden."""
    table = _table()["nodes"]
    if name not in table:
        raise ArchError(f"unknown technology node {name!r}; allowed: {', '.join(sorted(table))}")
    fields = {**table[name], **(overrides or {})}
    return Node(name=name, **fields)


def wafer_diameter_mm() -> float:
    return float(_table()["wafer_diameter_mm"])


def yield_alpha_logic() -> float:
    return float(_table()["yield_alpha_logic"])
