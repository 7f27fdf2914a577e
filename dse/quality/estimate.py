"""A model's quality under a design's knobs: the retained terms multiplied (dse.quality.terms).

``quality_frac`` is the fraction of the 16-bit, all-experts model's benchmark score kept; ``quality_low``
and ``quality_high`` multiply each term's band of evidence. The terms are taken as independent (their
losses compound multiplicatively); no published row checks a combination.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import workloads

from ..errors import StudyError
from .evidence import load_data, preset_mmlu, weight_rows
from .terms import kv_term, mixed_weight_term, prune_term, pruned_mass, skip_term, weight_term


@dataclass(frozen=True)
class QualityEstimate:
    """The estimate and what it rests on (``sources``: one line per term used)."""

    model: str
    quality_frac: float
    quality_low: float
    quality_high: float
    mmlu_base: float | None
    terms: dict = field(default_factory=dict)
    sources: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return dict(model=self.model, quality_frac=self.quality_frac, quality_low=self.quality_low,
                    quality_high=self.quality_high, mmlu_base=self.mmlu_base,
                    mmlu_estimate=None if self.mmlu_base is None else self.mmlu_base * self.quality_frac,
                    terms=self.terms, sources=list(self.sources))


@lru_cache(maxsize=64)
def model_params(cfg: workloads.ModelConfig) -> float:
    """Total parameters of a model config (workloads' operator builder's count)."""
    return float(workloads.extract_transformer(cfg, phase="decode", batch=1, context=1).summary["total_params"])


def estimate(cfg: workloads.ModelConfig, precision: str = "bf16", kv_precision: str = "bf16",
             experts_kept: int | None = None, skipping: bool = False, q=None,
             shares: dict[str, float] | None = None) -> QualityEstimate:
    """Quality of ``cfg`` run at ``precision`` with a ``kv_precision`` KV cache, ``experts_kept`` routed
    experts per MoE layer (the least selected pruned; ``q`` their per-token selection probabilities,
    uniform routing when None) and Lu et al.'s dynamic skipping. ``shares``: the units at precisions of
    their own (precision -> share of a token's active parameters, dse.quality.terms.mixed_weight_term),
    in place of one ``precision``."""
    data = load_data()
    params = model_params(cfg)
    shares = shares or {precision: 1.0}
    terms = {"precision": mixed_weight_term(shares, params), "kv_precision": kv_term(kv_precision)}
    sources = []
    quantised = [p for p, share in shares.items() if p not in ("bf16", "fp16", "fp32") and share > 0]
    if quantised:
        precision = "/".join(f"{p} ({shares[p]:.0%})" for p in quantised) if len(shares) > 1 else quantised[0]
        sizes = [r["params_b"] for r in weight_rows()]
        inside = min(sizes) * 1e9 <= params <= max(sizes) * 1e9
        sources.append(f"precision {precision}: Kurtic et al. 2024 Table 2 (Llama-3.1 8B/70B OpenLLM v1 "
                       f"recovery, via the authors' model cards); model {params / 1e9:.3g} B parameters"
                       + ("" if inside else f", outside the evidence's {min(sizes):g}-{max(sizes):g} B: "
                          "the size law extrapolated"))
    if kv_precision in ("fp8", "int8"):
        sources.append(f"kv_precision {kv_precision}: 8-bit activations lossless within noise in the same rows")
    if experts_kept is not None:
        if not cfg.is_moe:
            raise StudyError(f"{cfg.name} is a dense model: it has no routed experts to keep", key="experts_kept")
        if not 1 <= experts_kept <= cfg.experts:
            raise StudyError(f"experts kept must be in 1..{cfg.experts} (the routed experts of {cfg.name}), "
                             f"got {experts_kept}", key="experts_kept")
        mass = pruned_mass(cfg.experts, cfg.top_k, experts_kept, q)
        terms["experts_kept"] = prune_term(mass)
        sources.append(f"experts_kept {experts_kept} of {cfg.experts}: routed mass removed {mass:.3f}; "
                       f"{data['expert_pruning']['rows'][1]['source'].split(' (')[0]} and r=4 (drops in points)")
    if skipping:
        if not cfg.is_moe or cfg.top_k != 2:
            raise StudyError(f"skipping is modelled for top-2 routing (Lu et al. 2024's rule); {cfg.name} "
                             f"{'is dense' if not cfg.is_moe else f'routes top-{cfg.top_k}'}", key="skipping")
        terms["skipping"] = skip_term()
        sources.append("skipping: " + data["skipping"]["source"] + "; mechanism only, no fitted row")
    frac = low = high = 1.0
    for kept, lo, hi in terms.values():
        frac, low, high = frac * kept, low * lo, high * hi
    mmlu = preset_mmlu(cfg.name)
    if mmlu and mmlu.get("mmlu") is not None:
        sources.append(f"MMLU {mmlu['mmlu']}: {mmlu['source']}")
    return QualityEstimate(model=cfg.name, quality_frac=frac, quality_low=max(low, 0.0), quality_high=high,
                           mmlu_base=mmlu.get("mmlu") if mmlu else None,
                           terms={k: dict(zip(("kept", "low", "high"), v)) for k, v in terms.items()},
                           sources=tuple(sources))
