"""Multi-objective search over a study's design space with pymoo, one generation at a time.

`Search` holds everything a running search is: the pymoo algorithm (with its random generator), the
problem with every evaluation so far, and the convergence record. It pickles without its evaluation
engine (the Numba evaluator or a Dask client), which is how dse.search.checkpoint saves and resumes it: the
same study and seed give the same evaluations in the same order, whether the run was interrupted or
not, serial or on Dask. Every evaluated design is kept, in evaluation order, for the results folder.

Given the prepared study (`run_search`'s ``prepared``; a study without a ``system`` section) the search
also starts from the EPLB-style seed (dse.search.baseline: the first design of generation 0, reported as
``SearchOutcome.baseline``, the baseline to beat) and, for pymoo's algorithms, replaces a quarter of
each generation's offspring (``GUIDED_SHARE``) by guided neighbours of the designs of lowest latency
(dse.search.guided): evaluations per generation stay the population. ``search.encoding: role`` makes the
algorithm vary roles and per-layer deviations (dse.search.roles), decoded to the space's genes before
evaluation: every evaluation is kept as the space's genes either way.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from pymoo.core.algorithm import Algorithm
from pymoo.core.problem import Problem

from ..model.evaluator import Evaluator
from ..model.metrics import METRICS
from ..model.objectives import OBJECTIVES, constraint_matrix, constraint_names, objective_matrix, pareto_front
from ..study.spec import Study
from . import checkpoint
from .algorithms import make_algorithm
from .baseline import eplb_seed
from .guided import Guide
from .hypervolume import Convergence, reference_point
from .roles import RoleEncoding
from .variables import as_integers, bounds

__all__ = ["OBJECTIVES", "constraint_matrix", "objective_matrix", "pareto_front", "DesignProblem", "Search",
           "SearchOutcome", "GenerationReport", "run_search"]

#: evaluates decision vectors: ``engine(X) -> DataFrame`` with the evaluator's metric columns
#: (``evaluator.metric_names``: dse.system.SYSTEM_METRICS; dse.model.metrics.METRICS for a bare package evaluator)
Engine = Callable[[np.ndarray], pd.DataFrame]
#: share of each generation's offspring replaced by guided neighbours (module docstring)
GUIDED_SHARE = 0.25


def metric_names(evaluator) -> list[str]:
    """The metric columns an evaluator returns."""
    return list(getattr(evaluator, "metric_names", METRICS))


def first_occurrences(rows: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct row, in order: ``np.sort(np.unique(rows, axis=0,
    return_index=True)[1])``, which sorts the rows as records of one field per gene (0.13 s for nine
    DeepSeek-V3 per-layer seeds of 30,012 genes) where a set of Python tuples takes milliseconds."""
    seen: set[tuple] = set()
    first = []
    for i, row in enumerate(np.asarray(rows).tolist()):
        key = tuple(row)
        if key not in seen:
            seen.add(key)
            first.append(i)
    return np.array(first, np.int64)


