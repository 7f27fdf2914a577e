"""Die area, static and active power, yield and known-good-die cost of a chiplet.

Area = (compute blocks + SRAM + die-to-die PHYs + memory PHYs) x (1 + periphery fraction), with
compute blocks by kind: systolic = PEs x PE area (PE precision) plus the vector unit's FP32 lanes
(a reconfigurable array adds its mux/wiring fraction to the PEs); gpu = SMs on the die x SM area +
I/O PHYs; cpu = cores x core area. SRAM: MB x node density (systolic buffers, GPU L2, CPU LLC).

Cost (Chiplet Actuary, Feng & Ma, DAC'22; its ``Chip.N_die_total``, ``die_yield``, ``cost_KGD``):

* each die occupies ``A' = (sqrt(A) + s)^2`` with scribe lane s = 0.2 mm;
* dies per wafer ``N = pi (d/2 - e)^2 / A' - pi (d - 2e) / sqrt(2 A')`` with edge loss e = 5 mm
  (an expected count, not floored);
* yield ``Y = (1 + A D0 / alpha)^-alpha`` (negative binomial, alpha = 10 for logic, A without scribe);
* known-good-die cost ``= wafer cost / (N Y)``.

For 7 nm (D0 = 0.09 /cm², $9,346 per wafer) this gives 100 mm² -> Y 0.914, $17.88 and
800 mm² -> Y 0.499, $318.60, Chiplet Actuary's figures. The plain gross-die formula
``floor(pi r^2 / A - 2 pi r / sqrt(2A))`` without scribe lanes and edge loss counts about 12 % more
dies (640 instead of 572 at 100 mm²), which is why it gave $15.97 / $292.7.

Static power = area x the node's leakage per mm². Active power = logic area x clock x the node's energy per
mm² per cycle of a busy chip's clocks and control (`active_power_w`).
"""
from __future__ import annotations

import math

import numba as nb

from .chiplet import Chiplet, CpuChiplet, GpuChiplet, ReconfigurableChiplet, SystolicChiplet
from .errors import ArchError
from .technology import edge_loss_mm, reticle_limit_mm2, scribe_lane_mm, wafer_diameter_mm, yield_alpha_logic
from .technology import node as tech_node
from .wafer import check_wafer, wafer_die_cost_usd

MB = 2.0 ** 20
_SCRIBE_MM = scribe_lane_mm()
_EDGE_MM = edge_loss_mm()


def area_breakdown_mm2(ch: Chiplet, precision: str = "bf16") -> dict:
    """Area of each block of a chiplet before periphery, plus ``periphery`` and ``total``."""
    nd = ch.tech()
    blocks = {}
    if isinstance(ch, SystolicChiplet):
        pe_prec = ch.pe_precision or precision
        pe = ch.rows * ch.cols * ch.arrays * nd.pe_area_um2[pe_prec] * 1e-6
        if isinstance(ch, ReconfigurableChiplet):
            pe *= 1.0 + ch.reconfig_area_fraction
        blocks["pe"] = pe
        blocks["vector"] = ch.lanes * nd.pe_area_um2["fp32"] * 1e-6
        blocks["sram"] = ch.sram_bytes / MB * nd.sram_mm2_per_mb
    elif isinstance(ch, GpuChiplet):
        die_sms = ch.die_sms or ch.sms
        blocks["sm"] = die_sms * (ch.sm_area_mm2 or nd.gpu_sm_area_mm2)
        blocks["sram"] = ch.l2_bytes * die_sms / ch.sms / MB * nd.sram_mm2_per_mb
        blocks["io"] = ch.io_area_mm2
    elif isinstance(ch, CpuChiplet):
        blocks["core"] = ch.cores * (ch.core_area_mm2 or nd.cpu_core_area_mm2)
        blocks["sram"] = ch.llc_bytes / MB * nd.sram_mm2_per_mb
    else:
        raise ArchError(f"chiplet {ch.name!r}: no area model for kind {ch.kind!r}")
    blocks["d2d_phy"] = ch.d2d_phys * nd.d2d_phy_mm2
    blocks["memory_phy"] = ch.memory_phys * ch.memory_phy_mm2
    core = sum(blocks.values())
    blocks["periphery"] = core * nd.periphery_fraction
    blocks["total"] = core + blocks["periphery"]
    return blocks


def chiplet_area_mm2(ch: Chiplet, precision: str = "bf16") -> float:
    return area_breakdown_mm2(ch, precision)["total"]


