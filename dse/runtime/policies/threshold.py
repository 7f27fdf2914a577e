"""``threshold``: rebalance (dse.runtime.policies.eplb) when the last window's max / mean chiplet load of
the layers (dse.runtime.mapping.imbalance) exceeds ``bound``, at most once every ``every_s`` seconds;
failed chiplets' units move to survivors (the evaluator's re-mapping) as soon as a failure is seen."""
from __future__ import annotations

from ..mapping import copy_arrays, imbalance
from .base import Decision, PolicyState, survivors_placement
from .eplb import rebalance

DEFAULT_BOUND = 1.2


class ThresholdPolicy:
    name = "threshold"

    def __init__(self, every_s: float | None = None, bound: float | None = None):
        self.every_s = every_s or 0.0
        self.bound = bound or DEFAULT_BOUND

    def decide(self, state: PolicyState) -> Decision | None:
        base = survivors_placement(state)
        if base is None or state.window == 0:
            return None
        kept = state.memo.get("copies")        # the placement's copies, built again only when it changes
        if kept is None or kept[0] is not base:
            kept = state.memo["copies"] = (base, copy_arrays(base, state.groups))
        seen = imbalance(base, state.groups, state.observed, state.chiplets, kept[1])
        if seen > self.bound and state.t_s - state.last_change_s >= self.every_s - 1e-9:
            return Decision(rebalance(base, state.groups, state.observed, state.failed, state.max_copies,
                                  state.design.placement, state.memo))
        return Decision(base) if base is not state.placement else None
