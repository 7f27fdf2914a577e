"""A study's quality (dse.quality, docs/quality.md): its model at the workload's precision (or each unit's,
``search.precision``: dse.model.unit_precision) and KV precision with ``mapping.experts_kept`` routed
experts, the least selected of the study's routing pruned; and `QualityEvaluator`, which gives each
design its variant's quality as the column ``quality_frac`` (the ``quality`` objective, higher is better:
dse.model.objectives negates it for pymoo and reports it as is)."""
from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np

import workloads

from ..errors import StudyError
from ..quality import KV_BITS, QualityEstimate, estimate
from ..study.space import Design
from ..study.spec import Study
from .contract import DecodedDesigns, PopulationEvaluator
from .tables import EvalTables, pruned_config

#: the column `QualityEvaluator` adds
QUALITY_COLUMN = "quality_frac"


def active_shares(tables: EvalTables) -> np.ndarray:
    """Each unit's share of a token's active parameters: its weight elements (weight bytes over its
    precision's element size) times the probability a step visits it."""
    size = np.array([workloads.bytes_per_element(p) for p in tables.unit_precision]) \
        if tables.unit_precision is not None else 1.0
    visit = np.asarray(tables.unit_prob, float) * np.asarray(tables.stage_prob, float)[np.asarray(tables.unit_stage)]
    active = np.asarray(tables.unit_capacity_bytes, float) / size * visit
    return active / active.sum() if active.sum() > 0 else np.zeros_like(active)


def precision_shares(tables: EvalTables) -> dict[str, float] | None:
    """Precision -> share of a token's active parameters (`active_shares`) for tables whose units have
    precisions of their own; None when they share the workload's."""
    if tables.unit_precision is None:
        return None
    out: dict[str, float] = defaultdict(float)
    for precision, share in zip(tables.unit_precision, active_shares(tables)):
        out[precision] += float(share)
    return dict(out)


def _kv_units_precision(tables: EvalTables) -> str:
    """The narrowest precision of the units that hold KV cache (it is stored at their precision)."""
    held = [p for p, kv in zip(tables.unit_precision, tables.unit_kv_bytes) if kv > 0]
    return min(held or tables.unit_precision, key=workloads.bytes_per_element)


def study_quality(study: Study, tables: EvalTables | None = None) -> QualityEstimate:
    """The estimate for a one-model study (the KV cache at the workload's KV precision, by default the
    weights', never below 8 bits: workloads.transformer stores it so); ``tables``: the study's tables,
    whose units may have precisions of their own (dse.model.unit_precision)."""
    w = study.workload
    if w.model is None:
        raise StudyError("quality is modelled for one model, not an ensemble (docs/quality.md)",
                         key="constraints.min_quality")
    pruned_config(study)                     # mapping.experts_kept checked as the workload builds it
    cfg = workloads.load_model(w.model)
    shares = precision_shares(tables) if tables is not None else None
    kv = w.kv_precision or (_kv_units_precision(tables) if shares else w.precision)
    kv = kv if KV_BITS[kv] >= 8 else "int8"
    q = None
    if study.mapping.experts_kept is not None and cfg.is_moe:
        q = workloads.selection_probabilities(cfg.experts, cfg.top_k, w.routing.distribution, s=w.routing.s,
                                              seed=w.routing.seed, alpha=w.routing.alpha)
    return estimate(cfg, precision=w.precision, kv_precision=kv, experts_kept=study.mapping.experts_kept, q=q,
                    shares=shares)


def wants_quality(study: Study) -> bool:
    """Whether the study's designs carry a ``quality_frac`` column: it asks for the ``quality`` objective,
    lets the search choose precisions or bounds quality."""
    return ("quality" in study.search.objectives or study.search.precision is not None
            or study.constraints.min_quality is not None)


class QualityEvaluator(PopulationEvaluator):
    """The study's evaluator plus ``quality_frac``: each design's quality, that of its variant (one value
    for a study without ``search.precision``)."""

    def __init__(self, study_evaluator: PopulationEvaluator, prepared):
        self.study_evaluator, self.prepared = study_evaluator, prepared
        self.space = study_evaluator.space
        parts = prepared.variants or [prepared]
        self.quality = np.array([study_quality(p.study, p.tables).quality_frac for p in parts])

    @property
    def columns(self) -> list[str]:
        return list(self.study_evaluator.columns) + [QUALITY_COLUMN]

    @property
    def metric_names(self) -> list[str]:
        return list(self.study_evaluator.metric_names) + [QUALITY_COLUMN]

    def _variants(self, X: np.ndarray) -> np.ndarray:
        if not self.prepared.variants:
            return np.zeros(len(X), np.int64)
        return self.prepared.package_evaluator.variant_of(X)

    def metrics_array(self, X: np.ndarray, with_faults: bool = True) -> np.ndarray:
        X = self.vectors(X)
        return np.column_stack([self.study_evaluator.metrics_array(X, with_faults), self.quality[self._variants(X)]])

    def design_metrics(self, designs: list[Design], with_faults: bool = True) -> np.ndarray:
        v = [self.prepared.package_evaluator.variant_for(d) if self.prepared.variants else 0 for d in designs]
        return np.column_stack([self.study_evaluator.design_metrics(designs, with_faults),
                                self.quality[np.array(v, np.int64)]])

    def designs(self, X: np.ndarray) -> list[Design]:
        return self.study_evaluator.designs(X)

    def decode(self, X: np.ndarray) -> DecodedDesigns:
        return self.study_evaluator.decode(X)

    def package_evaluators(self) -> list:
        return self.study_evaluator.package_evaluators()


def with_quality(study: Study, prepared):
    """``prepared`` with a `QualityEvaluator` when the study wants quality (`wants_quality`; dse.system.
    prepare's wrapper, registered by the facade)."""
    if not wants_quality(study) or study.workload.model is None or study.workload.phase not in ("prefill", "decode"):
        return prepared
    return dataclasses.replace(prepared, evaluator=QualityEvaluator(prepared.evaluator, prepared))
