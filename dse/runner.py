"""One study from start to end: workload -> tables -> space -> search -> results."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import workloads

from .errors import StudyError
from .evaluator import Evaluator
from .results import StudyResult, build_result
from .search import run_search
from .space import Space, build_space
from .study import Study
from .tables import EvalTables, build_tables


@dataclass
class Prepared:
    """A study made ready to evaluate: its workload tables, design space and evaluator."""

    study: Study
    tables: EvalTables
    space: Space
    evaluator: Evaluator


def prepare(study: Study) -> Prepared:
    """Extract the workload and build the tables and space; workload problems become StudyErrors."""
    try:
        tables = build_tables(study)
    except workloads.WorkloadError as exc:
        raise StudyError(str(exc), key="workload") from None
    space = build_space(study, tables)
    evaluator = Evaluator(tables, space, study.hardware.package.link, study.mapping.max_replicas)
    return Prepared(study=study, tables=tables, space=space, evaluator=evaluator)


def run_study(study: Study, seed: int | None = None,
              on_generation: Callable[[int, int], None] | None = None,
              prepared: Prepared | None = None) -> StudyResult:
    """Search the study's space and return every evaluation and the Pareto front."""
    p = prepared or prepare(study)
    if seed is not None:
        study = study.model_copy(update={"search": study.search.model_copy(update={"seed": seed})})
    outcome = run_search(p.evaluator, study, on_generation=on_generation)
    designs = p.evaluator.designs(outcome.X)
    result = build_result(study, outcome.X, outcome.metrics, outcome.generation, outcome.pareto_index, designs,
                          p.tables.kind_names)
    result.prepared = p
    return result
