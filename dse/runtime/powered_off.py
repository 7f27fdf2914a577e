"""A failed chiplet draws nothing (docs/runtime.md), as in a serving window (dse.runtime.serving_window).

A segment with chiplets down is costed on the package evaluator's re-mapped design: the failed chiplets'
units moved to survivors, the failed chiplets still in the package, holding no unit. The evaluator charges
every chiplet of the package its kind's leakage over the step (dse.model.package_figures: static power x
latency) and a chiplet that holds no unit its idle draw beyond leakage over the whole step
(dse.model.perf_model.idle_energy_j: busy time 0): max(idle, leakage) x the step's latency in all, the
kind's idle power (arch.idle_power_w, never under its leakage). `off_energy_per_token` is that energy of the chiplets
down, per token, which dse.runtime.timeline takes off the step's energy per token.

Which chiplets are off: those a segment counts as failed (down, no spare standing in: dse.runtime.plan),
but a chiplet forced off only because every HBM stack it has failed in a package without DDR: its die and
router stay powered (it forwards), and it keeps its idle power. A chiplet that is both down and out of
HBM is counted as that one (powered), the upper bound."""
from __future__ import annotations

import numpy as np

from ..model.contract import DecodedDesigns


def chiplets_off(failed: frozenset[int], stacks_lost: frozenset, d: DecodedDesigns, j: int) -> list[int]:
    """The chiplets of ``failed`` that are powered off in the segment ``j`` of ``d`` (module docstring;
    ``d.stacks``: the stacks the segment has left); ``stacks_lost``: its (chiplet, stacks failed) pairs."""
    if d.ddr[j] or not stacks_lost:
        return sorted(failed)
    no_memory = {c for c, _ in stacks_lost if d.stacks[j, c] <= 0}
    return sorted(failed - no_memory)


def off_energy_per_token(tables, d: DecodedDesigns, j: int, off: list[int], latency_s: float) -> float:
    """Energy per token (J) the evaluator charges the powered-off chiplets ``off`` of design ``j`` over a
    step of ``latency_s`` (its own latency): each one's kind's idle power, at least its leakage (module
    docstring), over the step's tokens."""
    if not off:
        return 0.0
    return float(idle_energy_per_token(tables, idle_watts(tables, d.kind[j, off]).sum(), latency_s))


def idle_watts(tables, kinds: np.ndarray) -> np.ndarray:
    """Each chiplet kind of ``kinds``'s idle power (W): arch.idle_power_w, at least its leakage."""
    return np.asarray(tables.kind_idle_w)[kinds]


def idle_energy_per_token(tables, watts, latency_s):
    """Energy per token (J) of ``watts`` drawn over a step of ``latency_s``, over the step's tokens (scalars
    or arrays, element by element)."""
    return watts * latency_s / tables.tokens_per_step
