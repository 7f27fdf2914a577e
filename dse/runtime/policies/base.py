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

    @property
    def chiplets(self) -> int:
        return self.design.rows * self.design.cols


@dataclass
class Decision:
    """A new ``placement`` and the failed slots a spare chiplet takes over (``revive``)."""

    placement: dict[str, list[int]]
    revive: set[int] = field(default_factory=set)


def survivors_placement(state: PolicyState) -> dict[str, list[int]] | None:
    """The placement with no copy on a failed chiplet: the package evaluator's re-mapping (surviving
    replicas take over, orphaned units move to the survivor with the most free HBM); None when nothing
    survives."""
    if not any(s in state.failed for slots in state.placement.values() for s in slots):
        return state.placement
    remapped = state.package_evaluator.remapped(with_placement(state.design, state.placement),
                                                sorted(state.failed))
    return None if remapped is None else remapped.placement
