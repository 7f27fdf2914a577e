"""A study made ready to evaluate: its workload tables, design space, heuristic seeds and evaluator.

`prepare` is the one place a `Study` becomes something that can cost designs; the search, the results
and the exports receive a `Prepared` (or build one with this function) rather than building their own.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import workloads

from ..errors import StudyError
from ..study.space import Design, Space, build_space, check_design
from ..study.spec import Study, precision_label
from .contract import PopulationEvaluator
from .evaluator import Evaluator
from .heuristics import seed_vectors
from .tables import UNIT_KINDS, EvalTables, build_tables
from .unit_precision import mixed_tables
from .variants import VariantEvaluator


@dataclass
class Prepared:
    """A study made ready to evaluate: its workload tables, design space and evaluators.

    ``evaluator`` is the study's (the contract of dse.model.contract: what the search and the results
    call); ``package_evaluator`` the package model under it (an `Evaluator`, or a `VariantEvaluator` over
    package variants: failure reports, kernels and routes of one package); ``system_evaluator`` the
    system of packages it composes (dse.system.evaluator.SystemEvaluator: layouts, fabric, package
    failures), set by dse.system.prepare."""

    study: Study
    tables: EvalTables
    space: Space
    evaluator: PopulationEvaluator
    package_evaluator: Evaluator | VariantEvaluator | None = None      # default: ``evaluator``
    system_evaluator: PopulationEvaluator | None = None
    variants: list["Prepared"] = field(default_factory=list)     # per package variant (dse.model.variants)
    #: the evaluator of the study's phase (dse.model.phases: serving's), set by the phase's preparer and kept
    #: when a layer above wraps ``evaluator`` (dse.runtime.search): where the runtime finds a phase's figures
    phase_evaluator: PopulationEvaluator | None = None
    #: the package a design's per-chiplet views (breakdown, floorplan, exports) look at, when the evaluator
    #: is not a package evaluator (set by dse.system.prepare: one package of a system)
    package_of: Callable[[Design], "Prepared"] | None = field(default=None, repr=False)

    def __post_init__(self):
        if self.package_evaluator is None:
            self.package_evaluator = self.evaluator

    def for_design(self, design) -> "Prepared":
        """The tables and package evaluator a design's package is costed with: its package variant's
        (itself without variants), or for a system one package of its layout (`package_of`)."""
        if self.package_of is not None:
            return self.package_of(design)
        if not self.variants:
            return self
        return self.variants[self.package_evaluator.variant_for(design)]

    def check_design(self, design: Design, source: str | None = None, in_space: bool = True) -> None:
        """A `StudyError` naming the design key when ``design`` cannot be evaluated under this study, or
        (``in_space``) lies outside its design space (dse.study.space.check_design)."""
        experts = {u for u, k in zip(self.tables.unit_names, self.tables.unit_kind) if UNIT_KINDS[k] == "expert"}
        check_design(design, self.study, self.tables.kind_names, self.tables.unit_names, source=source,
                     expert_units=experts, in_space=in_space)


def _tables(study: Study, workload=None, cache: dict | None = None) -> EvalTables:
    """The tables of a concrete study (units at precisions of their own: dse.model.unit_precision);
    ``cache``: tables of one precision already built in this preparation, by the study they were built for."""
    cache = {} if cache is None else cache

    def build(single: Study) -> EvalTables:
        key = single.model_dump_json()
        if key not in cache:
            same = workload is not None and workload.precision == single.workload.precision
            cache[key] = build_tables(single, workload if same else None)
        return cache[key]
    try:
        return mixed_tables(study, build) if study.precision_choice() else build_tables(study, workload)
    except workloads.WorkloadError as exc:
        raise StudyError(str(exc), key="workload") from None


def prepare(study: Study) -> Prepared:
    """Extract the workload and build the tables, space and evaluator (one per package variant when the
    study leaves link technology, memory kinds or unit precisions open); workload problems become
    StudyErrors."""
    with collector_paused():
        return _prepare(study)


@contextmanager
def collector_paused():
    """The cyclic garbage collector off while the block runs (on again after it, if it was on): the workload
    graph and tables are millions of new objects that stay alive (DeepSeek-V3 per layer: its collections
    walked them over and over, 0.05-0.1 CPU-s of the 1 s preparation), and freeing them needs no collector
    (reference counts do it)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _prepare(study: Study) -> Prepared:
    variants = study.variants()
    cache: dict = {}
    tables = _tables(variants[0][1], cache=cache)
    space = build_space(study, tables.kind_names, tables.unit_names, variants=len(variants))
    space.seeds = seed_vectors(study, tables, space)
    if len(variants) == 1:
        return Prepared(study=study, tables=tables, space=space, evaluator=_evaluator(study, tables, space))
    parts = []
    for _, concrete in variants:
        t = tables if concrete is variants[0][1] else _tables(concrete, tables.workload, cache)
        parts.append(Prepared(study=concrete, tables=t, space=space, evaluator=_evaluator(concrete, t, space)))
    kinds = [(p.tables.hbm.kind if p.tables.hbm else None, p.tables.ddr.kind if p.tables.ddr else None)
             for p in parts]
    precisions = [precision_label(concrete.precision_choice()) if concrete.precision_choice() else None
                  for _, concrete in variants]
    evaluator = VariantEvaluator([label for label, _ in variants], [p.evaluator for p in parts], kinds, space,
                                 precisions)
    return Prepared(study=study, tables=tables, space=space, evaluator=evaluator, variants=parts)


def _evaluator(study: Study, tables: EvalTables, space: Space) -> Evaluator:
    return Evaluator(tables, space, study.hardware.package, study.mapping.max_replicas,
                     faults=study.faults)
