"""Carbon per token of a population of designs: embodied carbon amortised over the package's lifetime
plus operational carbon (ACT's model: Gupta et al., ISCA 2022; arch.carbon).

* Embodied (g CO2e): every die (chiplet with its HBM PHYs) by arch.carbon.die_carbon_g at its node and its
  negative-binomial yield (the cost model's), the HBM stacks' and DDR channels' gigabytes at ACT's DRAM
  figure, and a packaging figure per die and per stack.
* Per token: operational = energy per token x the grid's intensity (``carbon.grid_intensity_g_per_kwh``);
  embodied / (tokens the design serves in ``carbon.lifetime_years`` at ``carbon.utilisation`` of its
  throughput).
"""
from __future__ import annotations

import numpy as np

import arch
from arch.area_cost import negative_binomial_yield

from .tables import EvalTables

SECONDS_PER_YEAR = 365.25 * 24 * 3600.0
J_PER_KWH = 3.6e6


def kind_carbon_per_mm2_g(t: EvalTables, fab_intensity_g_per_kwh: float) -> np.ndarray:
    """[K] grams of CO2e per mm² of wafer for each chiplet kind's node (before yield)."""
    return np.array([arch.carbon.carbon_per_cm2_g(node, fab_intensity_g_per_kwh) / 100.0 for node in t.kind_nodes])


def embodied_g(t: EvalTables, per_mm2: np.ndarray, n: np.ndarray, kind: np.ndarray, stacks: np.ndarray,
               ddr: np.ndarray) -> np.ndarray:
    """[P] embodied carbon of each design (module docstring); kind and stacks are [P, slots]."""
    phy = t.hbm.phy_area_mm2 if t.hbm else 0.0
    die = t.kind_area_mm2[kind] + stacks * phy
    d0 = t.kind_defect_density_per_cm2[kind]
    good = negative_binomial_yield(die, d0, arch.technology.yield_alpha_logic())
    in_package = np.arange(kind.shape[1])[None, :] < np.asarray(n)[:, None]
    dies = np.where(in_package, die * per_mm2[kind] / good, 0.0).sum(axis=1)
    n_stacks = np.where(in_package, stacks, 0).sum(axis=1)
    gb = n_stacks * (t.hbm.capacity_bytes if t.hbm else 0.0) / 1e9 + ddr * (t.ddr.capacity_bytes if t.ddr else 0.0) / 1e9
    return dies + gb * arch.carbon.dram_g_per_gb() + (np.asarray(n) + n_stacks) * arch.carbon.packaging_g_per_ic()


def per_token_g(embodied: np.ndarray, energy_j_per_token: np.ndarray, throughput_tok_s: np.ndarray,
                grid_intensity_g_per_kwh: float, lifetime_years: float, utilisation: float) -> np.ndarray:
    """[P] grams of CO2e per token: operational plus embodied over the lifetime's tokens."""
    tokens = throughput_tok_s * lifetime_years * SECONDS_PER_YEAR * utilisation
    with np.errstate(divide="ignore", invalid="ignore"):
        amortised = np.where(tokens > 0, embodied / tokens, np.inf)
    return energy_j_per_token / J_PER_KWH * grid_intensity_g_per_kwh + amortised
