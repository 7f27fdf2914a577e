"""Embodied and operational carbon, after ACT (Gupta et al., "ACT: Designing Sustainable Computer Systems
with an Architectural Carbon Modeling Tool", ISCA 2022). Figures: ``dse/system/data/carbon.yaml``.

ACT's footprint of running an application for time T on hardware that lives LT:
``CF = OP_CF + (T / LT) E_CF`` with ``OP_CF = CI_use x energy`` and ``E_CF = N_r K_r + sum_r E_r``:

* a logic die: ``(CI_fab x EPA + GPA + MPA) x area / yield`` (fab electricity, gases and materials per
  cm² of wafer by process node; ``yield`` is the die's own: here the negative-binomial yield arch uses
  for cost, where ACT takes a fixed 0.875);
* DRAM: ``CPG x capacity / yield`` (g per GB by DRAM process class, ACT's DRAM yield 0.875);
* packaging: ``K_r`` = 150 g per packaged IC (a die, an HBM stack, a 2 GB DRAM package of a DDR
  channel);
* the board a package sits on: ACT's printed-circuit-board footprint per m² by layer count, at the
  study's ``carbon.board_mm2`` and ``board_layers`` (default an OCP Accelerator Module).

Per token: the operational part is energy per token x the grid's intensity; the embodied part is spread
over the tokens the system serves in its lifetime, ``throughput x lifetime x utilisation`` (T / LT of
ACT, per token). SI units inside: joules, bytes, seconds, grams.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
import yaml

from ..errors import StudyError

J_PER_KWH = 3.6e6
BYTES_PER_GB = 1e9                   # ACT counts DRAM in decimal GB
DDR_BYTES_PER_IC = 2e9               # one 16 Gb DRAM package per 2 GB of a DDR channel
SECONDS_PER_YEAR = 365.25 * 24 * 3600.0
ABATEMENTS = (95, 97, 99)            # % of fab gases abated; 97 = the mean of ACT's 95 and 99 tables


@lru_cache(maxsize=1)
def carbon_table() -> dict:
    return yaml.safe_load((resources.files("dse.system") / "data" / "carbon.yaml").read_text())


def grid_names() -> list[str]:
    """Named grid carbon intensities (locations and sources of electricity)."""
    return list(carbon_table()["grid_g_per_kwh"])


def grid_g_per_kwh(grid: str | float) -> float:
    """Carbon intensity of a named grid (``usa``, ``coal``, ...) or a number in g CO2e per kWh."""
    if isinstance(grid, (int, float)):
        return float(grid)
    table = carbon_table()["grid_g_per_kwh"]
    if grid not in table:
        raise StudyError(f"unknown grid {grid!r}; allowed: a number of g CO2e per kWh or one of "
                         f"{', '.join(table)}", key="carbon.grid")
    return float(table[grid])


def logic_g_per_cm2(node: str, fab_g_per_kwh: float, gas_abatement: int = 97) -> float:
    """Carbon of one cm² of processed wafer at ``node``: CI_fab x EPA + GPA + MPA (before yield)."""
    logic = carbon_table()["logic"]
    if node not in logic:
        raise StudyError(f"no carbon figures for technology node {node!r}; ACT has {', '.join(logic)}",
                         key="hardware.chiplets")
    if gas_abatement not in ABATEMENTS:
        raise StudyError(f"gas abatement {gas_abatement!r} is not one of {ABATEMENTS}", key="carbon.gas_abatement")
    f = logic[node]
    gases = {95: f["gases_95_g_per_cm2"], 99: f["gases_99_g_per_cm2"],
             97: (f["gases_95_g_per_cm2"] + f["gases_99_g_per_cm2"]) / 2.0}[gas_abatement]
    return fab_g_per_kwh * f["fab_energy_kwh_per_cm2"] + gases + f["materials_g_per_cm2"]


def die_g(area_mm2, node: str, die_yield, fab_g_per_kwh: float, gas_abatement: int = 97):
    """Embodied carbon of one good logic die of ``area_mm2`` (without its packaging)."""
    return logic_g_per_cm2(node, fab_g_per_kwh, gas_abatement) * np.asarray(area_mm2) / 100.0 / die_yield


def dram_g_per_byte(dram_class: str) -> float:
    """Embodied carbon per byte of DRAM of an ACT process class (``ddr4_10nm``), yield included."""
    t = carbon_table()
    return float(t["dram_g_per_gb"][dram_class]) / t["dram_yield"] / BYTES_PER_GB


def memory_g_per_byte(kind: str) -> float:
    """Embodied carbon per byte of a memory preset (``hbm3``, ``ddr5``, ...), yield included."""
    kinds = carbon_table()["memory_kinds"]
    if kind not in kinds:
        raise StudyError(f"no carbon figures for memory kind {kind!r}; known: {', '.join(kinds)}",
                         key="hardware.memory")
    return dram_g_per_byte(kinds[kind])


def packaging_g(ics) -> float:
    """ACT's packaging footprint: K_r per packaged IC."""
    return carbon_table()["packaging_g_per_ic"] * np.asarray(ics, dtype=float)


def pcb_g(area_mm2: float, layers: int) -> float:
    """ACT's printed circuit board footprint: kg per m² by layer count (its table, else 0.13 kg per m² per
    layer)."""
    t = carbon_table()
    kg_per_m2 = t["pcb_kg_per_m2"].get(layers, t["pcb_kg_per_m2_per_layer"] * layers)
    return kg_per_m2 * 1e3 * area_mm2 * 1e-6


def operational_g(energy_j, grid_g_per_kwh_: float):
    """Operational carbon of ``energy_j`` drawn from a grid of the given intensity."""
    return np.asarray(energy_j, dtype=float) / J_PER_KWH * grid_g_per_kwh_


def amortised_g_per_token(embodied_g, throughput_tok_s, lifetime_s: float, utilisation: float):
    """Embodied carbon per token: spread over the tokens served in the lifetime (ACT's T / LT)."""
    tokens = np.asarray(throughput_tok_s, dtype=float) * lifetime_s * utilisation
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tokens > 0, np.asarray(embodied_g, dtype=float) / tokens, np.inf)


@dataclass(frozen=True)
class CarbonFactors:
    """The study's carbon inputs in SI units (see dse.study.schema.carbon.CarbonSpec)."""

    grid_g_per_kwh: float
    fab_g_per_kwh: float
    gas_abatement: int
    lifetime_s: float
    utilisation: float
    board_g: float = 0.0             # the board each package sits on

    @classmethod
    def from_spec(cls, spec) -> "CarbonFactors":
        return cls(grid_g_per_kwh=grid_g_per_kwh(spec.grid), fab_g_per_kwh=grid_g_per_kwh(spec.fab_grid),
                   gas_abatement=int(spec.gas_abatement), lifetime_s=spec.lifetime_years * SECONDS_PER_YEAR,
                   utilisation=spec.utilisation, board_g=pcb_g(spec.board_mm2, spec.board_layers))

    def per_token(self, energy_j_per_token, embodied_g, throughput_tok_s) -> tuple[np.ndarray, np.ndarray]:
        """(operational, embodied) g CO2e per token."""
        return (operational_g(energy_j_per_token, self.grid_g_per_kwh),
                amortised_g_per_token(embodied_g, throughput_tok_s, self.lifetime_s, self.utilisation))
