"""Hypervolume of a front, normalised against the study's reference point: how a search converges.

Each objective is read as a non-negative cost whose best possible value is 0: latency_s,
energy_j_per_token, area_mm2 and cost_usd as they are; throughput as its inverse (seconds per token);
fault tolerance as the fraction of throughput lost (1 - fault_tolerance_frac), availability likewise
(1 - availability_frac). These transforms keep the order of every objective, so they keep Pareto
dominance. Dividing each cost by its value at the reference point maps the box between the ideal (all
costs 0) and the reference point onto the unit cube; the normalised hypervolume is the fraction of that
box the front dominates (Zitzler & Thiele 1998), between 0 and 1, computed exactly by moocore through
pymoo's HV indicator. Designs beyond the
reference point in any objective add nothing.

Reference point: ``search.reference_point`` gives it per objective in the metric's own unit; an
objective it leaves out gets 1.1 x the worst cost on the Pareto front (in all the study's objectives)
of a fixed sample of the space: `ANCHOR_SIZE` uniform designs drawn with `ANCHOR_SEED`, independent of
the search seed, feasible ones only when there are any. (For fault tolerance that may lie below 0: a
design keeping nothing after a failure still counts.) The reference thus depends on the study alone:
every algorithm and seed of a study is measured in the same box. A one-package decode or prefill study
whose objectives are all intact metrics (`INTACT_OBJECTIVES`) evaluates its sample without the failure
pass: those metrics and the constraints are the intact design's either way (only the fault columns,
``fault_tolerance_frac`` and its kin, come from the failures), so the reference point is the same. For the
same reason, such a study with a fault objective gives the failure pass to the designs that may be feasible
only, the pool's (a third of DeepSeek-V3 fault tolerance's sample is infeasible; issue 52): the sample is
evaluated once with `FaultsWithin` the bounds beyond which a design is surely infeasible
(dse.model.objectives.fault_limits; each design's intact pass runs once), and the pool reads its feasible
designs, whose metrics are those of the failure pass: the same pool, so the same reference point.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from pymoo.indicators.hv import HV

from ..errors import StudyError
from ..model.contract import FaultsWithin
from ..model.objectives import OBJECTIVES, constraint_matrix, fault_limits, non_dominated
from ..study.schema.search import FRACTION_OBJECTIVES
from ..study.spec import Study

ANCHOR_SIZE = 256
ANCHOR_SEED = 0
MARGIN = 1.1
#: objectives read from the intact design alone (the failure pass adds the fault columns only)
INTACT_OBJECTIVES = frozenset({"latency", "throughput", "energy", "area", "cost", "peak_power"})


def costs(metrics: pd.DataFrame, objectives: list[str]) -> np.ndarray:
    """Objectives as non-negative costs, lower better, 0 ideal (see module docstring)."""
    return np.column_stack([to_cost(o, metrics[OBJECTIVES[o][0]].to_numpy(float)) for o in objectives])


def _reciprocal(objective: str) -> bool:
    """Rates (throughput, goodput, max_rate_at_slo: better high, 0 worst) become costs as their inverse."""
    return OBJECTIVES[objective][1] < 0 and objective not in FRACTION_OBJECTIVES


def to_cost(objective: str, value):
    """Metric value of an objective -> cost (the inverse of `from_cost`)."""
    value = np.asarray(value, float)
    if _reciprocal(objective):
        with np.errstate(divide="ignore"):
            return np.where(value > 0, 1.0 / np.where(value > 0, value, 1.0), np.inf)
    if objective in FRACTION_OBJECTIVES:
        return 1.0 - value
    return value


def from_cost(objective: str, cost):
    """Cost -> metric value of an objective."""
    cost = np.asarray(cost, float)
    if _reciprocal(objective):
        return 1.0 / cost
    if objective in FRACTION_OBJECTIVES:
        return 1.0 - cost
    return cost


def _plain(study: Study) -> bool:
    """A one-package decode or prefill study: its constraints read the intact design's metrics only."""
    return study.system is None and study.runtime is None and study.workload.phase in ("decode", "prefill")


