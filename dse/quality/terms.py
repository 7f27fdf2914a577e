"""The retained fraction of each knob, with the band of the evidence behind it.

Each term returns ``(retained, low, high)`` (fractions of the 16-bit, all-experts model's score).

* weight precision: `evidence.WeightLaw` (Kurtic et al. 2024); band: the largest residual of its fitting rows;
* KV-cache precision: 8 bits and above keep the score (the W8A8 rows quantise the activations the keys
  and values are made from and recover 99.7-100.3 %); below 8 bits no figure was retrieved (KIVI Table 3),
  so the term refuses rather than guess;
* expert pruning: `evidence.PruneLaw` on the routed mass of the least-used experts removed per layer
  (routing renormalises over the rest); band: the data file's band on the assumed base average;
* skipping (Lu et al. 2024's dynamic skipping): a top-2 token skips its second expert when that expert's
  router weight is below the median ratio ``beta`` of second to first weight, so half the tokens skip.
  With the ratio ``r = w2 / w1`` spread uniformly over [0, 1] (an assumption: no router-weight
  distribution was retrieved), the normalised weight removed per token is
  ``E[r / (1 + r); r < beta] = beta - ln(1 + beta)`` = 0.0945 at beta = 0.5; the pruning law turns that
  mass into a loss (an assumption: loss depends on the router-weighted mass removed, however removed).
  Band: from no loss to twice the loss.
"""
from __future__ import annotations

import math

import numpy as np

from workloads import selection_probabilities

from ..errors import StudyError
from .evidence import QUANTISED_BITS, prune_law, weight_law

KV_BITS = {"bf16": 16, "fp16": 16, "fp32": 32, "fp8": 8, "int8": 8, "int4": 4, "int2": 2}
SKIP_BETA = 0.5          # the median of w2 / w1 with w2 / w1 uniform on [0, 1]


def weight_term(precision: str, params: float, share: float = 1.0) -> tuple[float, float, float]:
    """``share``: the part of a token's active parameters held at ``precision`` (the rest at 16 bits).
    Rounding noise adds over independent tensors, so the loss scales with the quantised share (an
    assumption: every parameter equally sensitive; first and last layers are known to be more)."""
    if precision not in QUANTISED_BITS:
        raise StudyError(f"unknown precision {precision!r}; allowed: bf16, fp8, int8, int4", key="precision")
    law = weight_law()
    if not QUANTISED_BITS[precision] or share <= 0:
        return 1.0, 1.0, 1.0
    kept = 1.0 - share * law.loss_pct(precision, params) / 100.0
    spread = share * law.spread_pct / 100.0
    return kept, kept - spread, kept + spread


def mixed_weight_term(shares: dict[str, float], params: float) -> tuple[float, float, float]:
    """Parts of a token's active parameters at different precisions (precision -> share, shares adding to
    1): each part's `weight_term` loss and band added (the same independence as within one precision)."""
    loss = spread = 0.0
    for precision, share in shares.items():
        kept, _, high = weight_term(precision, params, share)
        loss, spread = loss + 1.0 - kept, spread + high - kept
    return 1.0 - loss, 1.0 - loss - spread, 1.0 - loss + spread


def kv_term(kv_precision: str) -> tuple[float, float, float]:
    if kv_precision not in KV_BITS:
        raise StudyError(f"unknown KV precision {kv_precision!r}; allowed: {', '.join(KV_BITS)}",
                         key="kv_precision")
    if KV_BITS[kv_precision] >= 8:
        spread = weight_law().spread_pct / 100.0 if KV_BITS[kv_precision] == 8 else 0.0
        return 1.0, 1.0 - spread, 1.0 + spread
    raise StudyError(f"KV cache at {kv_precision}: no published figure was retrieved for KV caches below 8 "
                     "bits (KIVI Table 3, dse/quality/data/quality.yaml); allowed with evidence: bf16, fp8, int8",
                     key="kv_precision")


def pruned_mass(experts: int, top_k: int, kept: int, q: np.ndarray | None = None) -> float:
    """Share of routed selections on the ``experts - kept`` least-selected experts (``q``: per-token
    selection probability of each expert, uniform routing by default)."""
    q = selection_probabilities(experts, top_k) if q is None else np.asarray(q, dtype=float)
    return float(np.sort(q)[: experts - kept].sum() / q.sum())


def prune_term(mass: float) -> tuple[float, float, float]:
    law = prune_law()
    loss = law.loss_frac(mass)
    lo_base, hi_base = law.band
    return 1.0 - loss, 1.0 - loss * law.base / lo_base, 1.0 - loss * law.base / hi_base


def skip_mass(beta: float = SKIP_BETA) -> float:
    """Normalised router weight a top-2 token loses, averaged over tokens (see the module docstring)."""
    return beta - math.log1p(beta)


def skip_term() -> tuple[float, float, float]:
    loss = prune_law().loss_frac(skip_mass())
    return 1.0 - loss, 1.0 - 2.0 * loss, 1.0
