"""Area, cost and power of a package design, the figures every evaluation of it shares (a system's
packages are one design: dse.system.evaluator computes them once for all its package shares).

Silicon area = chiplet dies (with their HBM PHYs) + DDR PHYs; package area adds the HBM stacks'
footprints; cost = known-good-die cost of each die (arch.kgd_cost, negative-binomial yield) + HBM and DDR
by capacity, divided by the bonding yield per die and stack (Chiplet Actuary); peak power = static + active +
every PE busy + memories at full bandwidth; static power = the chiplets' leakage.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from arch.area_cost import kgd_cost

#: a package's figures, in the order of `package_arrays`' columns (units in the names)
PACKAGE_FIGURES = ("area_mm2", "package_area_mm2", "cost_usd", "power_w", "static_w", "max_die_mm2")
F_AREA, F_PACKAGE_AREA, F_COST, F_POWER, F_STATIC, F_MAX_DIE = range(len(PACKAGE_FIGURES))

@nb.njit(cache=True, inline="always")
def one_package(T, n, kind, stacks, ddr, out):
    """A package's figures (`PACKAGE_FIGURES`, but its largest die) into ``out``."""
    area = ddr * T.ddr_phy
    footprint = 0.0
    cost = ddr * T.ddr_cost
    power = ddr * T.ddr_bw * T.ddr_e
    static = 0.0
    n_stacks = 0
    for i in range(n):
        k = kind[i]
        die = T.kind_area[k] + stacks[i] * T.hbm_phy
        area += die
        static += T.kind_static_w[k]
        cost += kgd_cost(die, T.kind_wafer_cost[k], T.kind_d0[k], T.yield_alpha, T.wafer_diameter)
        cost += stacks[i] * T.hbm_cost
        power += T.kind_static_w[k] + T.kind_active_w[k] + T.kind_peak_dyn_w[k] + stacks[i] * T.hbm_bw * T.hbm_e
        footprint += stacks[i] * T.hbm_footprint
        n_stacks += stacks[i]
    out[F_AREA] = area
    out[F_PACKAGE_AREA] = area + footprint
    out[F_COST] = cost / T.bond_yield ** (n + n_stacks)
    out[F_POWER] = power
    out[F_STATIC] = static


@nb.njit(cache=True, nogil=True)
def package_arrays(T, n, kind, stacks, ddr):
    """Per design: its `PACKAGE_FIGURES` (`one_package` and its largest die, a chiplet with its HBM PHYs):
    ``[P, len(PACKAGE_FIGURES)]``."""
    out = np.zeros((n.shape[0], len(PACKAGE_FIGURES)))
    for p in range(n.shape[0]):
        one_package(T, n[p], kind[p], stacks[p], ddr[p], out[p])
        for i in range(n[p]):
            out[p, F_MAX_DIE] = max(out[p, F_MAX_DIE], T.kind_area[kind[p, i]] + stacks[p, i] * T.hbm_phy)
    return out
