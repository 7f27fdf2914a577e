"""The published figures of data/quality.yaml, read once, and the model's coefficients fitted on the
rows issue 51 names as fitting rows (every other row is held out).

Weight precision (Kurtic et al. 2024 Table 2, via the authors' model cards): the score lost to quantising
weights (and activations) to ``b`` bits is quantisation noise, whose power falls by 4x per bit (6.02 dB/bit,
Widrow's uniform-noise model), and larger models lose less: ``loss_pct = A * 4**-(b - 4) * (N / 1e10)**-alpha``
summed over the quantised tensors (W4A16: weights at 4 bits; W8A8: weights and activations at 8 bits).
``A`` (the loss of a 10-billion-parameter model at 4 bits) and ``alpha`` are fitted by least squares in
log space on the fitting rows whose loss stands above the evaluation's noise (the 4-bit rows; the 8-bit
rows recover 99.7-100.3 %, within that noise, and are kept as residuals).

Expert pruning (Lu et al. 2024 Table 2, drops as retrieved): the fraction of the score lost grows as a
power of the routed mass removed, ``loss = k * m**p`` (``m``: the share of routed selections that landed
on the pruned experts). ``k`` and ``p`` are solved from the r=6 and r=4 rows of Mixtral-8x7B (uniform
routing: m = 1/4 and 1/2) with the r=8 average taken as the data file's stated assumption.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
import yaml

#: bits of the tensors a precision name quantises, as the workload names them (workloads.precision):
#: int4 = W4A16 (GPTQ-style weights only), int8 / fp8 = W8A8 (weights and activations)
QUANTISED_BITS = {"bf16": (), "fp16": (), "fp32": (), "fp8": (8, 8), "int8": (8, 8), "int4": (4,)}
#: size of the reference model of the weight-precision law (parameters)
REFERENCE_PARAMS = 1e10


@lru_cache(maxsize=1)
def load_data() -> dict:
    """data/quality.yaml as a dictionary (bundled, read once)."""
    return yaml.safe_load((resources.files("dse.quality") / "data" / "quality.yaml").read_text())


@dataclass(frozen=True)
class WeightLaw:
    """``loss_pct = a_pct * sum over quantised tensors of 4**-(b - 4) * (params / 1e10)**-alpha``."""

    a_pct: float
    alpha: float
    spread_pct: float          # largest |residual| over the fitting rows with a value (points)

    def loss_pct(self, precision: str, params: float) -> float:
        size = (params / REFERENCE_PARAMS) ** -self.alpha
        return self.a_pct * size * sum(4.0 ** -(b - 4) for b in QUANTISED_BITS[precision])


@dataclass(frozen=True)
class PruneLaw:
    """``loss_frac = k * m**p``, ``m`` the routed (router-weighted) mass removed; the base-average band
    of the data file scales the loss (the drops were fitted in points of an assumed average)."""

    k: float
    p: float
    base: float
    band: tuple[float, float]

    def loss_frac(self, mass: float) -> float:
        return self.k * mass ** self.p if mass > 0 else 0.0


def weight_rows(role: str | None = None) -> list[dict]:
    """The weight-precision rows with a value (``role``: fitting, held_out or both)."""
    rows = load_data()["weight_precision"]["rows"]
    return [r for r in rows if r.get("recovery_pct") is not None and (role is None or r["role"] == role)]


@lru_cache(maxsize=1)
def weight_law() -> WeightLaw:
    """Fit ``A`` and ``alpha`` on the fitting rows whose loss exceeds the evaluation noise."""
    rows = weight_rows("fitting")
    noisy = [r for r in rows if r["format"] == "int4"]
    x = np.array([math.log(r["params_b"] * 1e9 / REFERENCE_PARAMS) for r in noisy])
    y = np.array([math.log(100.0 - r["recovery_pct"]) for r in noisy])   # 4**-(4-4) = 1 for one tensor
    slope, intercept = np.polyfit(x, y, 1) if len(noisy) > 1 else (0.0, y[0])
    law = WeightLaw(a_pct=math.exp(float(intercept)), alpha=-float(slope), spread_pct=0.0)
    resid = [abs(100.0 - law.loss_pct(r["format"], r["params_b"] * 1e9) - r["recovery_pct"]) for r in rows]
    return WeightLaw(a_pct=law.a_pct, alpha=law.alpha, spread_pct=float(max(resid)))


def prune_rows() -> list[dict]:
    """The expert-pruning fitting rows with a drop."""
    return [r for r in load_data()["expert_pruning"]["rows"] if r.get("avg8_drop_pts") is not None]


@lru_cache(maxsize=1)
def prune_law() -> PruneLaw:
    """Solve ``k``, ``p`` from the rows (least squares in log space; two rows: exact)."""
    sec = load_data()["expert_pruning"]
    base = float(sec["assumed_base_avg8"])
    n = sec["experts"]
    rows = prune_rows()
    mass = np.array([(n - r["kept"]) / n for r in rows])     # uniform routing: each expert holds 1/n
    loss = np.array([r["avg8_drop_pts"] / base for r in rows])
    p, logk = np.polyfit(np.log(mass), np.log(loss), 1)
    return PruneLaw(k=math.exp(float(logk)), p=float(p), base=base, band=tuple(sec["assumed_base_avg8_band"]))


def preset_mmlu(name: str) -> dict | None:
    """The preset's published MMLU row (``mmlu`` may be None: not retrieved), None for other models."""
    return load_data()["preset_mmlu"].get(name)
