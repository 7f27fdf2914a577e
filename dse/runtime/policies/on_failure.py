"""``on-failure``: when a chiplet fails, a spare chiplet (if any are left) takes its slot and its units
are reloaded there; without a spare its units re-map to the survivors (the package evaluator's
re-mapping: surviving replicas take over, orphaned units move to the survivor with the most free HBM).
When every chiplet is back, the design's own mapping is restored."""
from __future__ import annotations

import dataclasses

from .base import Decision, PolicyState, survivors_placement


class OnFailurePolicy:
    name = "on-failure"

    def __init__(self, every_s: float | None = None, bound: float | None = None):
        pass

    def decide(self, state: PolicyState) -> Decision | None:
        if not state.failed:
            if state.placement != state.design.placement:
                return Decision({u: list(s) for u, s in state.design.placement.items()})
            return None
        revive = set(sorted(state.failed)[: state.spares])
        rest = state.failed - revive
        base = survivors_placement(dataclasses.replace(state, failed=rest)) if rest else state.placement
        if base is None or (base is state.placement and not revive):
            return None
        return Decision(base, revive=revive)
