"""A design through a scenario (`dse timeline`, docs/runtime.md), as a pipeline of values: the planner
(dse.runtime.plan) builds each design's segment table and its table of distinct mappings
(dse.runtime.segments); one costing call (dse.runtime.costing) gives every design's step figures as a
named record, the distinct mappings of every design of a package variant in one population call of the
study's own evaluator (the contract of dse.model.contract); one reducer (dse.runtime.totals) sums the
windows and totals, for `dse timeline`, the search (dse.runtime.search) and a serving study's windows
(dse.runtime.serving_window) alike."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import StudyError
from ..model.contract import DecodedDesigns
from ..study.space import Design
from .costing import NEEDED, Planned, StepFigures, cost_segments
from .plan import Planner
from .policies import make_policy
from .scenario import Scenario
from .segments import SegmentTable
from .serving_window import serving_windows
from .totals import Served, reduce_timeline


@dataclass
class Timeline:
    """One design's timeline: ``windows`` (one record per window) and ``totals`` (docs/runtime.md)."""

    policy: str
    scenario: str
    windows: list[dict]
    totals: dict

    def to_dict(self) -> dict:
        return {"scenario": self.scenario, "policy": self.policy, "windows": self.windows, "totals": self.totals}


def run_timelines(prepared, designs: list[Design], scenario: Scenario, policy: str = "static",
                  every_s: float | None = None, bound: float | None = None, strict: bool = True,
                  detail: bool = True, arrays: DecodedDesigns | None = None,
                  planners: dict | None = None) -> list[Timeline]:
    """Each design of ``designs`` (one package each, of ``prepared``'s study) through ``scenario``;
    ``strict``: a failure naming a component a design lacks is an error (otherwise it spares that design:
    the search's designs differ in size); ``detail``: each window's record and imbalance (the search
    needs the totals only: its timelines have no windows); ``arrays``: the designs' kernel arrays when
    the caller decoded them (one package variant); ``planners``: the planners of earlier calls with the
    same scenario and policy to reuse, by package variant (their popularity, outages and shapes:
    the search's generations)."""
    evaluator = prepared.system_evaluator          # the step's (a runtime study's evaluator wraps it)
    missing = [c for c in NEEDED if c not in evaluator.columns]
    if missing or any(d.system for d in designs):
        raise StudyError("dse timeline follows one package's step (a study without system or a serving or "
                         "training phase)", key="--design")
    check_links(prepared, scenario)
    reconfig = {c.name: c.reconfig_us * 1e-6 for c in prepared.study.hardware.chiplets if c.kind == "reconfigurable"}
    planners = {} if planners is None else planners
    serving = serving_windows(prepared)         # a serving study: the closed form per window
    work: dict[int, list[int]] = {}             # per package variant: its designs, planned together
    for i, design in enumerate(designs):
        variant = prepared.package_evaluator.variant_for(design) if prepared.variants else 0
        work.setdefault(variant, []).append(i)
        if variant not in planners:     # one planner per package variant: popularity and packings shared
            package = prepared.for_design(design)
            planners[variant] = Planner(package.package_evaluator, package.tables, prepared.study.hardware.package,
                                        prepared.study.mapping.max_replicas, scenario,
                                        make_policy(policy, every_s, bound), prepared.study.workload.phase, reconfig,
                                        strict, detail, compact=serving is None and not detail)
    planned: list = [None] * len(designs)
    for variant, at in work.items():
        bases = [None if arrays is None else arrays.take(slice(i, i + 1)) for i in at]
        for i, (table, base) in zip(at, planners[variant].plan_all([designs[i] for i in at], bases)):
            planned[i] = Planned(table, variant, base)
    figures = cost_segments(planned, planners, serving)
    out = []
    for p, step in zip(planned, figures):
        if serving is not None:
            windows, totals = serving.reduce(p.table, step, scenario.failures.spares, detail)
        else:
            windows, totals = reduce_timeline(p.table, step_served(p.table, step,
                                                                   planners[p.variant].tables.tokens_per_step), detail)
        out.append(Timeline(policy, scenario.name, windows, totals))
    return out


def step_served(table: SegmentTable, step: StepFigures, tokens_per_step: float) -> Served:
    """What each segment of a package study's timeline serves: its key's step, ``tokens_per_step`` each
    step latency (dse.runtime.totals.Served)."""
    mapped = table.mapped
    row = np.where(mapped[table.key], table.key, -1) if len(table.key) else table.key
    with np.errstate(invalid="ignore"):
        rate = tokens_per_step / step.latency_s
    return Served(row, rate, step.energy_j_per_token, step.latency_s, step.latency_p99_s, {})


def check_links(prepared, scenario: Scenario) -> None:
    """Link failures are priced on the evaluator's re-routed tables: the study must build them."""
    f = scenario.failures
    if (f.link_mtbf_h or any(e.component == "link" for e in f.events)) and not prepared.study.faults.links:
        raise StudyError("link failures are priced on the evaluator's re-routed tables: give the study "
                         "faults: {links: true}", key="failures")


def run_timeline(prepared, design: Design, scenario: Scenario, policy: str = "static",
                 every_s: float | None = None, bound: float | None = None) -> Timeline:
    """``design`` through ``scenario`` under ``policy`` (module docstring)."""
    return run_timelines(prepared, [design], scenario, policy, every_s, bound)[0]