def static_power_w(ch: Chiplet, precision: str = "bf16") -> float:
    return chiplet_area_mm2(ch, precision) * ch.tech().static_w_per_mm2


def active_power_w(ch: Chiplet, precision: str = "bf16") -> float:
    """Power a chiplet draws while it runs work, beyond leakage and its operations' own energy: its logic
    area (all but the SRAM arrays) x clock x the node's ``active_pj_per_mm2_cycle`` (clock tree, schedulers
    and pipeline control, on-chip fabric). Charged over the chiplet's busy time (dse.model.perf_model), so
    a memory-bound kernel pays it too."""
    blocks = area_breakdown_mm2(ch, precision)
    return (blocks["total"] - blocks["sram"]) * ch.freq_hz * ch.tech().active_pj_per_mm2_cycle * 1e-12


@nb.njit(cache=True)
def dies_per_wafer_nb(area_mm2, wafer_diameter_mm, scribe_lane_mm, edge_loss_mm):
    """Expected dies per wafer with scribe lanes and edge loss (Chiplet Actuary); 0 if none fit."""
    if area_mm2 <= 0.0:
        return 0.0
    side = math.sqrt(area_mm2) + scribe_lane_mm
    a = side * side
    usable = wafer_diameter_mm - 2.0 * edge_loss_mm
    n = math.pi * (usable / 2.0) ** 2 / a - math.pi * usable / math.sqrt(2.0 * a)
    return max(n, 0.0)


@nb.njit(cache=True)
def negative_binomial_yield(area_mm2, defect_density_per_cm2, alpha):
    return (1.0 + area_mm2 / 100.0 * defect_density_per_cm2 / alpha) ** -alpha


@nb.njit(cache=True)
def kgd_cost(area_mm2, wafer_cost_usd, defect_density_per_cm2, alpha, wafer_diameter_mm,
             scribe_lane_mm=_SCRIBE_MM, edge_loss_mm=_EDGE_MM):
    """Cost of one known-good die (see module docstring); infinite when no die fits on the wafer."""
    good = dies_per_wafer_nb(area_mm2, wafer_diameter_mm, scribe_lane_mm, edge_loss_mm) \
        * negative_binomial_yield(area_mm2, defect_density_per_cm2, alpha)
    if good <= 0.0:
        return math.inf
    return wafer_cost_usd / good


def dies_per_wafer(area_mm2: float, wafer_diameter: float | None = None) -> float:
    """Expected (unfloored) dies of ``area_mm2`` per wafer, after scribe lanes and edge loss."""
    return float(dies_per_wafer_nb(float(area_mm2), float(wafer_diameter or wafer_diameter_mm()), _SCRIBE_MM, _EDGE_MM))


def die_yield(area_mm2: float, defect_density_per_cm2: float, alpha: float | None = None) -> float:
    return float(negative_binomial_yield(float(area_mm2), float(defect_density_per_cm2),
                                         float(alpha or yield_alpha_logic())))


def known_good_die_cost_usd(area_mm2: float, node: str, overrides: dict | None = None) -> float:
    nd = tech_node(node, overrides)
    return float(kgd_cost(float(area_mm2), float(nd.wafer_cost_usd), float(nd.defect_density_per_cm2),
                          yield_alpha_logic(), wafer_diameter_mm()))


def check_manufacturable(ch: Chiplet, precision: str = "bf16") -> float:
    """The chiplet's area, or an ArchError when it exceeds the reticle limit. A wafer-scale die
    (``wafer_cores`` > 0) is exempt: its exposure fields are stitched across the scribe lines, so the
    wafer bounds it, not the reticle (arch.wafer)."""
    area = chiplet_area_mm2(ch, precision)
    if isinstance(ch, SystolicChiplet) and ch.wafer_scale:
        check_wafer(ch, area)
        return area
    limit = reticle_limit_mm2()
    if area > limit:
        raise ArchError(f"chiplet {ch.name!r}: die area {area:.0f} mm² exceeds the {limit:.0f} mm² reticle limit; "
                        "make it smaller (fewer PEs/SMs/cores or less SRAM)")
    return area


def chiplet_cost_usd(ch: Chiplet, precision: str = "bf16") -> float:
    """Known-good-die cost of the chiplet (its node's wafer cost and defect density, with overrides); a
    wafer-scale die's by its redundant cores (arch.wafer)."""
    area = check_manufacturable(ch, precision)
    if isinstance(ch, SystolicChiplet) and ch.wafer_scale:
        return wafer_die_cost_usd(ch, area)
    return known_good_die_cost_usd(area, ch.node, ch.overrides)
