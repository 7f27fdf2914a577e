"""What every runtime policy sees and returns (dse.runtime.policies): the state at a window's start, and
a decision (a new placement, spares brought in)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...study.space import Design
from ..mapping import ExpertGroups, with_placement


@dataclass
class PolicyState:
    """The runtime's view at the start of window ``window`` (time ``t_s``): the placement in force, the
    chiplets down, the popularity the last window's counters observed (``observed``: a relabelling,
    dse.runtime.mapping), spares left, and the package evaluator (dse.model.evaluator.Evaluator) whose
    failure re-mapping (`Evaluator.remapped`) policies use."""

    window: int
    t_s: float
    design: Design                      # the design as given (its placement: the static mapping)
    placement: dict[str, list[int]]
    failed: frozenset[int]
    observed: list[np.ndarray]
    groups: ExpertGroups
    spares: int
    package_evaluator: object
    max_copies: int
    last_change_s: float = -np.inf      # when the policy last changed the placement
    memo: dict = field(default_factory=dict)    # work shared by every design and window (eplb.rebalance)
    reconfigurable: dict = field(default_factory=dict)  # live reconfigurable slots free to re-role -> time, s

    @property
    def chiplets(self) -> int:
        return self.design.rows * self.design.cols


@dataclass
class Decision:
    """A new ``placement``, the failed slots a spare chiplet takes over (``revive``) and the failed slots
    whose role a reconfigurable chiplet takes (``rerole``: failed slot -> reconfigurable slot)."""

    placement: dict[str, list[int]]
    revive: set[int] = field(default_factory=set)
    rerole: dict[int, int] = field(default_factory=dict)


def swapped(placement: dict[str, list[int]], a: int, b: int) -> dict[str, list[int]]:
    """``placement`` with chiplets ``a`` and ``b`` trading their units (roles)."""
    swap = {a: b, b: a}
    return {u: [swap.get(x, x) for x in s] for u, s in placement.items()}


def survivors_placement(state: PolicyState) -> dict[str, list[int]] | None:
    """The placement with no copy on a failed chiplet: the package evaluator's re-mapping (surviving
    replicas take over, orphaned units move to the survivor with the most free HBM); None when nothing
    survives."""
    if not state.failed or not any(s in state.failed for slots in state.placement.values() for s in slots):
        return state.placement
    remapped = state.package_evaluator.remapped(with_placement(state.design, state.placement),
                                                sorted(state.failed))
    return None if remapped is None else remapped.placement
