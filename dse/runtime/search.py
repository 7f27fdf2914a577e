"""Designs ranked by how they live through a scenario: the study's ``runtime`` section (scenario file and
policy; dse.study.schema.runtime) adds three columns to every evaluation, so the search's objectives
``tokens_over_horizon`` (tokens served over the horizon), ``availability`` (served over offered, or over
what the running design could serve when the load saturates) and ``migration_energy`` (J moved by the
policy) rank designs through drift, failures and repairs rather than at one snapshot (docs/runtime.md).

`RuntimeEvaluator` wraps the study's evaluator (explicit delegation, dse.model.contract): its snapshot
metrics are the study's (a serving study's: its serving evaluator's, `steps_of` delegated for the
report's load curve), and each population's timelines are one `run_timelines` call, whose windows of
every design are costed in one population call of the step evaluator (dse.runtime.timeline). The facade
registers `with_runtime` with dse.system.prepare, so every layer that prepares a study gets it."""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import StudyError
from ..model.contract import DecodedDesigns, PopulationEvaluator
from ..model.records import design_records
from ..study.space import Design
from .scenario import Scenario, load_scenario
from .timeline import run_timelines

#: the columns a runtime study adds (units in the names) and the timeline totals they come from
RUNTIME_COLUMNS = {"tokens_over_horizon": "tokens_served", "availability_frac": "availability",
                   "migration_energy_j": "migration_energy_j"}


class RuntimeEvaluator(PopulationEvaluator):
    """The study's evaluator plus each design's timeline totals (module docstring)."""

    def __init__(self, study_evaluator: PopulationEvaluator, prepared, scenario: Scenario, spec):
        self.study_evaluator, self.prepared, self.scenario, self.spec = study_evaluator, prepared, scenario, spec
        self.space = study_evaluator.space
        self.planners: dict = {}        # dse.runtime.plan.Planner per package variant, kept across populations

    @property
    def columns(self) -> list[str]:
        return list(self.study_evaluator.columns) + list(RUNTIME_COLUMNS)

    @property
    def metric_names(self) -> list[str]:
        return list(self.study_evaluator.metric_names) + list(RUNTIME_COLUMNS)

    def runtime_columns(self, designs: list[Design], arrays: DecodedDesigns | None = None) -> np.ndarray:
        """``[P, 3]``: each design's `RUNTIME_COLUMNS` through the scenario under the study's policy
        (``arrays``: the designs' decoding, when the study has one package variant)."""
        s = self.spec
        lines = run_timelines(self.prepared, designs, self.scenario, s.policy, s.every_s, s.bound, strict=False,
                              detail=False, arrays=arrays, planners=self.planners)
        return np.array([[t.totals[k] for k in RUNTIME_COLUMNS.values()] for t in lines], float).reshape(-1, 3)

    def metrics_array(self, X: np.ndarray, with_faults: bool = True) -> np.ndarray:
        X = self.vectors(X)
        p = self.prepared
        arrays = None if p.variants else self.study_evaluator.decode(X)
        one_package = arrays is not None and p.study.system is None and p.study.serving is None
        ev = p.package_evaluator       # one package: records without placement, the mapping read from ``arrays``
        designs = design_records(arrays, ev.tables, ev.link, ev.space.mapping, ev.topology, placement=False) \
            if one_package else self.study_evaluator.designs(X)
        return np.hstack([self.study_evaluator.metrics_array(X, with_faults), self.runtime_columns(designs, arrays)])

    def design_metrics(self, designs: list[Design], with_faults: bool = True) -> np.ndarray:
        return np.hstack([self.study_evaluator.design_metrics(designs, with_faults), self.runtime_columns(designs)])

    def designs(self, X: np.ndarray) -> list[Design]:
        return self.study_evaluator.designs(X)

    def decode(self, X: np.ndarray) -> DecodedDesigns:
        return self.study_evaluator.decode(X)

    def package_evaluators(self) -> list:
        return self.study_evaluator.package_evaluators()

    @property
    def study(self):
        """The study (a serving study's report reads its ``serving`` section here, as of its evaluator)."""
        return self.prepared.study

    def steps_of(self, design: Design) -> tuple:
        """A serving study's affine steps, slots and replicas of ``design`` (dse.serving.package.
        ServingEvaluator.steps_of: the report's load curve, dse.serving.load_curve)."""
        return self.study_evaluator.steps_of(design)


def with_runtime(study, prepared):
    """``prepared`` with a `RuntimeEvaluator` when ``study`` has a ``runtime`` section (dse.system.prepare's
    wrapper); the scenario file is read here, a `StudyError` naming ``runtime.scenario`` and the key."""
    if study.runtime is None:
        return prepared
    try:
        scenario = load_scenario(study.runtime.scenario)
    except StudyError as exc:
        key = "runtime.scenario" + (f" ({exc.key})" if exc.key else "")
        raise StudyError(exc.detail, key=key, source=exc.source) from None
    return dataclasses.replace(prepared, evaluator=RuntimeEvaluator(prepared.evaluator, prepared, scenario,
                                                                     study.runtime))
