"""Time, energy and carbon of training on a token budget (ACT's model, dse.system.carbon).

Time: whole iterations of ``global_batch x seq`` tokens. Energy: the iterations' energy (the devices'
energy by part, dse.training.energy). Carbon: operational = energy x the grid's intensity; embodied =
the devices' dies (fab carbon per cm² by node over the die's yield), HBM (per GB), packaging (per
packaged IC) and boards, spread over the system's lifetime: training charges the share of the lifetime it takes at
the study's utilisation (ACT's T / LT). SI units inside; the JSON keys carry theirs.
"""
from __future__ import annotations

import math

import arch

from ..study.schema.carbon import CarbonSpec
from ..system.carbon import CarbonFactors, die_g, memory_g_per_byte, packaging_g
from .iteration import Iteration
from .strategy import Strategy
from .systems import TrainingSystem


def device_embodied_g(system: TrainingSystem, factors: CarbonFactors) -> float:
    """Embodied carbon of one device: its die, its HBM stacks, their packages and its board."""
    ch = system.chiplet
    area = arch.chiplet_area_mm2(ch)
    die = float(die_g(area, ch.node, arch.die_yield(area, ch.tech().defect_density_per_cm2), factors.fab_g_per_kwh,
                      factors.gas_abatement))
    hbm = system.hbm_stacks * system.hbm.capacity_bytes * memory_g_per_byte(system.hbm.kind)
    return die + hbm + float(packaging_g(1 + system.hbm_stacks)) + factors.board_g


def to_train(it: Iteration, strategy: Strategy, system: TrainingSystem, tokens: float,
             carbon: CarbonSpec | None = None, effective_frac: float = 1.0, compute_frac: float = 1.0) -> dict:
    """``time_to_train_s``, ``energy_to_train_j`` and ``carbon_to_train_kg`` (with its operational and
    embodied parts) of training on ``tokens`` tokens. With failures (dse.training.resilience) the wall time
    is the iterations' over ``effective_frac``; the devices draw the iteration's power for the
    ``compute_frac`` of it they run iterations (kept or redone) and their idle power for the rest
    (checkpoint stalls, restarts)."""
    factors = CarbonFactors.from_spec(carbon or CarbonSpec())
    iterations = math.ceil(tokens / (strategy.global_batch * strategy.seq))
    seconds = iterations * it.iteration_s
    energy_j = iterations * it.energy_j
    if effective_frac < 1.0 or compute_frac < 1.0:
        seconds = seconds / effective_frac if effective_frac > 0 else math.inf
        ch = system.chiplet
        idle_w = strategy.devices * arch.idle_power_w(ch)
        energy_j = seconds * (compute_frac * it.energy_j / it.iteration_s + (1.0 - compute_frac) * idle_w)
    operational_g = energy_j / 3.6e6 * factors.grid_g_per_kwh
    embodied_g = strategy.devices * device_embodied_g(system, factors) * seconds / (
        factors.lifetime_s * factors.utilisation)
    return {"time_to_train_s": seconds, "energy_to_train_j": energy_j,
            "carbon_to_train_kg": (operational_g + embodied_g) / 1e3,
            "carbon_operational_kg": operational_g / 1e3, "carbon_embodied_kg": embodied_g / 1e3}
