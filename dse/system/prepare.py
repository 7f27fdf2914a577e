"""A study made ready to evaluate, systems of packages and carbon included: `prepare` wraps the package
evaluator of dse.model.prepare in a `SystemEvaluator` (one package: its metrics plus carbon; a ``system``
section: every layout's packages, dse.system.packages). Every layer above (search, results, exports,
cli) prepares studies here.

A phase of its own (``workload.phase: serve``, ``train``) is prepared by the layer that models it: that
layer's `dse.model.phases.Phase` names its preparer, registered by the facade (dse/__init__.py), so
imports keep running down the layers while `prepare` serves every phase. A study section modelled by a
layer above (``runtime``: dse.runtime.search) wraps the prepared study the same way: the facade registers
its wrapper (`register_wrapper`), applied after the phase's preparer."""
from __future__ import annotations

import dataclasses
import numpy as np

from ..errors import StudyError
from ..model.phases import phase_of
from ..model.prepare import Prepared
from ..model.prepare import prepare as prepare_package
from ..model.tables import build_tables
from ..study.spec import Study
from .carbon import CarbonFactors
from .embodied import PackageEmbodied
from .evaluator import SystemEvaluator
from .hardware import SystemHardware
from .packages import PackageBank
from .slices import stage_layers


#: ``wrap(study, prepared) -> prepared`` of sections modelled above this layer, registered by the facade
WRAPPERS: list = []


def register_wrapper(wrap) -> None:
    """Register ``wrap`` (once; registering it again changes nothing)."""
    if wrap not in WRAPPERS:
        WRAPPERS.append(wrap)


def prepare(study: Study) -> Prepared:
    """Tables, design space and evaluator for ``study``: its phase's preparer (dse.model.phases) or
    `prepare_step`, then each registered wrapper (`WRAPPERS`)."""
    phase = phase_of(study)
    prepared = phase.prepare(study) if phase is not None and phase.prepare is not None else prepare_step(study)
    for wrap in WRAPPERS:
        prepared = wrap(study, prepared)
    return prepared


def prepare_step(study: Study) -> Prepared:
    """Tables, design space and a `SystemEvaluator` of one step of ``study`` (see module docstring)."""
    p = prepare_package(study)
    factors = CarbonFactors.from_spec(study.carbon)
    embodied = [PackageEmbodied(v.tables, factors) for v in (p.variants or [p])]
    if study.system is None:
        evaluator = SystemEvaluator(p.evaluator, p.space, factors, embodied)
        return dataclasses.replace(p, evaluator=evaluator, system_evaluator=evaluator, package_of=p.for_design)
    hardware = _check_system(study)
    layers, stages = stage_layers(p.tables).total, max(study.system.parallel.pipeline)
    if stages > layers:
        raise StudyError(f"{stages} pipeline stages for a model of {layers} layers; at most one stage per layer",
                         key="system.parallel.pipeline")
    p.space.seeds = layout_seeds(p.space, study)
    bank = PackageBank(study, p.tables, p.space, TablesAtBatch(study, p.tables))
    evaluator = SystemEvaluator(p.evaluator, p.space, factors, embodied, hardware, bank, study)
    return dataclasses.replace(p, evaluator=evaluator, system_evaluator=evaluator, package_of=bank.first_package)


class TablesAtBatch:
    """``tables(batch)``: the study's tables (dse.model.tables) with another batch, built once each."""

    def __init__(self, study: Study, tables):
        self.study, self.cache = study, {study.workload.batch: tables}

    def __call__(self, batch: int):
        if batch not in self.cache:
            workload = self.study.workload.model_copy(update={"batch": batch})
            self.cache[batch] = build_tables(self.study.model_copy(update={"workload": workload}))
        return self.cache[batch]


def _check_system(study: Study) -> SystemHardware:
    """The study's system resolved, or a `StudyError` naming what a system of packages cannot take."""
    if len(study.variants()) > 1:
        raise StudyError("a system study explores one package variant: give hardware.package.topology, "
                         "hardware.package.link and each memory kind as a single choice", key="system")
    hardware = SystemHardware.from_spec(study.system)
    parallel = study.system.parallel
    if max(parallel.pipeline) > 1 and study.workload.ensemble is not None:
        raise StudyError("pipeline stages across packages need one model (a chain of layers); an ensemble can "
                         "spread over packages with experts and replicas", key="system.parallel.pipeline")
    largest = max(p * e * r for p, e, r in parallel.layouts())
    if largest > hardware.packages_per_node and hardware.network is None:
        raise StudyError(f"layouts of up to {largest} packages span nodes of {hardware.packages_per_node}: the system "
                         "needs a network (system.network or a preset)", key="system.network")
    return hardware


def layout_seeds(space, study: Study):
    """The heuristic package designs (dse.model.heuristics) in every (pipeline, experts) layout the study
    allows, one replica, seed by seed: the search starts from every layout, not the smallest alone."""
    if space.seeds is None or not len(space.seeds):
        return space.seeds
    parallel = study.system.parallel
    at = {axis: space.slices[axis].start for axis in ("pipeline", "experts", "replicas")}
    out = []
    for seed in space.seeds:
        for i in range(len(parallel.pipeline)):
            for j in range(len(parallel.experts)):
                x = np.array(seed, copy=True)
                x[at["pipeline"]], x[at["experts"]], x[at["replicas"]] = i, j, 0
                out.append(x)
    return np.array(out)
