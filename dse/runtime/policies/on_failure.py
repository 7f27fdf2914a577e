"""``on-failure``: when a chiplet fails, a spare chiplet (if any are left) takes its slot and its units
are reloaded there; without a spare, a live reconfigurable chiplet (the scenario's ``reconfigurable``
slots, and chiplets of the arch's reconfigurable kind) takes the failed chiplet's role: the two trade
units, the failed chiplet's are reloaded onto it after its reconfiguration time, and its own go to the
survivors; without either, the failed chiplet's units re-map to the survivors (the package evaluator's
re-mapping: surviving replicas take over, orphaned units move to the survivor with the most free HBM).
When every chiplet is back, the design's own mapping is restored."""
from __future__ import annotations

import dataclasses

from .base import Decision, Policy, PolicyState, holds, same, survivors_placement, swapped


class OnFailurePolicy(Policy):
    name = "on-failure"

    def __init__(self, every_s: float | None = None, bound: float | None = None):
        pass

    @staticmethod
    def quiet(placement, home) -> bool:
        """With no chiplet down, whether `decide` decides nothing: the design's own mapping serves."""
        return placement is home

    def decide(self, state: PolicyState) -> Decision | None:
        if not state.failed:
            if not same(state.placement, state.home):
                return Decision(state.home)
            return None
        revive = set(sorted(state.failed)[: state.spares])
        rest = state.failed - revive
        placement, rerole = state.placement, {}
        free = sorted(state.reconfigurable)
        for f in sorted(rest):
            if free and holds(state.placement, [f]):
                r = free.pop(0)
                placement, rerole[f] = swapped(placement, f, r), r
        base = survivors_placement(dataclasses.replace(state, placement=placement, failed=rest)) if rest \
            else placement
        if base is None or (base is state.placement and not revive):
            return None
        return Decision(base, revive=revive, rerole=rerole)
