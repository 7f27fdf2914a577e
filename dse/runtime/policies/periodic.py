"""``periodic``: every ``every_s`` seconds, re-place each layer's experts from the last window's observed
loads, EPLB-style (dse.runtime.policies.eplb: replicate, pack, keep neighbours close); failed chiplets'
units first move to survivors (the evaluator's re-mapping)."""
from __future__ import annotations

from .base import Decision, Policy, PolicyState, survivors_placement
from .eplb import rebalance_placement

DEFAULT_EVERY_S = 600.0


class PeriodicPolicy(Policy):
    name = "periodic"

    def __init__(self, every_s: float | None = None, bound: float | None = None):
        self.every_s = every_s or DEFAULT_EVERY_S
        self.bound = bound or 0.0       # layers within it are not re-packed (0: every layer is)

    def waits(self, window: int, t_s: float, last_change_s: float) -> bool:
        return window == 0 or t_s - last_change_s < self.every_s - 1e-9

    def decide(self, state: PolicyState) -> Decision | None:
        if self.waits(state.window, state.t_s, state.last_change_s):
            return None
        base = survivors_placement(state)
        if base is None:
            return None
        return Decision(rebalance_placement(base, state.home, state.groups, state.observed, state.failed,
                                            state.max_copies, self.bound))
