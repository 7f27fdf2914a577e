"""The closed form of continuous batching and of chunked prefill (dse.serving.closed_form) for one design's
steps.

A design's steps enter the closed form as affine functions fitted at four points of the step model:
``decode(n) = d1 + s (n - 1)`` through the decode of 1 and of ``max_batch`` sequences at the mean
context, ``prefill(k) = p0 + pk k`` through the prefill of 1 and of `REF_PROMPTS` prompts. Decode is
nearly affine in the batch (weights streamed once, KV and compute per sequence); prefills in continuous
batching are small batches, where the reference point sits. The same affine steps drive the
discrete-event simulation in the tests, which isolates the queueing model's error from the fit's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .closed_form import chunked_prefill, continuous_batching

#: prompts in the second prefill point of the affine fit
REF_PROMPTS = 8


@dataclass(frozen=True)
class AffineSteps:
    """Step latencies (s): decode(n) = d1 + slope (n - 1); prefill(k prompts) = p0 + pk k, scaled by the
    tokens per prompt against ``prompt`` (a chunk of c tokens costs p0 + pk c / prompt)."""

    d1: float
    slope: float
    p0: float
    pk: float
    prompt: float

    def decode(self, batch: float, context: float) -> float:
        return self.d1 + self.slope * max(batch - 1.0, 0.0)

    def prefill(self, batch: float, context: float) -> float:
        return self.p0 + self.pk * batch * context / self.prompt

    @classmethod
    def from_points(cls, d1: float, d_batch: float, batch: int, p1: float, p_ref: float, ref: int,
                    prompt: float) -> "AffineSteps":
        """Through decode(1) = d1, decode(batch) = d_batch, prefill(1) = p1, prefill(ref) = p_ref."""
        slope = max((d_batch - d1) / (batch - 1), 0.0) if batch > 1 else 0.0
        pk = max((p_ref - p1) / (ref - 1), 0.0) if ref > 1 else p1
        return cls(d1=d1, slope=slope, p0=max(p1 - pk, 0.0), pk=pk, prompt=prompt)

    @classmethod
    def fit(cls, steps, prompt: float, output: float, max_batch: int) -> "AffineSteps":
        """The affine steps through four points of ``steps`` (``decode(batch, context)``, ``prefill``)."""
        context = prompt + output // 2
        ref = min(REF_PROMPTS, max_batch)
        return cls.from_points(steps.decode(1, context), steps.decode(max_batch, context), max_batch,
                               steps.prefill(1, prompt), steps.prefill(ref, prompt), ref, prompt)


@dataclass(frozen=True)
class SteadyState:
    ttft_s: float
    tpot_s: float
    ttft_p99_s: float
    tpot_p99_s: float
    goodput_req_s: float
    max_rate_at_slo_req_s: float
    saturation_req_s: float
    in_flight: float

    @property
    def saturated(self) -> bool:
        return not math.isfinite(self.tpot_s)


def steady_state(steps, rate: float, prompt: float, output: float, max_batch: int = 256,
                 kv_tokens: float = math.inf, slo_ttft_s: float = math.inf, slo_tpot_s: float = math.inf,
                 scheduler: str = "continuous", chunk_tokens: int = 512) -> SteadyState:
    """The closed form at ``rate`` requests/s for ``steps`` (an `AffineSteps`, or any step table, fitted),
    under ``scheduler`` (continuous: dse.serving.closed_form.continuous_batching; chunked, with ``chunk_tokens``
    an iteration: dse.serving.closed_form.chunked_prefill)."""
    s = steps if isinstance(steps, AffineSteps) else AffineSteps.fit(steps, prompt, output, max_batch)
    n_max = min(float(max_batch), math.floor(kv_tokens / (prompt + output)) if math.isfinite(kv_tokens) else math.inf)
    arrays = (np.array([float(rate)]), np.array([s.d1]), np.array([s.slope]), np.array([s.p0]), np.array([s.pk]))
    if scheduler == "chunked":
        row = chunked_prefill(*arrays, float(prompt), float(output), float(chunk_tokens), np.array([n_max]),
                              float(slo_ttft_s), float(slo_tpot_s))[0]
    else:
        row = continuous_batching(*arrays, float(output), np.array([n_max]), float(slo_ttft_s), float(slo_tpot_s))[0]
    return SteadyState(ttft_s=float(row["ttft_mean_s"]), tpot_s=float(row["tpot_mean_s"]),
                       ttft_p99_s=float(row["ttft_p99_s"]), tpot_p99_s=float(row["tpot_p99_s"]),
                       goodput_req_s=float(row["goodput_req_s"]),
                       max_rate_at_slo_req_s=float(row["max_rate_at_slo_req_s"]),
                       saturation_req_s=float(row["saturation_req_s"]), in_flight=float(row["in_flight"]))


def max_rate(steps, prompt: float, output: float, max_batch: int = 256, kv_tokens: float = math.inf,
             scheduler: str = "continuous", chunk_tokens: int = 512) -> float:
    """The largest rate with a steady state (requests/s)."""
    return steady_state(steps, 1.0, prompt, output, max_batch, kv_tokens, scheduler=scheduler,
                        chunk_tokens=chunk_tokens).saturation_req_s


def energy_per_output_token(rate_req_s, in_flight, slots, steps: tuple, joules: tuple, idle_w, output_tokens: float,
                            chunked: bool = False) -> np.ndarray:
    """Joules per output token of a server at ``rate_req_s`` requests/s in the closed form's steady state
    (arrays over designs): ``in_flight`` the closed form's mean sequences in flight (its ``in_flight``),
    ``slots`` the sequences the batch and KV cache hold, ``steps`` and ``joules`` the affine steps
    ``(d1, slope, p0, pk)`` in seconds and in joules (both `AffineSteps.from_points` of the same four
    steps: the evaluator's latencies and energies), ``idle_w`` the chips' idle power (W,
    dse.serving.steps.idle_power_w).

    Per second the server runs the decode steps of its lambda (O - 1) decode tokens at the batch actually
    running: the sequences in flight are Poisson of mean N (M/G/inf occupancy, Kleinrock, Queueing Systems
    I, 1975, sec. 5.6), so a step, which runs while one is, holds b = N / (1 - exp(-N)) of them on average
    (within [1, slots]; a step of b sequences costs d1 + slope (b - 1) for b tokens), and
    prefills every prompt: pk each plus the pass's p0 shared by the k prompts of a prefill, k = a / (1 -
    exp(-a)) the prompts that arrived during a decode step (a = lambda decode(b); at least one: the
    closed form's prefill after a decode, dse.serving.closed_form.ttft.iterations); under chunked prefill
    the prompts ride the decode passes (dse.serving.steps.mixed_step: weights read once), so pk only.
    What is left of the second the package waits at ``idle_w`` (as dse.serving.simulate charges the gaps
    between requests). Energy per output token = (decodes + prefills + idle) / (lambda O): at low load
    the idle power and batches of one dominate, at saturation the batch's share of each step."""
    rate = np.asarray(rate_req_s, float)
    n = np.nan_to_num(np.asarray(in_flight, float), nan=0.0, posinf=np.inf)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        busy_n = np.where(n > 1e-12, n / -np.expm1(-np.minimum(n, 700.0)), 1.0)
    b = np.clip(busy_n, 1.0, np.maximum(slots, 1.0))
    (d1, slope, p0, pk), (e1, es, e0, ek) = steps, joules
    step_s = d1 + slope * (b - 1.0)
    a = rate * step_s
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(a > 1e-12, a / -np.expm1(-a), 1.0)
        share = 0.0 if chunked else 1.0 / k
        busy = rate * ((output_tokens - 1.0) * step_s / b + pk + p0 * share)
        work = rate * ((output_tokens - 1.0) * (e1 + es * (b - 1.0)) / b + ek + e0 * share)
        per_token = (work + np.asarray(idle_w, float) * np.maximum(1.0 - busy, 0.0)) / (rate * output_tokens)
    return np.where(rate > 0, per_token, np.inf)
