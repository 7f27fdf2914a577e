"""A wafer-scale die: yield by redundant cores, cost, and why the reticle limit does not apply.

A wafer-scale engine (Cerebras WSE: 46,225 mm², one die per 300 mm wafer) is exposed field by field and
its fields are joined by wiring drawn across the scribe lines (Cerebras, Hot Chips 2019, "Wafer Scale
Engine"): the reticle bounds each exposure, not the die, so `arch.check_manufacturable` exempts it; what
bounds it is the wafer (its die must fit the wafer's disc, `check_wafer`).

A whole-die negative-binomial yield (arch.area_cost) of 46,225 mm² at 0.10 defects per cm² is
(1 + 46.2 / 10)^-10 = 3e-8: no such die would ever work. Instead the die is ``wafer_cores`` identical
cores of which ``spare_cores`` are redundant: the fabric routes around a dead core (Cerebras, "100x
Defect Tolerance: How Cerebras Solved the Yield Problem", 2025: 970,000 physical cores, 900,000 enabled,
about 0.05 mm² each). Defects land on cores independently (Poisson, the small-area limit of the negative
binomial, whose clustering matters only across areas far larger than a core):

    core yield       y = exp(-A_core D0),   A_core = die area / wafer_cores
    die yield        Y = P(dead cores <= spare_cores) = BinomialCDF(spare_cores; wafer_cores, 1 - y)
    known-good cost  = wafer cost / Y       (one die per wafer)

The area outside the cores (I/O, the periphery) is counted inside A_core here: a defect anywhere is
taken to kill one core, an optimistic simplification (say so where it matters).
"""
from __future__ import annotations

import math

from scipy.stats import binom

from .chiplet import Chiplet
from .errors import ArchError
from .technology import node as tech_node
from .technology import wafer_diameter_mm


def core_yield(die_area_mm2: float, cores: int, defect_density_per_cm2: float) -> float:
    """Poisson yield of one core of a die of ``die_area_mm2`` split into ``cores``."""
    return math.exp(-die_area_mm2 / cores / 100.0 * defect_density_per_cm2)


def wafer_die_yield(die_area_mm2: float, cores: int, spares: int, defect_density_per_cm2: float) -> float:
    """Probability that at most ``spares`` of the ``cores`` are dead (module docstring)."""
    dead = 1.0 - core_yield(die_area_mm2, cores, defect_density_per_cm2)
    return float(binom.cdf(spares, cores, dead))


def check_wafer(ch: Chiplet, area_mm2: float) -> None:
    """A wafer-scale die must fit its wafer's disc (the reticle limit does not apply: module docstring)."""
    disc = math.pi * (wafer_diameter_mm() / 2.0) ** 2
    if area_mm2 > disc:
        raise ArchError(f"chiplet {ch.name!r}: wafer-scale die area {area_mm2:.0f} mm² exceeds the "
                        f"{disc:.0f} mm² of a {wafer_diameter_mm():.0f} mm wafer; fewer cores or less SRAM")


def wafer_die_cost_usd(ch: Chiplet, area_mm2: float) -> float:
    """Known-good cost of a wafer-scale die: its node's wafer cost over its yield (module docstring)."""
    check_wafer(ch, area_mm2)
    nd = tech_node(ch.node, ch.overrides)
    y = wafer_die_yield(area_mm2, ch.wafer_cores, ch.spare_cores, nd.defect_density_per_cm2)
    return math.inf if y <= 0.0 else float(nd.wafer_cost_usd) / y
