"""Chunked prefill in closed form (Sarathi-Serve, Agrawal et al. OSDI 2024; vLLM's default scheduler), over
arrays of designs (Numba): the serving objectives of ``serving.scheduler: chunked``.

Every iteration decodes one token of each of the N sequences in flight and spends the rest of a budget
of ``chunk`` tokens, b = chunk - N, on prompt tokens first come first served; its time is the decode
step plus, when it carries a prompt chunk of c tokens, ``p0' + pk c / P`` (the affine steps of
dse.serving.analytic; P the prompt). An iteration is one forward pass over the mixed batch
(dse.serving.steps.mixed_step): the chunk adds its tokens' marginal pk c / P and its fixed part p0 less
the pass's own, W = d1 - s (weights and overheads, already paid by the decode step): p0' = p0 - W
(`mixed_fixed_s`). Prompts never stall the decodes: they ride along.

* D, the mean iteration a sequence sees (its decode interval), is its decode (itself and the others in
  flight, N + z: as in continuous batching) plus the chunk: the prompts arriving per iteration, lambda D,
  cost pk each, and p0 in the share q of iterations that carry a chunk (an arrival during the last
  iteration, or a backlog: the token queue's utilisation), N = lambda (O - 1) D (Little). The loop gain
  g = s lambda (O - 1) / (1 - lambda pk) does not depend on D, so D is a fixed point in q alone
  (`chunk_interval`).
* It saturates when g reaches 1, the prompt tokens outgrow the budget (rho = lambda P D_c / b, D_c an
  iteration with a full chunk) or the batch slots held reach ``slots`` (`saturation.chunk_saturation`).
* TTFT = R + n full-chunk iterations (less what its last chunk lacks) + a slot wait (`chunked_ttft`): R
  the rest of the iteration under way (length-biased, as in continuous batching); n = ceil((C + J S) /
  full + P / b), C the token backlog carried into the next iteration (the M/D/1 wait of a prompt's work
  S = (P / b) full, less one full chunk: `token_backlog`), J ~ Poisson(lambda (L - R)) the prompts that
  arrived before it in the same iteration; the slot wait as in continuous batching (`slot_queue`)
  without prefill stalls (peakedness 1 / (1 - g)).
* TPOT (`tpot`): mean D; spread the shot noise of the arrivals over a life; quantile the interval at the
  local arrival rate of that quantile, as in continuous batching.

Checked against the discrete-event simulation (dse.serving.simulate, ``chunked``) in
tests/test_serving_chunked.py.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .chunk_interval import chunk_interval
from .chunked_ttft import chunk_parts, chunk_tail, chunk_ttft_mean, chunk_ttft_quantile
from .results import DesignResults, results, serves, write_results
from .saturation import chunk_saturation
from .slo_search import chunk_max_rate_at_slo
from .tails import Q99, Z99
from .tpot import chunk_tpot, chunk_tpot_cdf


@nb.njit(cache=True)
def chunked_design(rate_req_s, d1, slope, p0, pk, prompt_tokens, output_tokens, chunk_tokens, slots, slo_ttft_s,
                   slo_tpot_s):
    """One design's `results.DesignResults` at ``rate_req_s``: inf latencies and no goodput
    past saturation."""
    a = (d1, slope, p0, pk, prompt_tokens, output_tokens, chunk_tokens)
    saturation_req_s = chunk_saturation(*a, slots)
    c = chunk_interval(rate_req_s, *a)
    ttft_mean_s = tpot_mean_s = ttft_p99_s = tpot_p99_s = np.inf
    goodput_req_s = 0.0
    if rate_req_s < saturation_req_s and np.isfinite(c.decode_interval_s):
        steady = (rate_req_s, c.decode_interval_s, c.in_flight)
        t = chunk_parts(*steady, c.chunk_share, c.budget_tokens, d1, slope, p0, pk, prompt_tokens, output_tokens,
                        slots)
        landed = (rate_req_s, t.lengths_s, t.shares, t.prompt_iterations, c.budget_tokens, t.decode_step, p0, pk,
                  prompt_tokens, t.service_s)
        ttft_mean_s = chunk_ttft_mean(*landed, t.wait_p, t.wait_decay_per_s)
        tpot_mean_s = c.decode_interval_s
        tails = (t.backlog_p, t.backlog_decay_per_s, t.wait_p, t.wait_decay_per_s)
        ttft_p99_s = chunk_ttft_quantile(Q99, *landed, *tails)
        tpot_p99_s = chunk_tpot(Z99, *steady, *a, saturation_req_s)
        goodput_req_s = rate_req_s * (1.0 - chunk_tail(slo_ttft_s, *landed, *tails)) * \
            chunk_tpot_cdf(slo_tpot_s, *steady, *a, saturation_req_s)
    best = chunk_max_rate_at_slo(*a, slots, slo_ttft_s, slo_tpot_s, saturation_req_s)
    return DesignResults(ttft_mean_s=ttft_mean_s, tpot_mean_s=tpot_mean_s, ttft_p99_s=ttft_p99_s,
                         tpot_p99_s=tpot_p99_s, goodput_req_s=goodput_req_s, max_rate_at_slo_req_s=best,
                         saturation_req_s=saturation_req_s, in_flight=c.in_flight)


@nb.njit(cache=True)
def mixed_fixed_s(d1, slope, p0):
    """A chunk's fixed part in a mixed pass: p0 less the pass's own fixed part W = d1 - s (clipped to [0,
    d1]), as dse.serving.steps.mixed_step reads W off the decode steps; may be negative (the decodes'
    weight reads hide under a compute-bound chunk)."""
    return p0 - min(max(d1 - slope, 0.0), d1)


@nb.njit(cache=True)
def fill_chunked(rate_req_s, d1, slope, p0, pk, prompt_tokens, output_tokens, chunk_tokens, slots, slo_ttft_s,
                 slo_tpot_s, out):
    """`chunked_design` of every design into the records ``out``."""
    for i in range(d1.shape[0]):
        r = out[i]
        if not serves(d1[i], slope[i], p0[i], pk[i], slots[i]):
            r.ttft_mean_s = r.tpot_mean_s = r.ttft_p99_s = r.tpot_p99_s = np.inf
            continue
        write_results(r, chunked_design(rate_req_s[i], d1[i], slope[i], mixed_fixed_s(d1[i], slope[i], p0[i]),
                                        pk[i], prompt_tokens, output_tokens, chunk_tokens, slots[i], slo_ttft_s,
                                        slo_tpot_s))


def chunked_prefill(rate_req_s, d1, slope, p0, pk, prompt_tokens: float, output_tokens: float, chunk_tokens: float,
                    slots, slo_ttft_s: float, slo_tpot_s: float) -> np.ndarray:
    """Chunked prefill's results of every design (a structured array of `results.FIELDS`): arrays
    ``rate_req_s``, ``d1``, ``slope``, ``p0``, ``pk``, ``slots`` as `continuous_batching`'s; scalars the
    rest, ``chunk_tokens`` the token budget of an iteration."""
    f = np.asarray
    out = results(len(d1))
    fill_chunked(f(rate_req_s, float), f(d1, float), f(slope, float), f(p0, float), f(pk, float),
                 float(prompt_tokens), float(output_tokens), float(chunk_tokens), f(slots, float), float(slo_ttft_s),
                 float(slo_tpot_s), out)
    return out
