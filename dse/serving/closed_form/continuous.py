"""Continuous batching in closed form, over arrays of designs (Numba): the serving objectives' model.

Requests arrive as a Poisson stream at rate lambda, each with P prompt and O >= 2 output tokens. The
server runs iterations (Orca / vLLM without chunking): before an iteration it prefills, in one batch,
every prompt that arrived during the previous one; otherwise it decodes one token of each of the N
sequences in flight. A design's steps are affine (the step model at two batch sizes and two prompt counts,
dse.serving.analytic): ``decode(n) = d1 + s (n - 1)``, ``prefill(k) = p0 + pk k``.

With D the mean time between two decode steps of a sequence (the decode interval):

* D = d + chain (`fixed_point`): the decode step d = decode(N) + s (z - 1) a sequence sees (itself and
  the others in flight: E[N^2] / E[N] = N + z, z = 1 / (1 - g) the spread the loop gain g leaves) and the
  prefills chained after it (the prompts that arrived during it, then those arriving during that
  prefill: a geometric chain of ratio lambda (p0 + pk)); Little's law N = lambda (O - 1) D. The rate
  saturates when this has no solution or the batch slots held (N and the prompts being prefilled) reach
  the sequences the batch and the KV cache hold (``slots``; `saturation`); short of that a request may
  wait for a slot (Erlang C at the slots' peakedness, with a diffusion tail: `slot_queue`);
* TTFT = W + R + p0 + pk (1 + K) (`ttft`): the wait W for a slot, then the rest R of the iteration under
  way, a decode or a prefill (uniform over it; arrivals see time averages, PASTA, and land in long
  iterations more often), and the prefill of its batch: itself and the K ~ Poisson(lambda L) others
  arriving in that iteration of length L;
* TPOT (`tpot`): its mean is D; its spread is shot noise of the arrivals over a request's life (the
  sequences in flight and the prompts prefilled meanwhile), and its quantiles are the interval at the
  local arrival rate a life sees at that quantile (the fixed point is convex in the rate: busy stretches
  skew TPOT right);
* p99s are the 99th percentiles; goodput is lambda x P(TTFT <= SLO) x P(TPOT <= SLO) (0 past
  saturation); ``max_rate_at_slo`` is the largest rate whose p99 TTFT and TPOT meet the SLOs
  (`slo_search`: bisection; both grow with the rate).

Checked against the discrete-event simulation (dse.serving.simulate) in tests/test_serving_closed_form.py;
docs/serving_closed_form.md follows one request rate through these modules.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .fixed_point import interval
from .results import DesignResults, results, serves, write_results
from .saturation import saturation
from .slo_search import max_rate_at_slo
from .tails import Q99, Z99
from .tpot import tpot_cdf, tpot_quantile
from .ttft import ttft_mean, ttft_parts, ttft_quantile, ttft_tail


@nb.njit(cache=True)
def continuous_design(rate_req_s, d1, slope, p0, pk, output_tokens, slots, slo_ttft_s, slo_tpot_s):
    """One design's `results.DesignResults` at ``rate_req_s``: inf latencies and no goodput
    past saturation."""
    saturation_req_s = saturation(d1, slope, p0, pk, output_tokens, slots)
    decode_interval_s, in_flight = interval(rate_req_s, d1, slope, p0, pk, output_tokens, slots)
    ttft_mean_s = tpot_mean_s = ttft_p99_s = tpot_p99_s = np.inf
    goodput_req_s = 0.0
    if np.isfinite(decode_interval_s):
        steady = (rate_req_s, decode_interval_s, in_flight)
        a = (d1, slope, p0, pk, output_tokens, slots, saturation_req_s)
        t = ttft_parts(*steady, d1, slope, p0, pk, output_tokens, slots)
        ttft = (rate_req_s, t.lengths_s, t.shares, p0, pk, t.wait_p, t.wait_decay_per_s)
        ttft_mean_s = ttft_mean(rate_req_s, t.lengths_s, t.shares, p0, pk) + t.wait_p / t.wait_decay_per_s
        tpot_mean_s = decode_interval_s
        ttft_p99_s = ttft_quantile(Q99, *ttft)
        tpot_p99_s = tpot_quantile(Z99, *steady, *a)
        goodput_req_s = rate_req_s * (1.0 - ttft_tail(slo_ttft_s, *ttft)) * tpot_cdf(slo_tpot_s, *steady, *a)
    best = max_rate_at_slo(d1, slope, p0, pk, output_tokens, slots, slo_ttft_s, slo_tpot_s, saturation_req_s)
    return DesignResults(ttft_mean_s=ttft_mean_s, tpot_mean_s=tpot_mean_s, ttft_p99_s=ttft_p99_s,
                         tpot_p99_s=tpot_p99_s, goodput_req_s=goodput_req_s, max_rate_at_slo_req_s=best,
                         saturation_req_s=saturation_req_s, in_flight=in_flight)


@nb.njit(cache=True)
def fill_continuous(rate_req_s, d1, slope, p0, pk, output_tokens, slots, slo_ttft_s, slo_tpot_s, out):
    """`continuous_design` of every design into the records ``out``."""
    for i in range(d1.shape[0]):
        r = out[i]
        if not serves(d1[i], slope[i], p0[i], pk[i], slots[i]):
            r.ttft_mean_s = r.tpot_mean_s = r.ttft_p99_s = r.tpot_p99_s = np.inf
            continue
        write_results(r, continuous_design(rate_req_s[i], d1[i], slope[i], p0[i], pk[i], output_tokens, slots[i],
                                           slo_ttft_s, slo_tpot_s))


def continuous_batching(rate_req_s, d1, slope, p0, pk, output_tokens: float, slots, slo_ttft_s: float,
                        slo_tpot_s: float) -> np.ndarray:
    """Continuous batching's results of every design (a structured array of `results.FIELDS`): arrays
    ``rate_req_s`` (requests/s a replica serves), the affine steps ``d1``, ``slope``, ``p0``, ``pk`` (s)
    and ``slots`` (the sequences the batch and the KV cache hold); scalars the rest. A design that cannot
    serve one request (slots < 1 or a non-finite step) gets inf latencies and 0 rates."""
    f = np.asarray
    out = results(len(d1))
    fill_continuous(f(rate_req_s, float), f(d1, float), f(slope, float), f(p0, float), f(pk, float),
                    float(output_tokens), f(slots, float), float(slo_ttft_s), float(slo_tpot_s), out)
    return out
