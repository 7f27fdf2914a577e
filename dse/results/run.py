"""One study from start to end: prepare (dse.system) -> search (dse.search) -> a `StudyResult`."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import StudyError
from ..model.prepare import Prepared
from ..search import checkpoint
from ..search.distributed import evaluation_engine
from ..search.loop import GenerationReport, SearchOutcome, run_search
from ..search.screening import exact_again, screened
from ..study.spec import Study
from ..system.prepare import prepare
from .result import StudyResult, build_result


def run_study(study: Study, seed: int | None = None,
              on_generation: Callable[[GenerationReport], None] | None = None,
              prepared: Prepared | None = None, *, checkpoint_dir: str | Path | None = None,
              workers: int | None = None, scheduler: str | None = None) -> StudyResult:
    """Search the study's space and return every evaluation and the Pareto front.

    ``checkpoint_dir``: save the search state there every ``search.checkpoint_every`` generations
    (see dse.search.checkpoint; `resume_study` continues it). ``workers``: evaluate on a local Dask cluster of
    that many processes; ``scheduler``: on the Dask cluster at that address (see dse.search.distributed).
    The result is the same either way.
    """
    p = prepared or prepare(study)
    if seed is not None:
        study = study.model_copy(update={"search": study.search.model_copy(update={"seed": seed})})
    with screened(p.evaluator, study.search.screening), evaluation_engine(p.evaluator, workers, scheduler) as engine:
        outcome = run_search(p.evaluator, study, on_generation=on_generation, engine=engine,
                             checkpoint_dir=checkpoint_dir, prepared=p)
    return _result(study, p, outcome)


def resume_study(path: str | Path, on_generation: Callable[[GenerationReport], None] | None = None,
                 prepared: Prepared | None = None, *, workers: int | None = None,
                 scheduler: str | None = None, trust: bool = False) -> StudyResult:
    """Continue the search checkpointed for results folder (or checkpoint folder) ``path`` to its end.

    The checkpoint must be signed by this user's runs unless ``trust`` (see dse.search.checkpoint)."""
    directory = checkpoint.locate(path)
    search = checkpoint.load(directory, trust=trust)
    study = search.study
    p = prepared or prepare(study)
    problem = search.problem
    bounds = [getattr(problem, "space_bounds", (problem.xl, problem.xu))]
    if problem.encoding is None:            # the algorithm varies the space's genes themselves
        bounds.append((problem.xl, problem.xu))
    if not all(np.array_equal(p.space.lower, lo) and np.array_equal(p.space.upper, hi) for lo, hi in bounds):
        raise StudyError(f"checkpoint {directory} was made for a different design space than the study now gives "
                         "(changed toolkit or model files?); start the study again")
    with screened(p.evaluator, study.search.screening), evaluation_engine(p.evaluator, workers, scheduler) as engine:
        outcome = run_search(p.evaluator, study, on_generation=on_generation, engine=engine,
                             checkpoint_dir=directory, resume=search, prepared=p)
    return _result(study, p, outcome)


def _result(study: Study, p: Prepared, outcome: SearchOutcome) -> StudyResult:
    """The result of a finished search; a screened search's front and last generation evaluated exactly."""
    screening, exact = None, None
    if study.search.screening:
        outcome, report, exact = exact_again(p.evaluator, study, outcome)
        screening = report.as_dict()
    designs, placements = p.evaluator.designs_and_placements(outcome.X)
    result = build_result(study, outcome.X, outcome.metrics, outcome.generation, outcome.pareto_index, designs,
                          p.tables.kind_names, convergence=outcome.convergence,
                          reference_point=outcome.reference_point, flats=placements)
    if exact is not None:
        result.evaluations["fidelity"] = np.where(exact, "exact", "screening")
        result.screening = screening
    if outcome.baseline is not None:
        result.baseline = str(result.evaluations["design_id"].iloc[outcome.baseline])
    result.prepared = p
    return result
