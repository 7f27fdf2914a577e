"""Multi-fidelity search (study key ``search.screening``): screen with a cheap evaluation, report exact ones.

With screening on, the search evaluates every design at the screening fidelity: each chiplet failure
re-maps and re-costs the design's compute and memory as the exact model does, but its hand-offs keep the
intact design's routes and link loads (dse.model.failures, ``screen``), about half the cost of a failure.
The designs the results folder reports as results, the screened front and the final population, are then
evaluated again exactly (`exact_again`), and the front is taken from their exact values: every design on
it, and every figure the report shows of it, is exact. What screening changed on those designs (each
metric's largest and mean difference, how many front designs it moved) is the `ScreeningReport` the
results folder keeps as ``screening.json``; the designs left at the screening fidelity are marked in
``evaluations.csv`` (column ``fidelity``).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..model.contract import PopulationEvaluator
from ..model.objectives import constraint_matrix, objective_matrix, pareto_front
from ..study.spec import Study
from .loop import SearchOutcome


@contextmanager
def screened(evaluator: PopulationEvaluator, on: bool = True):
    """Evaluate failures at the screening fidelity inside the block (the evaluators' own setting after)."""
    packages = evaluator.package_evaluators()
    before = [package.screening for package in packages]
    for package in packages:
        package.screening = bool(on)
    try:
        yield evaluator
    finally:
        for package, setting in zip(packages, before):
            package.screening = setting


@dataclass
class ScreeningReport:
    """What the exact evaluation changed on the designs reported (metric differences in the metric's unit)."""

    reevaluated: int                      # designs evaluated again exactly (screened front + last generation)
    front_screened: int                   # front size by the screened values
    front_exact: int                      # front size by the exact values (the reported front)
    front_kept: int                       # designs on both
    front_changed_frac: float             # 1 - kept / designs on either
    max_abs_error: dict                   # metric -> largest |screened - exact|
    mean_abs_error: dict                  # metric -> mean |screened - exact|

    def as_dict(self) -> dict:
        return asdict(self)


def exact_again(evaluator, study: Study, outcome: SearchOutcome) -> tuple[SearchOutcome, ScreeningReport, np.ndarray]:
    """The outcome with its screened front and final population evaluated exactly and the front taken from
    those exact values; the report; and per evaluation whether it is exact (module docstring)."""
    last = np.flatnonzero(outcome.generation == outcome.generation.max()) if len(outcome.generation) else []
    rows = np.union1d(outcome.pareto_index, last).astype(np.int64)
    with screened(evaluator, False):
        exact = evaluator(outcome.X[rows])
    metrics = outcome.metrics.copy()
    before = metrics.iloc[rows].reset_index(drop=True)
    exact = exact[list(metrics.columns)].reset_index(drop=True)
    difference = (before - exact).abs()
    finite = np.isfinite(before.to_numpy(float)) & np.isfinite(exact.to_numpy(float))
    changed = [c for j, c in enumerate(metrics.columns)
               if (difference[c].to_numpy()[finite[:, j]] > 0).any()]
    metrics.iloc[rows, :] = exact.to_numpy()
    objectives = study.search.objectives
    front = rows[pareto_front(objective_matrix(exact, objectives), constraint_matrix(exact, study))]
    kept = np.intersect1d(front, outcome.pareto_index)
    either = np.union1d(front, outcome.pareto_index)
    report = ScreeningReport(
        reevaluated=len(rows), front_screened=len(outcome.pareto_index), front_exact=len(front),
        front_kept=len(kept), front_changed_frac=float(1.0 - len(kept) / len(either)) if len(either) else 0.0,
        max_abs_error={c: float(difference[c].to_numpy()[finite[:, j]].max())
                       for j, c in enumerate(metrics.columns) if c in changed},
        mean_abs_error={c: float(difference[c].to_numpy()[finite[:, j]].mean())
                        for j, c in enumerate(metrics.columns) if c in changed})
    is_exact = np.zeros(len(outcome.X), bool)
    is_exact[rows] = True
    return replace(outcome, metrics=metrics, pareto_index=np.sort(front)), report, is_exact
