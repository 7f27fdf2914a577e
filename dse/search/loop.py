"""Multi-objective search over a study's design space with pymoo, one generation at a time.

`Search` holds everything a running search is: the pymoo algorithm (with its random generator), the
problem with every evaluation so far, and the convergence record. It pickles without its evaluation
engine (the Numba evaluator or a Dask client), which is how dse.search.checkpoint saves and resumes it: the
same study and seed give the same evaluations in the same order, whether the run was interrupted or
not, serial or on Dask. Every evaluated design is kept, in evaluation order, for the results folder.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from pymoo.core.problem import Problem

from ..model.evaluator import Evaluator
from ..model.metrics import METRICS
from ..model.objectives import OBJECTIVES, constraint_matrix, constraint_names, objective_matrix, pareto_front
from ..study.spec import Study
from . import checkpoint
from .algorithms import make_algorithm
from .hypervolume import Convergence, reference_point
from .variables import as_integers, bounds

__all__ = ["OBJECTIVES", "constraint_matrix", "objective_matrix", "pareto_front", "DesignProblem", "Search",
           "SearchOutcome", "GenerationReport", "run_search"]

#: evaluates decision vectors: ``engine(X) -> DataFrame`` with the evaluator's metric columns
#: (``evaluator.metric_names``: dse.system.SYSTEM_METRICS; dse.model.metrics.METRICS for a bare package evaluator)
Engine = Callable[[np.ndarray], pd.DataFrame]


def metric_names(evaluator) -> list[str]:
    """The metric columns an evaluator returns."""
    return list(getattr(evaluator, "metric_names", METRICS))


class DesignProblem(Problem):
    """pymoo problem over the study's decision vector; records every evaluation in order."""

    def __init__(self, space, study: Study, engine: Engine):
        lower, upper = bounds(space)
        super().__init__(n_var=len(lower), n_obj=len(study.search.objectives),
                         n_ieq_constr=len(constraint_names(study)), xl=lower, xu=upper, vtype=int)
        self.study, self.engine = study, engine
        self.columns = metric_names(engine)
        self.seeds = getattr(space, "seeds", None)     # heuristic starting designs (dse.model.heuristics)
        self.batches: list[tuple[np.ndarray, np.ndarray]] = []     # (X, metrics array) per evaluation call

    def _evaluate(self, X, out, *args, **kwargs):
        X = as_integers(X)
        metrics = self.engine(X)
        self.batches.append((X, metrics[self.columns].to_numpy()))
        out["F"] = objective_matrix(metrics, self.study.search.objectives)
        out["G"] = constraint_matrix(metrics, self.study)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["engine"] = None          # the Numba evaluator / Dask client is rebuilt, not pickled
        return state


@dataclass
class SearchOutcome:
    X: np.ndarray                 # every evaluated decision vector, in evaluation order
    metrics: pd.DataFrame         # their metrics
    generation: np.ndarray        # generation each was evaluated in (0 = initial population)
    pareto_index: np.ndarray      # rows of X on the feasible non-dominated front
    convergence: pd.DataFrame     # one row per generation: evaluations, feasible, front_size, hypervolume
    reference_point: dict         # objective -> value bounding the hypervolume (metric units)


@dataclass
class GenerationReport:
    """Progress after one generation (``generation`` counts from 0)."""

    generation: int
    total: int
    evaluations: int
    feasible: int
    front_size: int
    hypervolume: float


class Search:
    """A search in progress. Build with `Search(study, evaluator, seed)`, then `step()` until `done`."""

    def __init__(self, study: Study, evaluator: Evaluator, seed: int | None = None):
        s = study.search
        self.study = study
        self.seed = s.seed if seed is None else seed
        self.algorithm, self.total = make_algorithm(s.algorithm, evaluator.space, len(s.objectives), s.population,
                                                    s.generations, layer_moves=s.layer_moves)
        self.problem = DesignProblem(evaluator.space, study, evaluator)
        self.algorithm.setup(self.problem, termination=("n_gen", self.total), seed=self.seed)
        self.reference = reference_point(study, evaluator)
        self.convergence = Convergence(study, self.reference)
        self.batch_generation: list[int] = []          # generation of each problem batch
        self.generation = 0                             # generations completed

    @property
    def done(self) -> bool:
        return not self.algorithm.has_next()

    def attach(self, engine: Engine) -> None:
        """Evaluate with ``engine`` from now on (after unpickling, or to switch to a Dask cluster)."""
        self.problem.engine = engine
        if engine is not None and not self.problem.batches:
            self.problem.columns = metric_names(engine)

    def step(self) -> GenerationReport | None:
        """Run one generation; None when the algorithm stopped without evaluating anything."""
        seen = len(self.problem.batches)
        self.algorithm.next()
        new = self.problem.batches[seen:]
        if not new:
            return None
        self.batch_generation += [self.generation] * len(new)
        metrics = pd.DataFrame(np.vstack([m for _, m in new]), columns=self.problem.columns)
        row = self.convergence.update(self.generation, metrics)
        self.generation += 1
        return GenerationReport(total=self.total, **row)

    def outcome(self) -> SearchOutcome:
        batches = self.problem.batches
        X = np.vstack([x for x, _ in batches])
        metrics = pd.DataFrame(np.vstack([m for _, m in batches]), columns=self.problem.columns)
        generation = np.concatenate([np.full(len(x), g) for (x, _), g in zip(batches, self.batch_generation)])
        F = objective_matrix(metrics, self.study.search.objectives)
        G = constraint_matrix(metrics, self.study)
        return SearchOutcome(X=X, metrics=metrics, generation=generation, pareto_index=pareto_front(F, G),
                             convergence=self.convergence.table(), reference_point=dict(self.reference))


def run_search(evaluator: Evaluator, study: Study, seed: int | None = None,
               on_generation: Callable[[GenerationReport], None] | None = None,
               engine: Engine | None = None, checkpoint_dir: str | Path | None = None,
               resume: Search | None = None) -> SearchOutcome:
    """Run the study's algorithm to the end and return every evaluation and the front.

    ``engine`` evaluates (default: ``evaluator`` itself); ``checkpoint_dir`` receives the search state
    every ``search.checkpoint_every`` generations and after the last; ``resume`` continues a `Search`
    read back by `checkpoint.load`. ``on_generation`` is called after each generation (after its
    checkpoint, so interrupting it loses nothing saved).
    """
    search = resume if resume is not None else Search(study, evaluator, seed)
    search.attach(engine if engine is not None else evaluator)
    every = search.study.search.checkpoint_every
    while not search.done:
        report = search.step()
        if report is None:
            continue
        if checkpoint_dir is not None and every and (search.done or (report.generation + 1) % every == 0):
            checkpoint.save(checkpoint_dir, search)
        if on_generation:
            on_generation(report)
    search.attach(None)
    return search.outcome()
