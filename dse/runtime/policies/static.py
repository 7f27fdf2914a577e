"""``static``: the design's mapping, never changed. A failed chiplet's units with no surviving copy go
unserved until it is repaired."""
from __future__ import annotations

from .base import Decision, Policy, PolicyState


class StaticPolicy(Policy):
    name = "static"

    def __init__(self, every_s: float | None = None, bound: float | None = None):
        pass

    def decide(self, state: PolicyState) -> Decision | None:
        return None
