"""A study's quality (dse.quality, docs/quality.md): its model at the workload's precision and KV
precision with ``mapping.experts_kept`` routed experts, the least selected of the study's routing pruned."""
from __future__ import annotations

import workloads

from ..errors import StudyError
from ..quality import KV_BITS, QualityEstimate, estimate
from ..study.spec import Study
from .tables import pruned_config


def study_quality(study: Study) -> QualityEstimate:
    """The estimate for a one-model study (the KV cache at the workload's KV precision, by default the
    weights', never below 8 bits: workloads.transformer stores it so)."""
    w = study.workload
    if w.model is None:
        raise StudyError("quality is modelled for one model, not an ensemble (docs/quality.md)",
                         key="constraints.min_quality")
    pruned_config(study)                     # mapping.experts_kept checked as the workload builds it
    cfg = workloads.load_model(w.model)
    kv = w.kv_precision or w.precision
    kv = kv if KV_BITS[kv] >= 8 else "int8"
    q = None
    if study.mapping.experts_kept is not None and cfg.is_moe:
        q = workloads.selection_probabilities(cfg.experts, cfg.top_k, w.routing.distribution, s=w.routing.s,
                                              seed=w.routing.seed, alpha=w.routing.alpha)
    return estimate(cfg, precision=w.precision, kv_precision=kv, experts_kept=study.mapping.experts_kept, q=q)