class DesignProblem(Problem):
    """pymoo problem over the study's decision vector; records every evaluation in order."""

    encoding: RoleEncoding | None = None       # problems pickled before encodings vary the space's genes

    def __init__(self, space, study: Study, engine: Engine, encoding: RoleEncoding | None = None,
                 seeds: np.ndarray | None = None):
        lower, upper = bounds(encoding if encoding is not None else space)
        super().__init__(n_var=len(lower), n_obj=len(study.search.objectives),
                         n_ieq_constr=len(constraint_names(study)), xl=lower, xu=upper, vtype=int)
        self.study, self.engine, self.encoding = study, engine, encoding
        self.space_bounds = bounds(space)
        self.columns = metric_names(engine)
        if seeds is None:
            seeds = getattr(space, "seeds", None)   # heuristic starting designs (dse.model.heuristics)
        if seeds is not None and len(seeds):
            seeds = seeds if encoding is None else encoding.encode(seeds)
            seeds = seeds[first_occurrences(seeds)]     # distinct, in order
        self.seeds = seeds
        self.batches: list[tuple[np.ndarray, np.ndarray]] = []     # (X, metrics array) per evaluation call

    def genes(self, X: np.ndarray) -> np.ndarray:
        """The space's gene vectors of the algorithm's vectors ``X``."""
        X = as_integers(X)
        return X if self.encoding is None else self.encoding.decode(X)

    def _evaluate(self, X, out, *args, **kwargs):
        X = self.genes(X)
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
    baseline: int | None = None   # row of X holding the EPLB-style seed (dse.search.baseline), if seeded


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
    """A search in progress. Build with `Search(study, evaluator, seed, prepared)`, then `step()` until `done`;
    ``prepared`` (the study's dse.model.prepare.Prepared) adds the EPLB-style seed and guided moves."""

    baseline: np.ndarray | None = None    # searches pickled before the seed and guide have neither
    guide: Guide | None = None

    def __init__(self, study: Study, evaluator: Evaluator, seed: int | None = None, prepared=None):
        s = study.search
        self.study = study
        self.seed = s.seed if seed is None else seed
        space = evaluator.space
        structured = prepared is not None and study.system is None
        encoding = None
        if getattr(s, "encoding", "unit") == "role":
            tables = prepared.tables if prepared is not None else evaluator.package_evaluators()[0].tables
            encoding = RoleEncoding(space, tables)
        seeds = space.seeds
        if structured:
            seed_x = eplb_seed(prepared)
            seeds = seed_x[None, :] if seeds is None or not len(seeds) else np.vstack([seed_x, seeds])
            # the seed as the search's first population holds it (the role encoding may not hold it whole)
            self.baseline = seed_x if encoding is None else encoding.decode(encoding.encode(seed_x))[0]
        self.algorithm, self.total = make_algorithm(s.algorithm, encoding or space, len(s.objectives), s.population,
                                                    s.generations, layer_moves=s.layer_moves)
        self.problem = DesignProblem(space, study, evaluator, encoding, seeds)
        self.algorithm.setup(self.problem, termination=("n_gen", self.total), seed=self.seed)
        self.reference = reference_point(study, evaluator)
        self.convergence = Convergence(study, self.reference)
        self.batch_generation: list[int] = []          # generation of each problem batch
        self.generation = 0                             # generations completed
        self.guided = structured and isinstance(self.algorithm, Algorithm)
        self.expanded: set[bytes] = set()               # designs already given their full guided neighbour
        self.attach(evaluator, prepared)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["guide"] = None           # holds the prepared study: rebuilt by `attach`
        return state

    @property
    def done(self) -> bool:
        return not self.algorithm.has_next()

    def attach(self, engine: Engine, prepared=None) -> None:
        """Evaluate with ``engine`` from now on (after unpickling, or to switch to a Dask cluster);
        ``prepared``: the study's Prepared, for the guided moves."""
        self.problem.engine = engine
        if engine is not None and not self.problem.batches:
            self.problem.columns = metric_names(engine)
        if prepared is not None and getattr(self, "guided", False):
            self.guide = Guide(prepared)

    def step(self) -> GenerationReport | None:
        """Run one generation; None when the algorithm stopped without evaluating anything."""
        seen = len(self.problem.batches)
        if self.guide is not None and self.generation > 0:
            self._guided_generation()
        else:
            self.algorithm.next()
        new = self.problem.batches[seen:]
        if not new:
            return None
        self.batch_generation += [self.generation] * len(new)
        metrics = pd.DataFrame(np.vstack([m for _, m in new]), columns=self.problem.columns)
        row = self.convergence.update(self.generation, metrics)
        self.generation += 1
        return GenerationReport(total=self.total, **row)

    def _guided_generation(self) -> None:
        """pymoo's ``next`` (infill, evaluate, advance) with a share of the offspring replaced by guided
        neighbours of the population's designs of lowest latency (module docstring)."""
        algorithm = self.algorithm
        infills = algorithm.infill()
        if infills is None:
            algorithm.advance()
            return
        X = infills.get("X")
        k = int(round(GUIDED_SHARE * len(X)))
        children = self._guided_children(k) if k else []
        if len(children):
            X = X.copy()
            X[len(X) - len(children):] = children
            infills.set("X", X)
        algorithm.evaluator.eval(self.problem, infills, algorithm=algorithm)
        algorithm.advance(infills=infills)

    def _guided_children(self, k: int) -> np.ndarray:
        """Up to ``k`` guided neighbours (the algorithm's vectors) of the population's best latencies:
        each design's full neighbour once, then neighbours moving half its stages at random."""
        pop = self.algorithm.pop
        objectives = list(self.study.search.objectives)
        j = objectives.index("latency") if "latency" in objectives else 0
        F, CV = pop.get("F"), pop.get("CV")
        order = np.lexsort((F[:, j], CV[:, 0] > 0))[:k]
        parents = self.problem.genes(pop.get("X")[order])
        rng = np.random.default_rng([self.seed, self.generation])
        children = []
        for x in parents:
            key = x.tobytes()
            share = 0.5 if key in self.expanded else 1.0
            self.expanded.add(key)
            child = self.guide.neighbours(x[None, :], share, rng)[0]
            if not np.array_equal(child, x):
                children.append(child)
        if not children:
            return np.empty((0, self.problem.n_var), np.int64)
        children = np.array(children)
        if self.problem.encoding is not None:
            children = self.problem.encoding.encode(children, self.guide.work)
        return children

    def outcome(self) -> SearchOutcome:
        batches = self.problem.batches
        X = np.vstack([x for x, _ in batches])
        metrics = pd.DataFrame(np.vstack([m for _, m in batches]), columns=self.problem.columns)
        generation = np.concatenate([np.full(len(x), g) for (x, _), g in zip(batches, self.batch_generation)])
        F = objective_matrix(metrics, self.study.search.objectives)
        G = constraint_matrix(metrics, self.study)
        baseline = None
        if self.baseline is not None:
            hit = np.flatnonzero((generation == 0) & (X == self.baseline).all(axis=1))
            baseline = int(hit[0]) if len(hit) else None
        return SearchOutcome(X=X, metrics=metrics, generation=generation, pareto_index=pareto_front(F, G),
                             convergence=self.convergence.table(), reference_point=dict(self.reference),
                             baseline=baseline)


def run_search(evaluator: Evaluator, study: Study, seed: int | None = None,
               on_generation: Callable[[GenerationReport], None] | None = None,
               engine: Engine | None = None, checkpoint_dir: str | Path | None = None,
               resume: Search | None = None, prepared=None) -> SearchOutcome:
    """Run the study's algorithm to the end and return every evaluation and the front.

    ``engine`` evaluates (default: ``evaluator`` itself); ``checkpoint_dir`` receives the search state
    every ``search.checkpoint_every`` generations and after the last; ``resume`` continues a `Search`
    read back by `checkpoint.load`. ``on_generation`` is called after each generation (after its
    checkpoint, so interrupting it loses nothing saved). ``prepared``: the study's Prepared, for the
    EPLB-style seed and the guided moves (module docstring).
    """
    search = resume if resume is not None else Search(study, evaluator, seed, prepared)
    search.attach(engine if engine is not None else evaluator, prepared)
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
