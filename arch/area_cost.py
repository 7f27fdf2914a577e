"""Die area, static power, yield and known-good-die cost of a chiplet.

Area: PEs x PE area (node, precision) + SRAM MB x density + vector lanes x FP32 PE area
+ die-to-die PHYs, plus 10 % periphery (clocking, control, I/O ring).
Yield: negative binomial ``(1 + A * D0 / alpha) ** -alpha`` (Chiplet Actuary, alpha = 10 for logic).
Dies per wafer: ``floor(pi r^2 / A - 2 pi r / sqrt(2 A))`` (standard gross-die formula).
Cost of a known-good die: wafer cost / (dies per wafer x yield).
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np

from .chiplet import Chiplet
from .technology import node as tech_node
from .technology import wafer_diameter_mm, yield_alpha_logic

PERIPHERY_FRACTION = 0.10
D2D_PHY_MM2 = 0.5      # one UCIe-advanced x64 module footprint, about 0.5 mm² (UCIe 1.0 spec, M)


def chiplet_area_mm2(ch: Chiplet, precision: str = "bf16") -> float:
    nd = tech_node(ch.node)
    pe = ch.rows * ch.cols * nd.pe_area_um2[precision] * 1e-6
    sram = ch.sram_bytes / 2**20 * nd.sram_mm2_per_mb
    vector = ch.lanes * nd.pe_area_um2["fp32"] * 1e-6
    phy = ch.d2d_phys * D2D_PHY_MM2
    return (pe + sram + vector + phy) * (1.0 + PERIPHERY_FRACTION)


def static_power_w(ch: Chiplet, precision: str = "bf16") -> float:
    return chiplet_area_mm2(ch, precision) * tech_node(ch.node).static_w_per_mm2


@nb.njit(cache=True)
def gross_dies_per_wafer(area_mm2, wafer_diameter_mm):
    r = wafer_diameter_mm / 2.0
    return max(math.floor(math.pi * r * r / area_mm2 - 2.0 * math.pi * r / math.sqrt(2.0 * area_mm2)), 0.0)


@nb.njit(cache=True)
def negative_binomial_yield(area_mm2, defect_density_per_cm2, alpha):
    return (1.0 + area_mm2 / 100.0 * defect_density_per_cm2 / alpha) ** -alpha


@nb.njit(cache=True)
def kgd_cost(area_mm2, wafer_cost_usd, defect_density_per_cm2, alpha, wafer_diameter_mm):
    """Cost of one known-good die; infinite when no die fits on the wafer."""
    dpw = gross_dies_per_wafer(area_mm2, wafer_diameter_mm)
    if dpw <= 0.0:
        return np.inf
    return wafer_cost_usd / (dpw * negative_binomial_yield(area_mm2, defect_density_per_cm2, alpha))


def dies_per_wafer(area_mm2: float, wafer_diameter: float | None = None) -> int:
    return int(gross_dies_per_wafer(float(area_mm2), float(wafer_diameter or wafer_diameter_mm())))


def die_yield(area_mm2: float, defect_density_per_cm2: float, alpha: float | None = None) -> float:
    return float(negative_binomial_yield(float(area_mm2), float(defect_density_per_cm2),
                                         float(alpha or yield_alpha_logic())))


def known_good_die_cost_usd(area_mm2: float, node: str) -> float:
    nd = tech_node(node)
    return float(kgd_cost(float(area_mm2), float(nd.wafer_cost_usd), float(nd.defect_density_per_cm2),
                          yield_alpha_logic(), wafer_diameter_mm()))


def chiplet_cost_usd(ch: Chiplet, precision: str = "bf16") -> float:
    return known_good_die_cost_usd(chiplet_area_mm2(ch, precision), ch.node)
