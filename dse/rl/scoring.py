"""One number per design for reinforcement learning: the study's objectives scalarised.

Each objective becomes a cost, lower better (dse.search.hypervolume.to_cost: throughput and other rates
as their inverse, fault tolerance as the fraction lost), scaled to the range the reference designs span
(a sample of random feasible placements: their best cost 0, their worst 1), and averaged with the given
weights (equal unless given). The score is minus that average: higher is better, between -1 and 0 for
designs like the references, above 0 for designs better than all of them in every objective. Below -1
(worse than every reference) it is squashed smoothly into [1 - PENALTY, -1] (`squash`), so that a design
that breaks a constraint (memory, budgets, reticle), scoring ``-PENALTY * (1 + total violation)``,
always scores below every design that does not.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import StudyError
from ..model.objectives import constraint_matrix
from ..search.hypervolume import to_cost

PENALTY = 10.0


class Scorer:
    """``score(metrics) -> array``: the scalarised objectives of evaluated designs (module docstring)."""

    def __init__(self, study, reference: pd.DataFrame, weights: dict[str, float] | None = None):
        self.study = study
        self.objectives = list(study.search.objectives)
        weights = weights or {}
        unknown = [k for k in weights if k not in self.objectives]
        if unknown:
            raise StudyError(f"weight for {unknown[0]!r}, which is not among the study's objectives "
                             f"({', '.join(self.objectives)})", key="weights")
        w = np.array([float(weights.get(o, 1.0)) for o in self.objectives])
        if not (np.isfinite(w).all() and (w >= 0).all() and w.sum() > 0):
            raise StudyError("weights must be finite, >= 0 and not all 0", key="weights")
        self.weights = w / w.sum()
        costs = np.where(np.isfinite(c := self._costs(reference)), c, np.nan)
        lo, hi = np.nanmin(costs, axis=0), np.nanmax(costs, axis=0)
        self.low = np.where(np.isfinite(lo), lo, 0.0)
        span = hi - lo
        self.span = np.where(np.isfinite(span) & (span > 0), span, np.where(np.abs(self.low) > 0, np.abs(self.low), 1.0))

    def _costs(self, metrics: pd.DataFrame) -> np.ndarray:
        return np.column_stack([to_cost(o, metrics[self._column(o)].to_numpy(float)) for o in self.objectives])

    @staticmethod
    def _column(objective: str) -> str:
        from ..model.objectives import OBJECTIVES
        return OBJECTIVES[objective][0]

    def score(self, metrics: pd.DataFrame) -> np.ndarray:
        costs = (self._costs(metrics) - self.low) / self.span
        value = -(costs * self.weights).sum(axis=1)
        violation = np.maximum(constraint_matrix(metrics, self.study), 0.0).sum(axis=1)
        bad = (violation > 0) | ~np.isfinite(value)
        return np.where(bad, -PENALTY * (1.0 + np.where(np.isfinite(violation), violation, 1e6)), squash(value))


def squash(value: np.ndarray) -> np.ndarray:
    """``value`` above -1 as it is; below, -1 - (PENALTY - 2)(1 - exp(-excess / (PENALTY - 2))): monotone,
    slope 1 at -1, never below 1 - PENALTY (reached only in rounding), a whole point above any penalty."""
    room = PENALTY - 2.0
    excess = np.maximum(-1.0 - value, 0.0)
    return np.where(value >= -1.0, value, -1.0 - room * -np.expm1(-excess / room))
