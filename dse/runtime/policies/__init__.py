"""Runtime policies, one module each, chosen by name (`POLICIES`): ``static``, ``periodic``,
``threshold``, ``on-failure``. A policy's ``decide(state)`` (dse.runtime.policies.base.PolicyState)
returns a `Decision` (a new placement, spares brought in) or None (no change)."""
from __future__ import annotations

from ...errors import StudyError
from .base import Decision, PolicyState
from .on_failure import OnFailurePolicy
from .periodic import PeriodicPolicy
from .static import StaticPolicy
from .threshold import ThresholdPolicy

POLICIES = {p.name: p for p in (StaticPolicy, PeriodicPolicy, ThresholdPolicy, OnFailurePolicy)}


def make_policy(name: str, every_s: float | None = None, bound: float | None = None):
    """The policy ``name`` (`POLICIES`); a `StudyError` naming ``--policy`` otherwise."""
    if name not in POLICIES:
        raise StudyError(f"unknown policy {name!r}; one of {', '.join(POLICIES)}", key="--policy")
    return POLICIES[name](every_s=every_s, bound=bound)


__all__ = ["Decision", "POLICIES", "PolicyState", "make_policy"]
