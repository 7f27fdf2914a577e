"""The runtime's state as a design's timeline unfolds (dse.runtime.plan): the mapping the policy chose,
the one serving (the old one while a background move is in flight), spares in use and left, and the move
in flight."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .mapping import Placement


@dataclass
class RunState:
    """The runtime's mapping as it changes: ``placement`` the policy's latest, ``serving`` the one serving
    (the old one while a background move is in flight), spares in use (``replaced``: slots a spare stands
    in for) and left, and the move in flight (``move_start``..``move_end``; ``stall``: serving stops)."""

    placement: Placement
    spares: int
    serving: Placement | None = None
    replaced: set = field(default_factory=set)
    pending_revive: set = field(default_factory=set)
    move_start: float = 0.0
    move_end: float = 0.0
    stall: bool = False
    keep: float = 1.0               # serving's throughput share while the move runs (0: a stall)
    last_change: float = -np.inf
    version: int = 0                # counts the mappings that have served
    placements: int = 0             # counts the policy's placements (a move's start: a new one)
    rerolled: set = field(default_factory=set)      # reconfigurable slots that took a failed chiplet's role

    def __post_init__(self):
        self.serving = self.serving or self.placement

    def start(self, t0: float, time_s: float, spec, placement: Placement, revive: set, keep: float = 1.0) -> None:
        """A move of ``time_s`` starts at ``t0``: a stall (serving stops until it lands; the new mapping
        serves after it) or in the background (the old mapping serves, at ``keep`` of its throughput, until
        it lands: dse.runtime.contention)."""
        self.stall = spec.mode == "stall"
        self.keep = 0.0 if self.stall else keep
        self.move_start = t0
        self.move_end = t0 + time_s
        self.placement = placement
        self.placements += 1
        self.spares -= len(revive)
        self.pending_revive = revive
        if self.stall:
            self.settle(self.move_end)

    def settle(self, t: float) -> None:
        """At ``t``: a landed move's mapping serves and its spares stand in."""
        if t >= self.move_end:
            if self.serving is not self.placement:      # a policy's new mapping is a new object
                self.version += 1
            self.serving = self.placement
            self.replaced |= self.pending_revive
            self.pending_revive = set()