def needs_faults(study: Study) -> bool:
    """Whether the reference point's sample needs the failure pass (module docstring): a system, a
    serving, training or runtime study, or an objective outside `INTACT_OBJECTIVES`."""
    return not (_plain(study) and set(study.search.objectives) <= INTACT_OBJECTIVES)


def sample_metrics(study: Study, evaluator, X: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """The metrics of the reference point's sample ``X`` that its pool reads, and which designs are feasible:
    with the failure pass where `needs_faults`; for a plain study (`_plain`) only its feasible designs are
    read, and only the designs not surely infeasible get it (module docstring); without any feasible design,
    every design gets it."""
    faults = needs_faults(study)
    if not (faults and _plain(study)):
        metrics = evaluator(X, with_faults=faults)
        return metrics, (constraint_matrix(metrics, study) <= 0).all(axis=1)
    metrics = evaluator(X, with_faults=FaultsWithin(fault_limits(study)))
    feasible = (constraint_matrix(metrics, study) <= 0).all(axis=1)
    if not feasible.any():
        return evaluator(X, with_faults=True), feasible
    return metrics[feasible].reset_index(drop=True), np.ones(int(feasible.sum()), bool)


def reference_point(study: Study, evaluator) -> dict[str, float]:
    """The study's reference point, per objective in the metric's unit (see module docstring)."""
    s = study.search
    ref = {o: float(v) for o, v in s.reference_point.items()}
    missing = [o for o in s.objectives if o not in ref]
    if missing:
        space = evaluator.space
        rng = np.random.default_rng(ANCHOR_SEED)
        X = rng.integers(space.lower, np.asarray(space.upper) + 1, size=(ANCHOR_SIZE, space.n_var))
        metrics, feasible = sample_metrics(study, evaluator, X)
        C = costs(metrics, s.objectives)
        pool = C[feasible] if feasible.any() else C
        pool = pool[np.isfinite(pool).all(axis=1)]
        if not len(pool):
            raise StudyError(f"none of the {ANCHOR_SIZE} sampled designs has finite costs in "
                             f"{', '.join(missing)}; give those objectives here in their metric's unit",
                             key="search.reference_point")
        worst_front = pool[non_dominated(pool)].max(axis=0)
        worst = pool.max(axis=0)
        for j, o in enumerate(s.objectives):
            if o in ref:
                continue
            cost = MARGIN * (worst_front[j] if worst_front[j] > 0 else worst[j])
            if not cost > 0:     # every sampled design loses nothing on a failure: take "loses it all"
                cost = 1.0
            ref[o] = float(from_cost(o, cost))
    return {o: ref[o] for o in s.objectives}


class Convergence:
    """The feasible front found so far and its normalised hypervolume, updated one batch at a time."""

    def __init__(self, study: Study, reference: dict[str, float]):
        self.study = study
        self.objectives = list(study.search.objectives)
        self.reference = reference
        self.scale = np.array([to_cost(o, reference[o]) for o in self.objectives], float)
        self.front = np.zeros((0, len(self.objectives)))      # normalised costs
        self.indicator = HV(ref_point=np.ones(len(self.objectives)))
        self.evaluations = 0
        self.feasible = 0
        self.rows: list[dict] = []

    def normalised(self, metrics: pd.DataFrame) -> np.ndarray:
        return costs(metrics, self.objectives) / self.scale

    def hypervolume(self, C: np.ndarray) -> float:
        """Normalised hypervolume of points given as normalised costs."""
        inside = C[(C < 1.0).all(axis=1)]
        return float(self.indicator(inside)) if len(inside) else 0.0

    def update(self, generation: int, metrics: pd.DataFrame) -> dict:
        """Add one generation's evaluations; returns (and records) its convergence row."""
        feasible = (constraint_matrix(metrics, self.study) <= 0).all(axis=1)
        self.evaluations += len(metrics)
        self.feasible += int(feasible.sum())
        if feasible.any():
            merged = np.vstack([self.front, self.normalised(metrics)[feasible]])
            self.front = merged[non_dominated(merged)]
        row = dict(generation=generation, evaluations=self.evaluations, feasible=self.feasible,
                   front_size=len(self.front), hypervolume=self.hypervolume(self.front))
        self.rows.append(row)
        return row

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=["generation", "evaluations", "feasible", "front_size",
                                                "hypervolume"])
