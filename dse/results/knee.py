"""The balanced design of a Pareto front: the knee by achievement scalarisation with equal weights.

Objectives are turned into "lower is better" (throughput and fault tolerance negated), normalised to
[0, 1] over the front (0 = the front's best value, 1 = its worst), and the design minimising the
achievement scalarising function ``max_k (f_k / w_k)`` with equal weights ``w_k = 1/m`` is chosen: the
design whose worst normalised objective is the least bad. This is pymoo's compromise-programming
recipe for multi-criteria decision making (pymoo.org, "Multi-Criteria Decision Making", ASF).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pymoo.decomposition.asf import ASF

from ..model.objectives import OBJECTIVES


def minimised(df: pd.DataFrame, objectives: list[str]) -> np.ndarray:
    """Objective matrix of a table with every objective oriented for minimisation."""
    return np.column_stack([OBJECTIVES[o][1] * df[OBJECTIVES[o][0]].to_numpy(float) for o in objectives])


def normalised(F: np.ndarray) -> np.ndarray:
    """Each column scaled to [0, 1] between its best (min) and worst (max); flat columns become 0."""
    ideal, nadir = F.min(axis=0), F.max(axis=0)
    span = np.where(nadir > ideal, nadir - ideal, 1.0)
    return (F - ideal) / span


def knee_index(pareto: pd.DataFrame, objectives: list[str]) -> int | None:
    """Row position of the balanced design in ``pareto`` (None for an empty front)."""
    if pareto.empty:
        return None
    nF = normalised(minimised(pareto, objectives))
    weights = np.full(len(objectives), 1.0 / len(objectives))
    return int(np.argmin(ASF().do(nF, weights)))
