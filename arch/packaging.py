"""Recurring cost of assembling a package: Chiplet Actuary's model (Feng & Ma, DAC'22), chip-last.

Known-good dies (arch.area_cost.kgd_cost) and tested memory stacks are bonded, each with the link
technology's per-die bonding yield y_b (noc/data/links.yaml), onto

* an organic substrate (``organic-substrate``): substrate area ``S = 4 x`` the bonded area, cost
  ``S x $0.005/mm² x f`` with ``f`` = 1 for one die, else 1.5 / 1.75 / 2 above 289 / 900 mm² (more
  layers to route between dies); C4 bumps $0.005 per bonded mm². The n bonds succeed with ``y_b^n``; a
  failed assembly loses everything in it: yield loss ``(substrate + parts + bumps) (1 / y_b^n - 1)``;
* a passive silicon interposer (``silicon-interposer``) of area ``I = 1.1 x`` the bonded area, itself
  on a substrate of ``4 I``: the interposer costs a 55 nm wafer over the interposers per wafer
  (the dies-per-wafer formula, at least one when its square fits the wafer's usable circle), yields
  ``Y_I = (1 + I D0 / c)^-c`` (D0 0.06 /cm², c = 6), has micro-bumps $0.01 per bonded mm² and C4 bumps
  $0.005 per interposer mm². The interposer is tested before bonding (chip-last), so a bad one loses
  only itself; a failed bond (``y_b^n``) or interposer attach (``y_s`` 0.99) loses the dies too:
  yield loss ``interposer (1 / (Y_I y_b^n y_s) - 1) + substrate (1 / y_s - 1) + (parts + micro-bumps)
  (1 / (y_b^n y_s) - 1)``.

The cost splits into ``PACKAGE_COST_PARTS``: dies (KGD), memory (stacks and off-package DDR: the DDR is
not bonded, so no assembly loses it), substrate (interposer and substrate as made), bonding (bumps) and
yield loss (everything above that a failed step throws away); their sum is the package's cost.
"""
from __future__ import annotations

import math
from functools import lru_cache
from importlib import resources

import numba as nb
import numpy as np
import yaml

from .errors import ArchError
from .technology import edge_loss_mm, scribe_lane_mm, wafer_diameter_mm

#: the parts of a package's cost, in the order `package_cost_parts` returns them (US$)
PACKAGE_COST_PARTS = ("cost_dies_usd", "cost_memory_usd", "cost_substrate_usd", "cost_bonding_usd",
                      "cost_yield_loss_usd")
PACKAGINGS = ("organic-substrate", "silicon-interposer")
#: the fields of `packaging_params`' array, by index
P_INTERPOSER, P_WAFER, P_D0, P_CRITICAL, P_INT_SCALE, P_UBUMP, P_C4, P_SUB_USD, P_SUB_SCALE, P_ATTACH, \
    P_BOND, P_DIAMETER, P_SCRIBE, P_EDGE = range(14)


@lru_cache(maxsize=1)
def _table() -> dict:
    return yaml.safe_load((resources.files("arch") / "data" / "packaging.yaml").read_text())


def packaging_params(packaging: str, bond_yield: float) -> np.ndarray:
    """The figures `package_cost_parts` reads for a packaging (``PACKAGINGS``) whose dies bond with
    ``bond_yield`` each: a float array indexed by the ``P_*`` constants."""
    if packaging not in PACKAGINGS:
        raise ArchError(f"unknown packaging {packaging!r}; allowed: {', '.join(PACKAGINGS)}")
    if not 0.0 < bond_yield <= 1.0:
        raise ArchError(f"bonding yield must be in (0, 1], got {bond_yield!r}")
    sub, si = _table()["substrate"], _table()["silicon-interposer"]
    p = np.zeros(14)
    p[P_INTERPOSER] = 1.0 if packaging == "silicon-interposer" else 0.0
    p[P_WAFER], p[P_D0], p[P_CRITICAL] = si["wafer_cost_usd"], si["defect_density_per_cm2"], si["critical_level"]
    p[P_INT_SCALE], p[P_UBUMP] = si["area_scale"], si["ubump_usd_per_mm2"]
    p[P_C4], p[P_SUB_USD], p[P_SUB_SCALE], p[P_ATTACH] = (sub["c4_usd_per_mm2"], sub["usd_per_mm2"], sub["area_scale"],
                                                          sub["attach_yield"])
    p[P_BOND], p[P_DIAMETER], p[P_SCRIBE], p[P_EDGE] = bond_yield, wafer_diameter_mm(), scribe_lane_mm(), edge_loss_mm()
    return p


