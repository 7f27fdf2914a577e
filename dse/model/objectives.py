"""Objectives and constraints of a study as the matrices pymoo minimises, and the Pareto front.

Objectives are minimised; those that are better high (throughput, fault tolerance, quality) are negated for
pymoo and reported with their natural sign. Memory capacity, unplaced experts, unit copies without a
memory path (dse.model.memory_path) and the study's budgets are pymoo constraints (``G <= 0``
feasible), so infeasible designs are ranked by violation, not hidden behind penalties.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from arch.technology import reticle_limit_mm2

from ..study.spec import Study
from .metrics import M_SHORT, M_UNPLACED, METRICS, N_KERNEL_METRICS
from .phases import PHASES, phase_constraints
from .study_quality import study_quality

#: metrics measured only when the study asks for Monte Carlo failure sets (faults.monte_carlo.samples > 0)
MONTE_CARLO_METRICS = ("mc_retained_frac", "mc_survival_frac")

#: objective name -> (metric column, sign for minimisation) of every study; phases add their own
#: (dse.model.phases)
BASE_OBJECTIVES = {
    "latency": ("latency_s", 1.0),
    "throughput": ("throughput_tok_s", -1.0),
    "energy": ("energy_j_per_token", 1.0),
    "area": ("area_mm2", 1.0),
    "cost": ("cost_usd", 1.0),
    "fault_tolerance": ("fault_tolerance_frac", -1.0),
    "carbon": ("carbon_g_per_token", 1.0),
    # the score kept (dse.model.study_quality.QualityEvaluator's column), higher is better
    "quality": ("quality_frac", -1.0),
    # a study's ``runtime`` section (dse.runtime.search): the design through a scenario of drift and failures
    "tokens_over_horizon": ("tokens_over_horizon", -1.0),
    "availability": ("availability_frac", -1.0),
    "migration_energy": ("migration_energy_j", 1.0),
}


class ObjectiveTable(Mapping):
    """Objective name -> ``pick(column, sign)``: the base objectives and every registered phase's, read
    live from the registry (nothing is copied at import)."""

    def __init__(self, pick):
        self.pick = pick

    def entries(self) -> dict:
        table = dict(BASE_OBJECTIVES)
        for phase in PHASES.values():
            table.update(phase.objectives)
        return table

    def __getitem__(self, name: str):
        return self.pick(*self.entries()[name])

    def __iter__(self):
        return iter(self.entries())

    def __len__(self) -> int:
        return len(self.entries())


#: objective name -> (metric column, sign for minimisation)
OBJECTIVES = ObjectiveTable(lambda column, sign: (column, sign))
#: metric column of each objective
OBJECTIVE_COLUMNS = ObjectiveTable(lambda column, sign: column)

GIB = 2**30
_BUDGETS = (("area_mm2", "area_mm2"), ("peak_power_w", "peak_power_w"), ("cost_usd", "cost_usd"))


def constraint_names(study: Study) -> list[str]:
    """One name per column of `constraint_matrix`."""
    c = study.constraints
    return ["capacity_short_gib", "unplaced_experts", "units_without_memory", "reticle_over"] + \
        [f"{budget}_over" for budget, _ in _BUDGETS if getattr(c, budget) is not None] + \
        (["quality_short"] if c.min_quality is not None else []) + \
        [constraint.name for constraint in phase_constraints(study)]


def constraint_matrix(metrics: pd.DataFrame, study: Study) -> np.ndarray:
    """Violations (> 0 is infeasible): memory short (GiB), experts without a chiplet, unit copies on a
    chiplet with no memory path, a die larger than the lithography reticle
    (arch.technology.reticle_limit_mm2), budgets, the quality short of ``constraints.min_quality``
    (dse.model.study_quality), and the study's phase's own (dse.model.phases)."""
    c = study.constraints
    cols = [metrics["capacity_short_bytes"].to_numpy() / GIB, metrics["unplaced_experts"].to_numpy(float),
            metrics["units_without_memory"].to_numpy(float),
            metrics["max_die_mm2"].to_numpy() / reticle_limit_mm2() - 1.0]
    for budget, column in _BUDGETS:
        limit = getattr(c, budget)
        if limit is not None:
            cols.append(metrics[column].to_numpy() / limit - 1.0)
    if c.min_quality is not None:     # each design's quality (its precisions'), else the study's (docs/quality.md)
        kept = metrics["quality_frac"].to_numpy() if "quality_frac" in metrics else study_quality(study).quality_frac
        cols.append(c.min_quality - np.broadcast_to(kept, (len(metrics),)))
    cols += [constraint.violation(metrics, study) for constraint in phase_constraints(study)]
    return np.column_stack(cols)


#: a budget's bound for `fault_limits`: a little above the budget, where the ``metric / budget - 1``
#: of `constraint_matrix` is surely positive in floating point (> 1 + 2**-51 before rounding)
BUDGET_MARGIN = 1.0 + 2.0**-50


def fault_limits(study: Study) -> np.ndarray:
    """Bounds on the population kernel's metric columns (dse.model.contract.FaultsWithin, +inf: none) above
    which `constraint_matrix` surely marks a design infeasible: a capacity shortfall above the smallest
    normal float (divided by 2**30, still positive), any unplaced expert, and each budget times
    `BUDGET_MARGIN` (a normal, finite budget). Constraints on other columns are not bounded here: a design
    within these bounds may still be infeasible."""
    limits = np.full(N_KERNEL_METRICS, np.inf)
    limits[M_SHORT] = np.finfo(float).tiny
    limits[M_UNPLACED] = 0.0
    for budget, column in _BUDGETS:
        limit = getattr(study.constraints, budget)
        if limit is not None and np.finfo(float).tiny <= limit and np.isfinite(limit * BUDGET_MARGIN):
            limits[METRICS.index(column)] = limit * BUDGET_MARGIN
    return limits


def violations(metrics: pd.DataFrame, study: Study) -> list[dict[str, float]]:
    """Per design (row of ``metrics``), the constraints it violates: name (`constraint_names`) -> violation
    (> 0, or NaN), read from `constraint_matrix`; an empty dict is a feasible design, as the search and
    ``dse run`` judge it."""
    G = constraint_matrix(metrics, study)
    names = constraint_names(study)
    return [{names[j]: float(g[j]) for j in range(len(names)) if not g[j] <= 0} for g in G]


def objective_matrix(metrics: pd.DataFrame, objectives: list[str]) -> np.ndarray:
    """Objective values with the sign pymoo minimises."""
    return np.column_stack([OBJECTIVES[o][1] * metrics[OBJECTIVES[o][0]].to_numpy() for o in objectives])


def non_dominated(F: np.ndarray) -> np.ndarray:
    """Indices of the distinct non-dominated rows of F (minimised; first of equal rows kept), sorted."""
    if len(F) == 0:
        return np.zeros(0, np.int64)
    front = np.sort(np.asarray(NonDominatedSorting().do(F, only_non_dominated_front=True), dtype=np.int64))
    _, first = np.unique(F[front], axis=0, return_index=True)
    return np.sort(front[first])


def pareto_front(F: np.ndarray, G: np.ndarray) -> np.ndarray:
    """Indices of feasible, non-dominated, distinct rows (first occurrence kept)."""
    feasible = np.flatnonzero((G <= 0).all(axis=1))
    return feasible[non_dominated(F[feasible])]
