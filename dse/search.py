"""Multi-objective search over a study's design space with pymoo.

Objectives are minimised; those that are better high (throughput, fault tolerance) are negated for
pymoo and reported with their natural sign. Budgets and memory capacity are pymoo constraints
(``G <= 0``), so infeasible designs are ranked by violation, not hidden behind penalties.
Every evaluated design is recorded, in evaluation order, for the results folder.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
from pymoo.algorithms.moo.nsga2 import NSGA2
from pymoo.core.problem import Problem
from pymoo.operators.crossover.sbx import SBX
from pymoo.operators.mutation.pm import PM
from pymoo.operators.repair.rounding import RoundingRepair
from pymoo.operators.sampling.rnd import IntegerRandomSampling
from pymoo.optimize import minimize
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from .evaluator import Evaluator
from .study import Study

#: objective name -> (metric column, sign for minimisation)
OBJECTIVES = {
    "latency": ("latency_s", 1.0),
    "throughput": ("throughput_tok_s", -1.0),
    "energy": ("energy_j_per_token", 1.0),
    "area": ("area_mm2", 1.0),
    "cost": ("cost_usd", 1.0),
    "fault_tolerance": ("fault_tolerance_frac", -1.0),
}
GIB = 2**30


def constraint_matrix(metrics: pd.DataFrame, study: Study) -> np.ndarray:
    """Violations (> 0 is infeasible): memory short (GiB), experts without a chiplet, budgets."""
    c = study.constraints
    cols = [metrics["capacity_short_bytes"].to_numpy() / GIB, metrics["unplaced_experts"].to_numpy(float)]
    for budget, column in ((c.area_mm2, "area_mm2"), (c.power_w, "power_w"), (c.cost_usd, "cost_usd")):
        if budget is not None:
            cols.append(metrics[column].to_numpy() / budget - 1.0)
    return np.column_stack(cols)


def objective_matrix(metrics: pd.DataFrame, objectives: list[str]) -> np.ndarray:
    return np.column_stack([OBJECTIVES[o][1] * metrics[OBJECTIVES[o][0]].to_numpy() for o in objectives])


class DesignProblem(Problem):
    """pymoo problem over the integer decision vector; records every evaluation."""

    def __init__(self, evaluator: Evaluator, study: Study):
        self.evaluator, self.study = evaluator, study
        space = evaluator.space
        n_constr = constraint_matrix(evaluator(np.atleast_2d(space.lower), with_faults=False), study).shape[1]
        super().__init__(n_var=space.n_var, n_obj=len(study.search.objectives), n_ieq_constr=n_constr,
                         xl=space.lower, xu=space.upper, vtype=int)
        self.X_seen: list[np.ndarray] = []
        self.metrics_seen: list[pd.DataFrame] = []

    def _evaluate(self, X, out, *args, **kwargs):
        X = np.asarray(np.rint(X), dtype=np.int64)
        metrics = self.evaluator(X)
        self.X_seen.append(X)
        self.metrics_seen.append(metrics)
        out["F"] = objective_matrix(metrics, self.study.search.objectives)
        out["G"] = constraint_matrix(metrics, self.study)


@dataclass
class SearchOutcome:
    X: np.ndarray                 # every evaluated decision vector, in evaluation order
    metrics: pd.DataFrame         # their metrics
    generation: np.ndarray        # generation each was evaluated in
    pareto_index: np.ndarray      # rows of X on the feasible non-dominated front


def pareto_front(F: np.ndarray, G: np.ndarray) -> np.ndarray:
    """Indices of feasible, non-dominated, distinct rows (first occurrence kept)."""
    feasible = np.where((G <= 0).all(axis=1))[0]
    if len(feasible) == 0:
        return feasible
    front = feasible[NonDominatedSorting().do(F[feasible], only_non_dominated_front=True)]
    _, first = np.unique(F[front], axis=0, return_index=True)
    return np.sort(front[first])


def run_search(evaluator: Evaluator, study: Study, seed: int | None = None,
               on_generation: Callable[[int, int], None] | None = None) -> SearchOutcome:
    """Run the study's algorithm; ``on_generation(done, total)`` reports progress."""
    s = study.search
    seed = s.seed if seed is None else seed
    problem = DesignProblem(evaluator, study)
    if s.algorithm == "random":
        rng = np.random.default_rng(seed)
        for g in range(s.generations):
            X = rng.integers(problem.xl, problem.xu + 1, size=(s.population, problem.n_var))
            problem.evaluate(X)
            if on_generation:
                on_generation(g + 1, s.generations)
    else:
        algorithm = NSGA2(pop_size=s.population, sampling=IntegerRandomSampling(),
                          crossover=SBX(prob=0.9, eta=15, vtype=float, repair=RoundingRepair()),
                          mutation=PM(eta=20, vtype=float, repair=RoundingRepair()),
                          eliminate_duplicates=True)

        def callback(alg):
            if on_generation:
                on_generation(alg.n_gen, s.generations)

        minimize(problem, algorithm, ("n_gen", s.generations), seed=seed, callback=callback, verbose=False)

    X = np.vstack(problem.X_seen)
    metrics = pd.concat(problem.metrics_seen, ignore_index=True)
    generation = np.concatenate([np.full(len(x), g) for g, x in enumerate(problem.X_seen)])
    F = objective_matrix(metrics, s.objectives)
    G = constraint_matrix(metrics, study)
    return SearchOutcome(X=X, metrics=metrics, generation=generation, pareto_index=pareto_front(F, G))
