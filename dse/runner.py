"""One study from start to end: workload -> tables -> space -> search -> results."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

import workloads

from . import checkpoint
from .distributed import evaluation_engine
from .errors import StudyError
from .evaluator import Evaluator
from .results import StudyResult, build_result
from .search import GenerationReport, SearchOutcome, run_search
from .mapping import seed_vectors
from .space import Space, build_space
from .study import Study
from .tables import EvalTables, build_tables
from .variants import VariantEvaluator


@dataclass
class Prepared:
    """A study made ready to evaluate: its workload tables, design space and evaluator."""

    study: Study
    tables: EvalTables
    space: Space
    evaluator: Evaluator | VariantEvaluator
    variants: list["Prepared"] = field(default_factory=list)     # per package variant (dse.variants)

    def for_design(self, design) -> "Prepared":
        """The tables and evaluator of the package variant a design belongs to (itself without variants)."""
        if not self.variants:
            return self
        return self.variants[self.evaluator.variant_for(design)]


def _tables(study: Study, workload=None) -> EvalTables:
    try:
        return build_tables(study, workload)
    except workloads.WorkloadError as exc:
        raise StudyError(str(exc), key="workload") from None


def prepare(study: Study) -> Prepared:
    """Extract the workload and build the tables, space and evaluator (one per package variant when the
    study leaves link technology or memory kinds open); workload problems become StudyErrors."""
    variants = study.variants()
    tables = _tables(variants[0][1])
    space = build_space(study, tables, variants=len(variants))
    space.seeds = seed_vectors(study, tables, space)
    if len(variants) == 1:
        return Prepared(study=study, tables=tables, space=space, evaluator=_evaluator(study, tables, space))
    parts = []
    for _, concrete in variants:
        t = tables if concrete is variants[0][1] else _tables(concrete, tables.workload)
        parts.append(Prepared(study=concrete, tables=t, space=space, evaluator=_evaluator(concrete, t, space)))
    kinds = [(p.tables.hbm.kind if p.tables.hbm else None, p.tables.ddr.kind if p.tables.ddr else None)
             for p in parts]
    evaluator = VariantEvaluator([label for label, _ in variants], [p.evaluator for p in parts], kinds, space)
    return Prepared(study=study, tables=tables, space=space, evaluator=evaluator, variants=parts)


def _evaluator(study: Study, tables: EvalTables, space: Space) -> Evaluator:
    return Evaluator(tables, space, study.hardware.package, study.mapping.max_replicas,
                     faults=study.faults)


def run_study(study: Study, seed: int | None = None,
              on_generation: Callable[[GenerationReport], None] | None = None,
              prepared: Prepared | None = None, *, checkpoint_dir: str | Path | None = None,
              workers: int | None = None, scheduler: str | None = None) -> StudyResult:
    """Search the study's space and return every evaluation and the Pareto front.

    ``checkpoint_dir``: save the search state there every ``search.checkpoint_every`` generations
    (see dse.checkpoint; `resume_study` continues it). ``workers``: evaluate on a local Dask cluster of
    that many processes; ``scheduler``: on the Dask cluster at that address (see dse.distributed).
    The result is the same either way.
    """
    p = prepared or prepare(study)
    if seed is not None:
        study = study.model_copy(update={"search": study.search.model_copy(update={"seed": seed})})
    with evaluation_engine(p.evaluator, workers, scheduler) as engine:
        outcome = run_search(p.evaluator, study, on_generation=on_generation, engine=engine,
                             checkpoint_dir=checkpoint_dir)
    return _result(study, p, outcome)


def resume_study(path: str | Path, on_generation: Callable[[GenerationReport], None] | None = None,
                 prepared: Prepared | None = None, *, workers: int | None = None,
                 scheduler: str | None = None) -> StudyResult:
    """Continue the search checkpointed for results folder (or checkpoint folder) ``path`` to its end."""
    directory = checkpoint.locate(path)
    search = checkpoint.load(directory)
    study = search.study
    p = prepared or prepare(study)
    if not (np.array_equal(p.space.lower, search.problem.xl) and np.array_equal(p.space.upper, search.problem.xu)):
        raise StudyError(f"checkpoint {directory} was made for a different design space than the study now gives "
                         "(changed toolkit or model files?); start the study again")
    with evaluation_engine(p.evaluator, workers, scheduler) as engine:
        outcome = run_search(p.evaluator, study, on_generation=on_generation, engine=engine,
                             checkpoint_dir=directory, resume=search)
    return _result(study, p, outcome)


def _result(study: Study, p: Prepared, outcome: SearchOutcome) -> StudyResult:
    designs = p.evaluator.designs(outcome.X)
    result = build_result(study, outcome.X, outcome.metrics, outcome.generation, outcome.pareto_index, designs,
                          p.tables.kind_names, convergence=outcome.convergence,
                          reference_point=outcome.reference_point)
    result.prepared = p
    return result
