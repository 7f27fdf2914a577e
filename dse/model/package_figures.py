"""Area, cost and power of a package design, the figures every evaluation of it shares (a system's
packages are one design: dse.system.evaluator computes them once for all its package shares).

Silicon area = chiplet dies (with their HBM PHYs) + DDR PHYs; package area adds the HBM stacks'
footprints; cost = Chiplet Actuary's assembled package (arch.packaging): known-good-die cost of each die
(arch.kgd_cost, negative-binomial yield; a wafer-scale die's by its spare cores, arch.wafer), HBM and DDR by capacity, the link technology's interposer or
substrate, bumps, and what failed bonds throw away (per-die bonding yield of the link, noc/data/links.yaml);
`cost_parts` gives those parts. Peak power = static + active + every PE busy + memories at full bandwidth;
static power = the chiplets' leakage.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from arch.area_cost import kgd_cost
from arch.packaging import PACKAGE_COST_PARTS, package_cost_parts

#: a package's figures, in the order of `package_arrays`' columns (units in the names)
PACKAGE_FIGURES = ("area_mm2", "package_area_mm2", "cost_usd", "peak_power_w", "static_w", "max_die_mm2")
F_AREA, F_PACKAGE_AREA, F_COST, F_POWER, F_STATIC, F_MAX_DIE = range(len(PACKAGE_FIGURES))

@nb.njit(cache=True, inline="always")
def cost_parts(T, n, kind, stacks, ddr):
    """The parts of a package's cost (arch.packaging.PACKAGE_COST_PARTS) and its silicon area."""
    area = ddr * T.ddr_phy
    dies = 0.0
    n_stacks = 0
    for i in range(n):
        die = T.kind_area[kind[i]] + stacks[i] * T.hbm_phy
        area += die
        if T.kind_wafer_kgd[kind[i]] > 0.0:           # a wafer-scale die: yielded by its spare cores (arch.wafer)
            dies += T.kind_wafer_kgd[kind[i]]
        else:
            dies += kgd_cost(die, T.kind_wafer_cost[kind[i]], T.kind_d0[kind[i]], T.yield_alpha, T.wafer_diameter)
        n_stacks += stacks[i]
    parts = package_cost_parts(dies, area, float(n), n_stacks * T.hbm_cost, n_stacks * T.hbm_footprint,
                               float(n_stacks), ddr * T.ddr_cost, T.packaging)
    return parts, area


@nb.njit(cache=True, inline="always")
def one_package(T, n, kind, stacks, ddr, out):
    """A package's figures (`PACKAGE_FIGURES`, but its largest die) into ``out``."""
    power = ddr * T.ddr_bw * T.ddr_e
    static = 0.0
    footprint = 0.0
    for i in range(n):
        k = kind[i]
        static += T.kind_static_w[k]
        power += T.kind_static_w[k] + T.kind_active_w[k] + T.kind_peak_dyn_w[k] + stacks[i] * T.hbm_bw * T.hbm_e
        footprint += stacks[i] * T.hbm_footprint
    parts, area = cost_parts(T, n, kind, stacks, ddr)
    out[F_AREA] = area
    out[F_PACKAGE_AREA] = area + footprint
    out[F_COST] = parts[0] + parts[1] + parts[2] + parts[3] + parts[4]
    out[F_POWER] = power
    out[F_STATIC] = static


@nb.njit(cache=True)
def cost_part_arrays(T, n, kind, stacks, ddr):
    """Per design: the parts of its package's cost, ``[P, len(PACKAGE_COST_PARTS)]`` (they sum to its
    ``cost_usd``)."""
    out = np.zeros((n.shape[0], len(PACKAGE_COST_PARTS)))
    for p in range(n.shape[0]):
        parts, _ = cost_parts(T, n[p], kind[p], stacks[p], ddr[p])
        for j in range(len(PACKAGE_COST_PARTS)):
            out[p, j] = parts[j]
    return out


@nb.njit(cache=True, nogil=True)
def package_arrays(T, n, kind, stacks, ddr):
    """Per design: its `PACKAGE_FIGURES` (`one_package` and its largest die, a chiplet with its HBM PHYs):
    ``[P, len(PACKAGE_FIGURES)]``."""
    out = np.zeros((n.shape[0], len(PACKAGE_FIGURES)))
    for p in range(n.shape[0]):
        one_package(T, n[p], kind[p], stacks[p], ddr[p], out[p])
        for i in range(n[p]):
            if T.kind_wafer_kgd[kind[p, i]] <= 0.0:  # a wafer-scale die is exempt from the reticle (arch.wafer)
                out[p, F_MAX_DIE] = max(out[p, F_MAX_DIE], T.kind_area[kind[p, i]] + stacks[p, i] * T.hbm_phy)
    return out