@nb.njit(cache=True, inline="always")
def interposers_per_wafer(area_mm2, diameter_mm, scribe_mm, edge_mm):
    """Chiplet Actuary's dies-per-wafer count of an interposer; at least one when its square (with scribe
    lane) fits inside the wafer's usable circle, where the formula, made for small dies, undercounts."""
    side = math.sqrt(area_mm2) + scribe_mm
    a = side * side
    usable = diameter_mm - 2.0 * edge_mm
    n = math.pi * (usable / 2.0) ** 2 / a - math.pi * usable / math.sqrt(2.0 * a)
    if n < 1.0 and 2.0 * a <= usable * usable:
        return 1.0
    return max(n, 0.0)


@nb.njit(cache=True)
def package_cost_parts(dies_usd, dies_mm2, n_dies, stacks_usd, stacks_mm2, n_stacks, off_package_usd, p):
    """The parts of a package's cost (``PACKAGE_COST_PARTS``, module docstring): ``n_dies`` known-good
    dies costing ``dies_usd`` over ``dies_mm2`` in all, ``n_stacks`` memory stacks (``stacks_usd``,
    footprint ``stacks_mm2``), memory off the package (``off_package_usd``), packaging figures ``p``
    (`packaging_params`). The interposer is infinitely dear when none fits on a wafer."""
    bonded_mm2 = dies_mm2 + stacks_mm2
    parts = dies_usd + stacks_usd
    y_bond = p[P_BOND] ** (n_dies + n_stacks)
    if p[P_INTERPOSER] > 0.0:
        a_int = p[P_INT_SCALE] * bonded_mm2
        per_wafer = interposers_per_wafer(a_int, p[P_DIAMETER], p[P_SCRIBE], p[P_EDGE])
        interposer = p[P_WAFER] / per_wafer if per_wafer > 0.0 else math.inf
        y_int = (1.0 + a_int / 100.0 * p[P_D0] / p[P_CRITICAL]) ** -p[P_CRITICAL]
        substrate = p[P_SUB_SCALE] * a_int * p[P_SUB_USD]
        ubumps = bonded_mm2 * p[P_UBUMP]
        c4 = a_int * p[P_C4]
        y_s = p[P_ATTACH]
        loss = (interposer + c4) * (1.0 / (y_int * y_bond * y_s) - 1.0) + substrate * (1.0 / y_s - 1.0) \
            + (parts + ubumps) * (1.0 / (y_bond * y_s) - 1.0)
        return dies_usd, stacks_usd + off_package_usd, interposer + substrate, ubumps + c4, loss
    a_sub = p[P_SUB_SCALE] * bonded_mm2
    layers = 1.0
    if n_dies + n_stacks > 1:
        layers = 2.0 if a_sub > 900.0 else (1.75 if a_sub > 289.0 else 1.5)
    substrate = a_sub * p[P_SUB_USD] * layers
    c4 = bonded_mm2 * p[P_C4]
    loss = (substrate + parts + c4) * (1.0 / y_bond - 1.0)
    return dies_usd, stacks_usd + off_package_usd, substrate, c4, loss


def package_cost(dies_usd: float, dies_mm2: float, n_dies: int, packaging: str, bond_yield: float,
                 stacks_usd: float = 0.0, stacks_mm2: float = 0.0, n_stacks: int = 0,
                 off_package_usd: float = 0.0) -> dict:
    """`package_cost_parts` by name, with their sum as ``cost_usd``."""
    parts = package_cost_parts(float(dies_usd), float(dies_mm2), float(n_dies), float(stacks_usd), float(stacks_mm2),
                               float(n_stacks), float(off_package_usd), packaging_params(packaging, bond_yield))
    out = dict(zip(PACKAGE_COST_PARTS, (float(x) for x in parts)))
    out["cost_usd"] = sum(out.values())
    return out
