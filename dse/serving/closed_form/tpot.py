"""Time per output token of either scheduler (Numba): its mean is the decode interval D; its spread is
shot noise of the arrivals over a request's life (the sequences in flight and the prompts prefilled
meanwhile, `shot_noise`), and its quantiles are the interval at the local arrival rate a life sees at
that quantile (the fixed point is convex in the rate: busy stretches skew TPOT right; `tpot_at`).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numba as nb
import numpy as np

from .chunk_interval import chunk_gain, chunk_interval
from .fixed_point import decode_step_s, interval, loop_gain
from .saturation import RATE_BISECTIONS
from .tails import cornish_fisher, local_count, normal_cdf

#: bisections of TPOT's normal quantile when inverting it (12 / 2^14 of z)
Z_BISECTIONS = 14
#: a request's life over the correlation time of the sequences in flight without the loop: where an
#: Ornstein-Uhlenbeck average over the life keeps 2/3 of the variance, as the M/D/infinity queue's does
#: (solves 2 (x - 1 + exp(-x)) / x^2 = 2/3)
OU_LIFE = 1.3607795323484027


@nb.njit(cache=True)
def shot_noise(in_flight, slope, b, g):
    """(deviation, skewness) of a request's TPOT: the Poisson arrivals over its life T = (O - 1) D each add
    ``slope`` x their overlap with it / T (``in_flight`` sequences on average) and, when they arrive
    during it, the prefill seconds ``b`` to each of its O - 1 tokens: a shot-noise sum whose cumulants are
    lambda x the integrals of the kernel's powers (2/3, 1/2 and 1 of T for the overlap, squared, cubed).
    The loop gain ``g`` (more sequences lengthen the interval, which keeps more in flight) slows the
    fluctuations' decay by 1 - g: as for an Ornstein-Uhlenbeck process whose restoring rate shrinks by
    that factor, the variance grows by 1 / (1 - g) and its correlation time by as much, so a life's
    average of the sequences in flight keeps more of it (`OU_LIFE`)."""
    g = min(g, 1.0 - 1e-9)
    x = OU_LIFE * (1.0 - g)
    averaged = 2.0 * (x - 1.0 + math.exp(-x)) / (x * x)         # 2/3 without the loop (g = 0)
    var = in_flight * (averaged * slope ** 2 + slope * b + b ** 2) / (1.0 - g)
    k3 = in_flight * (0.5 * slope ** 3 + slope ** 2 * b + 1.5 * slope * b ** 2 + b ** 3)
    sd = math.sqrt(var)
    return sd, (k3 / sd ** 3 if sd > 0.0 else 0.0)


@nb.njit(cache=True)
def per_prompt(rate_req_s, decode_interval_s, decode_step, pk):
    """Prefill seconds per arriving prompt: the interval's time beyond its decode step over the lambda D
    prompts it prefills."""
    a = rate_req_s * decode_interval_s
    return (decode_interval_s - decode_step) / a if a > 0.0 else pk


class TpotSpread(NamedTuple):
    """TPOT whatever the quantile (`tpot_spread`, `chunk_tpot_spread`): its mean D (s), deviation (s) and
    skewness (`shot_noise`), and the effective window of arrivals m (NaN where the interval does not grow
    with the rate there)."""
    mean_s: float
    deviation_s: float
    skewness: float
    window_arrivals: float


# --- continuous batching -----------------------------------------------------------------------------
@nb.njit(cache=True)
def tpot_spread(rate_req_s, decode_interval_s, in_flight, d1, slope, p0, pk, output_tokens, slots):
    """What `tpot_at` needs whatever the quantile (`TpotSpread`): TPOT's mean D, deviation and skewness
    (`shot_noise`) and the effective window m of arrivals (NaN where the interval does not grow with the
    rate there: the quantile is then the moments' Cornish-Fisher one)."""
    D = decode_interval_s
    d = decode_step_s(rate_req_s, D, d1, slope, output_tokens)
    sd, skew = shot_noise(in_flight, slope, per_prompt(rate_req_s, D, d, pk) / (output_tokens - 1.0),
                          loop_gain(rate_req_s, D, d1, slope, p0, pk, output_tokens))
    h = 1e-4 * rate_req_s
    up = interval(rate_req_s + h, d1, slope, p0, pk, output_tokens, slots)[0]
    if not (sd > 0.0 and np.isfinite(up) and up > D):
        return TpotSpread(D, sd, skew, np.nan)
    return TpotSpread(D, sd, skew, (rate_req_s * (up - D) / h / sd) ** 2)


@nb.njit(cache=True)
def tpot_at(z, rate_req_s, decode_interval_s, spread, d1, slope, p0, pk, output_tokens, slots, saturation_req_s):
    """TPOT at standard-normal quantile z: the interval D(lambda') at the local rate lambda' a request's
    life sees at that quantile, Poisson over an effective window of m arrivals (`tpot_spread`: m set so
    that the linearised spread D'(lambda) lambda / sqrt(m) equals `shot_noise`'s deviation); a local rate
    past saturation fills the batch: the interval stays at saturation's."""
    m = spread.window_arrivals
    if not np.isfinite(m):
        return spread.mean_s + spread.deviation_s * cornish_fisher(z, spread.skewness)
    local = min(rate_req_s * local_count(z, m) / m, saturation_req_s)
    at = interval(local, d1, slope, p0, pk, output_tokens, slots)[0]
    if not np.isfinite(at):          # saturation to rounding: the largest rate below it that has one
        edge = max(rate_req_s, saturation_req_s * (1.0 - 2.0 ** -RATE_BISECTIONS))
        at = interval(edge, d1, slope, p0, pk, output_tokens, slots)[0]
    return spread.mean_s - decode_interval_s + at


@nb.njit(cache=True)
def tpot_quantile(z, rate_req_s, decode_interval_s, in_flight, d1, slope, p0, pk, output_tokens, slots,
                  saturation_req_s):
    """TPOT at standard-normal quantile z (`tpot_spread`, `tpot_at`)."""
    spread = tpot_spread(rate_req_s, decode_interval_s, in_flight, d1, slope, p0, pk, output_tokens, slots)
    return tpot_at(z, rate_req_s, decode_interval_s, spread, d1, slope, p0, pk, output_tokens, slots,
                   saturation_req_s)


@nb.njit(cache=True)
def tpot_cdf(t, rate_req_s, decode_interval_s, in_flight, d1, slope, p0, pk, output_tokens, slots,
             saturation_req_s):
    """P(TPOT <= t): `tpot_at` inverted by bisection on the normal quantile z (its spread computed once)."""
    spread = tpot_spread(rate_req_s, decode_interval_s, in_flight, d1, slope, p0, pk, output_tokens, slots)
    a = (d1, slope, p0, pk, output_tokens, slots, saturation_req_s)
    lo, hi = -6.0, 6.0
    if tpot_at(lo, rate_req_s, decode_interval_s, spread, *a) >= t:
        return 0.0
    if tpot_at(hi, rate_req_s, decode_interval_s, spread, *a) <= t:
        return 1.0
    for _ in range(Z_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if tpot_at(mid, rate_req_s, decode_interval_s, spread, *a) <= t:
            lo = mid
        else:
            hi = mid
    return normal_cdf(lo)


# --- chunked prefill ---------------------------------------------------------------------------------
@nb.njit(cache=True)
def chunk_tpot_spread(rate_req_s, decode_interval_s, in_flight, d1, slope, p0, pk, prompt_tokens, output_tokens,
                      chunk_tokens):
    """`TpotSpread` of TPOT under chunked prefill whatever the quantile (`chunk_tpot_at`): mean D,
    deviation, skewness, window m (NaN where the interval does not grow with the rate)."""
    D = decode_interval_s
    d = decode_step_s(rate_req_s, D, d1, slope, output_tokens)
    sd, skew = shot_noise(in_flight, slope, per_prompt(rate_req_s, D, d, pk) / (output_tokens - 1.0),
                          chunk_gain(rate_req_s, slope, pk, output_tokens))
    h = 1e-4 * rate_req_s
    up = chunk_interval(rate_req_s + h, d1, slope, p0, pk, prompt_tokens, output_tokens,
                        chunk_tokens).decode_interval_s
    if not (sd > 0.0 and np.isfinite(up) and up > D):
        return TpotSpread(D, sd, skew, np.nan)
    return TpotSpread(D, sd, skew, (rate_req_s * (up - D) / h / sd) ** 2)


@nb.njit(cache=True)
def chunk_tpot_at(z, rate_req_s, decode_interval_s, spread, d1, slope, p0, pk, prompt_tokens, output_tokens,
                  chunk_tokens, saturation_req_s):
    """TPOT at standard-normal quantile z under chunked prefill (`tpot_at`'s method); the Cornish-Fisher
    quantile of the shot-noise moments where the interval does not grow with the rate."""
    m = spread.window_arrivals
    if not np.isfinite(m):
        return decode_interval_s + spread.deviation_s * cornish_fisher(z, spread.skewness)
    a = (d1, slope, p0, pk, prompt_tokens, output_tokens, chunk_tokens)
    at = chunk_interval(min(rate_req_s * local_count(z, m) / m, saturation_req_s), *a).decode_interval_s
    if not np.isfinite(at):
        edge = max(rate_req_s, saturation_req_s * (1.0 - 2.0 ** -RATE_BISECTIONS))   # saturation to rounding
        at = chunk_interval(edge, *a).decode_interval_s
    return at


@nb.njit(cache=True)
def chunk_tpot(z, rate_req_s, decode_interval_s, in_flight, d1, slope, p0, pk, prompt_tokens, output_tokens,
               chunk_tokens, saturation_req_s):
    """TPOT at standard-normal quantile z under chunked prefill (`chunk_tpot_spread`, `chunk_tpot_at`)."""
    a = (d1, slope, p0, pk, prompt_tokens, output_tokens, chunk_tokens)
    spread = chunk_tpot_spread(rate_req_s, decode_interval_s, in_flight, *a)
    return chunk_tpot_at(z, rate_req_s, decode_interval_s, spread, *a, saturation_req_s)


@nb.njit(cache=True)
def chunk_tpot_cdf(t, rate_req_s, decode_interval_s, in_flight, d1, slope, p0, pk, prompt_tokens, output_tokens,
                   chunk_tokens, saturation_req_s):
    """P(TPOT <= t) under chunked prefill: `chunk_tpot_at` inverted by bisection on z (spread computed once)."""
    a = (d1, slope, p0, pk, prompt_tokens, output_tokens, chunk_tokens)
    spread = chunk_tpot_spread(rate_req_s, decode_interval_s, in_flight, *a)
    lo, hi = -6.0, 6.0
    if chunk_tpot_at(lo, rate_req_s, decode_interval_s, spread, *a, saturation_req_s) >= t:
        return 0.0
    if chunk_tpot_at(hi, rate_req_s, decode_interval_s, spread, *a, saturation_req_s) <= t:
        return 1.0
    for _ in range(Z_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if chunk_tpot_at(mid, rate_req_s, decode_interval_s, spread, *a, saturation_req_s) <= t:
            lo = mid
        else:
            hi = mid
    return normal_cdf(lo)
