"""A design's latency against load: p99 and mean TTFT and TPOT over request rates up to saturation, by
the closed form of the study's scheduler (dse.serving.analytic.steady_state) and, at a few rates, by the
discrete-event simulation on the same steps (dse.serving.simulate), so a report shows both and how far
they agree."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .analytic import steady_state
from .requests import synthetic
from .simulate import simulate

#: fractions of the saturation rate drawn by the closed form, and simulated
CURVE = tuple(np.round(np.linspace(0.05, 0.95, 19), 2))
SIMULATED = (0.2, 0.5, 0.8)


def load_curve(evaluator, design, requests: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Rows per rate: ``request_rate`` (the whole system's), ``ttft_mean_ms``, ``ttft_p99_ms``,
    ``tpot_mean_ms``, ``tpot_p99_ms``, ``source`` (closed form or simulation). ``evaluator`` is a serving
    study's (dse.serving.package.ServingEvaluator)."""
    sv = evaluator.study.serving
    steps, n_max, replicas = evaluator.steps_of(design)
    kv = n_max * (sv.input_len + sv.output_len)

    def closed(rate):
        return steady_state(steps, rate, sv.input_len, sv.output_len, sv.max_batch, kv, scheduler=sv.scheduler,
                            chunk_tokens=sv.chunk_tokens)
    saturation = closed(1.0).saturation_req_s
    rows = []
    for f in CURVE:
        m = closed(f * saturation)
        rows.append({"request_rate": f * saturation * replicas, "ttft_mean_ms": m.ttft_s * 1e3,
                     "ttft_p99_ms": m.ttft_p99_s * 1e3, "tpot_mean_ms": m.tpot_s * 1e3,
                     "tpot_p99_ms": m.tpot_p99_s * 1e3, "source": "closed form"})
    for f in SIMULATED:
        rate = f * saturation
        out = simulate(synthetic(requests, sv.input_len, sv.output_len, rate, seed), steps, scheduler=sv.scheduler,
                       max_batch=int(min(sv.max_batch, n_max)), kv_capacity_tokens=kv,
                       chunk_tokens=sv.chunk_tokens).metrics()
        rows.append({"request_rate": rate * replicas, "ttft_mean_ms": out["mean_ttft_ms"],
                     "ttft_p99_ms": out["p99_ttft_ms"], "tpot_mean_ms": out["mean_tpot_ms"],
                     "tpot_p99_ms": out["p99_tpot_ms"], "source": "simulation"})
    return pd.DataFrame(rows)
