"""Embodied carbon of dies and memory, after ACT (Gupta et al., ISCA 2022; arch/data/carbon.yaml).

A logic die of area A on a node carries ``A x (CI_fab x EPA + GPA + MPA) / yield`` grams of CO2e: the
fab's electricity (energy per area at the fab grid's intensity), its process gases and its materials,
per good die. DRAM carries a figure per gigabyte, and every packaged die or memory stack a packaging
figure.
"""
from __future__ import annotations

from functools import lru_cache
from importlib import resources

import yaml

from .errors import ArchError


@lru_cache(maxsize=1)
def _table() -> dict:
    return yaml.safe_load((resources.files("arch") / "data" / "carbon.yaml").read_text())


def carbon_per_cm2_g(node: str, fab_intensity_g_per_kwh: float | None = None) -> float:
    """Grams of CO2e per cm² of wafer processed at ``node`` (before yield)."""
    table = _table()
    if node not in table["nodes"]:
        raise ArchError(f"no carbon figures for node {node!r}; nodes: {', '.join(table['nodes'])}")
    n = table["nodes"][node]
    ci = table["fab_intensity_g_per_kwh"] if fab_intensity_g_per_kwh is None else fab_intensity_g_per_kwh
    return ci * n["fab_energy_kwh_per_cm2"] + n["fab_gas_g_per_cm2"] + n["fab_materials_g_per_cm2"]


def die_carbon_g(area_mm2: float, node: str, die_yield: float, fab_intensity_g_per_kwh: float | None = None) -> float:
    """Embodied carbon of one good die (ACT: area x carbon per area / yield)."""
    return area_mm2 / 100.0 * carbon_per_cm2_g(node, fab_intensity_g_per_kwh) / die_yield


def dram_g_per_gb() -> float:
    return float(_table()["dram_g_per_gb"])


def packaging_g_per_ic() -> float:
    return float(_table()["packaging_g_per_ic"])
