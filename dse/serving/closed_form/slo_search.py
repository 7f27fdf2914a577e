"""The largest request rate whose p99 TTFT and TPOT meet the SLOs, of either scheduler (Numba): both grow
with the rate, so a bisection on the rate between 0 and the saturation rate (2^-`RATE_BISECTIONS` of it)
on whether the SLOs are met, without the quantile searches: P(TTFT > SLO) <= 1 - q, TPOT's quantile.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .chunk_interval import chunk_interval
from .chunked_ttft import chunk_parts, chunk_tail
from .fixed_point import interval
from .saturation import RATE_BISECTIONS
from .tails import Q99, Z99
from .tpot import chunk_tpot, tpot_quantile
from .ttft import ttft_parts, ttft_tail


@nb.njit(cache=True)
def meets_slo(rate_req_s, d1, slope, p0, pk, output_tokens, slots, slo_ttft_s, slo_tpot_s, saturation_req_s):
    """Whether continuous batching's p99 TTFT and TPOT at ``rate_req_s`` are within the SLOs."""
    D, N = interval(rate_req_s, d1, slope, p0, pk, output_tokens, slots)
    if not np.isfinite(D):
        return False
    if tpot_quantile(Z99, rate_req_s, D, N, d1, slope, p0, pk, output_tokens, slots, saturation_req_s) > slo_tpot_s:
        return False
    t = ttft_parts(rate_req_s, D, N, d1, slope, p0, pk, output_tokens, slots)
    return ttft_tail(slo_ttft_s, rate_req_s, t.lengths_s, t.shares, p0, pk, t.wait_p, t.wait_decay_per_s) <= 1.0 - Q99


@nb.njit(cache=True)
def max_rate_at_slo(d1, slope, p0, pk, output_tokens, slots, slo_ttft_s, slo_tpot_s, saturation_req_s):
    """Continuous batching's largest rate meeting the SLOs (`meets_slo`; 0 where even 1e-9 of saturation
    does not)."""
    a = (d1, slope, p0, pk, output_tokens, slots, slo_ttft_s, slo_tpot_s, saturation_req_s)
    lo, hi = 0.0, saturation_req_s
    if meets_slo(1e-9 * saturation_req_s, *a):
        for _ in range(RATE_BISECTIONS):
            mid = 0.5 * (lo + hi)
            if meets_slo(mid, *a):
                lo = mid
            else:
                hi = mid
    return lo


@nb.njit(cache=True)
def chunk_meets_slo(rate_req_s, d1, slope, p0, pk, prompt_tokens, output_tokens, chunk_tokens, slots, slo_ttft_s,
                    slo_tpot_s, saturation_req_s):
    """Whether chunked prefill's p99 TPOT and TTFT at ``rate_req_s`` are within the SLOs, with the slots held
    below ``slots``."""
    a = (d1, slope, p0, pk, prompt_tokens, output_tokens, chunk_tokens)
    c = chunk_interval(rate_req_s, *a)
    D, N = c.decode_interval_s, c.in_flight
    if not np.isfinite(D):
        return False
    if chunk_tpot(Z99, rate_req_s, D, N, *a, saturation_req_s) > slo_tpot_s:
        return False
    t = chunk_parts(rate_req_s, D, N, c.chunk_share, c.budget_tokens, d1, slope, p0, pk, prompt_tokens, output_tokens,
                    slots)
    return t.slots_held < slots and \
        chunk_tail(slo_ttft_s, rate_req_s, t.lengths_s, t.shares, t.prompt_iterations, c.budget_tokens, t.decode_step,
                   p0, pk, prompt_tokens, t.service_s, t.backlog_p, t.backlog_decay_per_s, t.wait_p,
                   t.wait_decay_per_s) <= 1.0 - Q99


@nb.njit(cache=True)
def chunk_max_rate_at_slo(d1, slope, p0, pk, prompt_tokens, output_tokens, chunk_tokens, slots, slo_ttft_s,
                          slo_tpot_s, saturation_req_s):
    """Chunked prefill's largest rate meeting the SLOs (`chunk_meets_slo`; 0 where even 1e-9 of saturation
    does not)."""
    a = (d1, slope, p0, pk, prompt_tokens, output_tokens, chunk_tokens, slots, slo_ttft_s, slo_tpot_s,
         saturation_req_s)
    lo, hi = 0.0, saturation_req_s
    if chunk_meets_slo(1e-9 * saturation_req_s, *a):
        for _ in range(RATE_BISECTIONS):
            mid = 0.5 * (lo + hi)
            if chunk_meets_slo(mid, *a):
                lo = mid
            else:
                hi = mid
    return lo
