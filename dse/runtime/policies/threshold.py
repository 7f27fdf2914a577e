"""``threshold``: rebalance (dse.runtime.policies.eplb) when the last window's max / mean chiplet load of
the layers (dse.runtime.imbalance) exceeds ``bound``, at most once every ``every_s`` seconds, re-packing
only the layers beyond ``bound`` (docs/runtime.md, issue 48's lever (a));
failed chiplets' units move to survivors (the evaluator's re-mapping) as soon as a failure is seen."""
from __future__ import annotations

from ..imbalance import placement_imbalance
from .base import Decision, Policy, PolicyState, survivors_placement
from .eplb import rebalance_placement

DEFAULT_BOUND = 1.2


class ThresholdPolicy(Policy):
    name = "threshold"

    def __init__(self, every_s: float | None = None, bound: float | None = None):
        self.every_s = every_s or 0.0
        self.bound = bound or DEFAULT_BOUND

    def waits(self, window: int, t_s: float, last_change_s: float) -> bool:
        return window == 0

    def due(self, seen: float, t_s: float, last_change_s: float) -> bool:
        """A rebalance is due: the imbalance ``seen`` beyond ``bound`` and ``every_s`` passed since the last."""
        return seen > self.bound and t_s - last_change_s >= self.every_s - 1e-9

    def calm(self, seen: float, t_s: float, last_change_s: float) -> bool:
        """With no chiplet down (`decide`'s survivors are the placement itself): nothing to decide."""
        return not self.due(seen, t_s, last_change_s)

    def decide(self, state: PolicyState) -> Decision | None:
        base = survivors_placement(state)
        if base is None or state.window == 0:
            return None
        seen = placement_imbalance(base, state.groups, state.observed, state.chiplets)
        if self.due(seen, state.t_s, state.last_change_s):
            return Decision(rebalance_placement(base, state.home, state.groups, state.observed, state.failed,
                                                state.max_copies, self.bound))
        return Decision(base) if base is not state.placement else None
