"""Embodied carbon of packages decoded from genes (dse.system.carbon, ACT): every die, HBM stack and DDR
channel, with ACT's packaging footprint per packaged IC, and the board the package sits on.

A die is a chiplet with the PHYs of its HBM stacks (the area the reticle check and the cost model use);
its yield is arch's negative-binomial yield at the chiplet kind's defect density (the model behind the
package cost), so a large die costs more carbon per good cm² than a small one.
"""
from __future__ import annotations

import numpy as np

import arch
from arch.area_cost import negative_binomial_yield

from ..model.tables import EvalTables
from .carbon import DDR_BYTES_PER_IC, CarbonFactors, logic_g_per_cm2, memory_g_per_byte, packaging_g


class PackageEmbodied:
    """``PackageEmbodied(tables, factors)(n, kind, stacks, ddr) -> grams per package`` over a population."""

    def __init__(self, tables: EvalTables, factors: CarbonFactors):
        self.g_per_mm2 = np.array([logic_g_per_cm2(node, factors.fab_g_per_kwh, factors.gas_abatement) / 100.0
                                   for node in tables.kind_nodes])
        self.kind_area_mm2 = np.asarray(tables.kind_area_mm2, dtype=float)
        self.d0 = np.asarray(tables.kind_defect_density_per_cm2, dtype=float)
        self.alpha = float(arch.technology.yield_alpha_logic())
        self.ic_g = float(packaging_g(1))
        self.board_g = factors.board_g
        hbm, ddr = tables.hbm, tables.ddr
        self.hbm_phy_mm2 = hbm.phy_area_mm2 if hbm else 0.0
        self.stack_g = hbm.capacity_bytes * memory_g_per_byte(hbm.kind) + self.ic_g if hbm else 0.0
        self.channel_g = (ddr.capacity_bytes * memory_g_per_byte(ddr.kind)
                          + self.ic_g * ddr.capacity_bytes / DDR_BYTES_PER_IC) if ddr else 0.0

    def parts(self, n, kind, stacks, ddr) -> dict[str, np.ndarray]:
        """Grams per package of its dies (fab), HBM, DDR, die packaging and board, each ``[P]``."""
        n = np.asarray(n)
        kind = np.asarray(kind)
        stacks = np.asarray(stacks)
        present = np.arange(kind.shape[1])[None, :] < n[:, None]
        area = self.kind_area_mm2[kind] + stacks * self.hbm_phy_mm2
        good = negative_binomial_yield(area, self.d0[kind], self.alpha)
        dies = np.where(present, self.g_per_mm2[kind] * area / good, 0.0).sum(axis=1)
        return {"dies": dies, "hbm": np.where(present, stacks, 0).sum(axis=1) * self.stack_g,
                "ddr": np.asarray(ddr) * self.channel_g, "packaging": n * self.ic_g,
                "board": np.full(len(n), self.board_g)}

    def __call__(self, n, kind, stacks, ddr) -> np.ndarray:
        return sum(self.parts(n, kind, stacks, ddr).values())
