"""The registry phases plug into: what a study's ``workload.phase`` adds to the step model.

A phase is a way of using a design (one step of prefill or decode, serving requests, training): the
model layer costs steps and names no phase itself. A layer that models a phase (dse.serving, dse.training,
and those to come) builds a `Phase` record and hands it to `register_phase`; the facade (dse/__init__.py)
registers each phase package explicitly when ``dse`` is imported. A phase brings:

* ``prepare``: its preparer (study -> Prepared with its own evaluator), or None for the plain step;
* ``step_phase``: the workload phase its step tables are extracted at (serving's step is a decode batch);
* ``metrics``: the columns its evaluator adds to the system's;
* ``objectives``: objective name -> (metric column, sign for minimisation), joining the base objectives
  (dse.model.objectives);
* ``constraints``: named violations (> 0: infeasible) of its metrics under the study, added to the base
  constraints for studies of this phase.

A phase not registered is a step of the workloads' own phase (prefill, decode).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from ..study.spec import Study


@dataclass(frozen=True)
class PhaseConstraint:
    """A constraint of a phase: ``violation(metrics, study)`` > 0 marks an infeasible design."""

    name: str
    violation: Callable[[pd.DataFrame, Study], np.ndarray]


@dataclass(frozen=True)
class Phase:
    """What a ``workload.phase`` adds to the step model (module docstring)."""

    name: str
    prepare: Callable | None = None
    step_phase: str | None = None
    metrics: tuple[str, ...] = ()
    objectives: dict[str, tuple[str, float]] = field(default_factory=dict)
    constraints: tuple[PhaseConstraint, ...] = ()


#: workload.phase -> its registered `Phase`
PHASES: dict[str, Phase] = {}


def register_phase(phase: Phase) -> None:
    """Register ``phase`` (registering a name again replaces its record, as a reloaded module does)."""
    PHASES[phase.name] = phase


def phase_of(study: Study) -> Phase | None:
    """The registered phase of ``study`` (None: a plain step)."""
    return PHASES.get(study.workload.phase)


def step_phase(phase: str) -> str:
    """The workload phase a study of ``phase`` extracts its step tables at."""
    registered = PHASES.get(phase)
    return registered.step_phase or phase if registered is not None else phase


def phase_constraints(study: Study) -> tuple[PhaseConstraint, ...]:
    """The constraints ``study``'s phase adds (none for a plain step)."""
    phase = phase_of(study)
    return phase.constraints if phase is not None else ()
