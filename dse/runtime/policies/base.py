"""What every runtime policy sees and returns (dse.runtime.policies): the state at a window's start, and
a decision (a new placement, spares brought in). Placements are kernel arrays
(dse.runtime.mapping.Placement), told apart by identity: a policy returning the state's own placement
changes nothing."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ...study.space import Design
from ..mapping import ExpertGroups, Placement, on_chips
from ..popularity import Popularity


class Policy:
    """What the planner (dse.runtime.plan) asks of a policy: `decide` at each window's start, and `quiet`,
    a policy's test that with no chiplet down it would decide nothing for ``(placement, home)`` (None: no
    such test; the planner then asks `decide` every window), and `calm`, a policy's test that with no
    chiplet down it would decide nothing at window start ``t_s`` given the imbalance its counters show for
    the placement in force (dse.runtime.imbalance) and its last change (None: no such test)."""

    quiet = None
    calm = None

    def decide(self, state: "PolicyState") -> "Decision | None":
        raise NotImplementedError

    def waits(self, window: int, t_s: float, last_change_s: float) -> bool:
        """Whether `decide` at window ``window`` (time ``t_s``, the last change at ``last_change_s``)
        returns None whatever else the state holds (the planner then builds no state)."""
        return False


@dataclass
class PolicyState:
    """The runtime's view at the start of window ``window`` (time ``t_s``): the placement in force, the
    design's own (``home``), the chiplets down, the popularity the last window's counters observed
    (``observed``: a relabelling, dse.runtime.popularity.Popularity), spares left, and ``remap(placement, failed)``: the
    package evaluator's failure re-mapping (`Evaluator.remapped_arrays`; None: nothing survives)."""

    window: int
    t_s: float
    design: Design                      # the design as given
    placement: Placement
    home: Placement                     # the design's own mapping (static)
    failed: frozenset[int]
    observed: Popularity
    groups: ExpertGroups
    spares: int
    remap: Callable[[Placement, frozenset], "Placement | None"]
    max_copies: int
    last_change_s: float = -np.inf      # when the policy last changed the placement
    reconfigurable: dict = field(default_factory=dict)  # live reconfigurable slots free to re-role -> time, s

    @property
    def chiplets(self) -> int:
        return self.design.rows * self.design.cols


@dataclass
class Decision:
    """A new ``placement``, the failed slots a spare chiplet takes over (``revive``) and the failed slots
    whose role a reconfigurable chiplet takes (``rerole``: failed slot -> reconfigurable slot)."""

    placement: Placement
    revive: set[int] = field(default_factory=set)
    rerole: dict[int, int] = field(default_factory=dict)


def swapped(placement: Placement, a: int, b: int) -> Placement:
    """``placement`` with chiplets ``a`` and ``b`` trading their units (roles)."""
    s = placement.slots
    return Placement(np.where(s == a, b, np.where(s == b, a, s)), placement.ncopy.copy())


def holds(placement: Placement, chips) -> bool:
    """Whether any copy of ``placement`` is on one of ``chips``."""
    valid = np.arange(placement.slots.shape[1])[None, :] < placement.ncopy[:, None]
    return bool((valid & on_chips(placement.slots, chips)).any())


def same(a: Placement, b: Placement) -> bool:
    """Whether two placements put every unit's copies in the same places, in the same order."""
    if a is b:
        return True
    w = min(a.slots.shape[1], b.slots.shape[1])
    return bool((a.ncopy == b.ncopy).all() and (a.slots[:, :w] == b.slots[:, :w]).all()
                and (a.slots[:, w:] < 0).all() and (b.slots[:, w:] < 0).all())


def survivors_placement(state: PolicyState) -> Placement | None:
    """The placement with no copy on a failed chiplet: the package evaluator's re-mapping (surviving
    replicas take over, orphaned units move to the survivor with the most free HBM); None when nothing
    survives; the state's own placement when it holds nothing on a failed chiplet."""
    if not state.failed or not holds(state.placement, state.failed):
        return state.placement
    return state.remap(state.placement, state.failed)
