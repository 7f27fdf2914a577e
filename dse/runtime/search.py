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
from ..study.space import Design
from .scenario import Scenario, load_scenario
from .timeline import run_timelines

#: the columns a runtime study adds (units in the names) and the timeline totals they come from
RUNTIME_COLUMNS = {"tokens_over_horizon": "tokens_served", "availability_frac": "availability",
                   "migration_energy_j": "migration_energy_j"}


class RuntimeEvaluator(PopulationEvaluator):
    """The study's evaluator plus each design's timeline totals (module docstring)."""

    def __init__(self, inner: PopulationEvaluator, prepared, scenario: Scenario, spec):
        self.inner, self.prepared, self.scenario, self.spec = inner, prepared, scenario, spec
        self.space = inner.space
        self.planners: dict = {}        # dse.runtime.plan.Planner per package variant, kept across populations

    @property
    def columns(self) -> list[str]:
        return list(self.inner.columns) + list(RUNTIME_COLUMNS)

    @property
    def metric_names(self) -> list[str]:
        return list(self.inner.metric_names) + list(RUNTIME_COLUMNS)

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
        arrays = None if p.variants else self.inner.decode(X)
        one_package = arrays is not None and p.study.system is None and p.study.serving is None
        designs = package_records(p.package_evaluator, arrays) if one_package else self.inner.designs(X)
        return np.hstack([self.inner.metrics_array(X, with_faults), self.runtime_columns(designs, arrays)])

    def design_metrics(self, designs: list[Design], with_faults: bool = True) -> np.ndarray:
        return np.hstack([self.inner.design_metrics(designs, with_faults), self.runtime_columns(designs)])

    def designs(self, X: np.ndarray) -> list[Design]:
        return self.inner.designs(X)

    def decode(self, X: np.ndarray) -> DecodedDesigns:
        return self.inner.decode(X)

    def package_evaluators(self) -> list:
        return self.inner.package_evaluators()

    @property
    def study(self):
        """The study (a serving study's report reads its ``serving`` section here, as of its evaluator)."""
        return self.prepared.study

    def steps_of(self, design: Design) -> tuple:
        """A serving study's affine steps, slots and replicas of ``design`` (dse.serving.package.
        ServingEvaluator.steps_of: the report's load curve, dse.serving.load_curve)."""
        return self.inner.steps_of(design)


def package_records(ev, d: DecodedDesigns) -> list[Design]:
    """The design records of the kernel arrays ``d`` (package evaluator ``ev``) without their placement:
    the timelines of a population with its arrays read the mapping from ``d`` (`run_timelines`), so the
    unit -> slots dictionaries `Evaluator.designs` builds are not needed."""
    names = ev.tables.kind_names
    return [Design(rows=int(r), cols=int(c), chiplets=[names[k] for k in kind[:n]], hbm_stacks=stacks[:n],
                   ddr_channels=int(ddr), link=ev.link, mapping=ev.space.mapping, placement={}, topology=ev.topology)
            for r, c, n, kind, stacks, ddr in zip(d.rows, d.cols, d.chiplets.tolist(), d.kind.tolist(),
                                                  d.stacks.tolist(), d.ddr)]


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
