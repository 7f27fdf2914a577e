"""The saturation rate of either scheduler (Numba): the largest request rate with a steady state, found
from below to 2^-`RATE_BISECTIONS` of a bound, by false position on the batch slots held (Illinois) where
the fixed point exists and by bisection where it does not.
"""
from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from .chunk_interval import chunk_interval
from .chunked_ttft import landing
from .fixed_point import free_interval, interval, slots_held

#: bisections of a rate (saturation, max_rate_at_slo: 2^-16 of the saturation rate)
RATE_BISECTIONS = 16


class Bracket(NamedTuple):
    """A bracket of the saturation rate (`narrow`): its ends (requests/s), the margin at each (<= 0 at
    ``lo_req_s``, > 0 at ``hi_req_s``; inf: no fixed point there) and the end kept last (1 hi, -1 lo, 0
    none yet)."""
    lo_req_s: float
    lo_margin: float
    hi_req_s: float
    hi_margin: float
    kept: int


@nb.njit(cache=True, inline="always")
def next_rate(bracket, tol, steps):
    """The next rate to try inside the `Bracket` of a margin (<= 0 at lo, > 0 at hi): false position while
    both ends' margins are finite, the midpoint where one is not (no fixed point there) or after
    `RATE_BISECTIONS` steps (a safeguard: where false position creeps along a curved margin; 0.5 % of 2,000
    random designs reach it)."""
    lo, hi = bracket.lo_req_s, bracket.hi_req_s
    f_lo, f_hi = bracket.lo_margin, bracket.hi_margin
    if np.isfinite(f_lo) and np.isfinite(f_hi) and f_hi > f_lo and steps < RATE_BISECTIONS:
        mid = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        return min(max(mid, lo + 0.5 * tol), hi - 0.5 * tol)
    return 0.5 * (lo + hi)


@nb.njit(cache=True, inline="always")
def narrow(bracket, mid, f, below):
    """The `Bracket` after trying ``mid`` (margin ``f``, on the low side when ``below``); Illinois: an end
    kept twice running has its margin halved, so false position does not stall at it."""
    b = bracket
    if below:
        return Bracket(mid, f, b.hi_req_s, b.hi_margin * 0.5 if b.kept == 1 else b.hi_margin, 1)
    return Bracket(b.lo_req_s, b.lo_margin * 0.5 if b.kept == -1 else b.lo_margin, mid, f, -1)


@nb.njit(cache=True)
def slot_margin(rate_req_s, d1, slope, p0, pk, output_tokens, slots):
    """Continuous batching's slots held at ``rate_req_s`` less those there are (< 0: a steady state; inf:
    no fixed point)."""
    D, N = free_interval(rate_req_s, d1, slope, p0, pk, output_tokens)
    return slots_held(rate_req_s, D, N, p0, pk) - slots if np.isfinite(D) else np.inf


@nb.njit(cache=True)
def saturation(d1, slope, p0, pk, output_tokens, slots):
    """Continuous batching's saturation rate (dse.serving.closed_form.fixed_point's `interval` finite), at
    most 1 / (p0 + pk) (the prefill chain's bound) and 1 / (s (O - 1)) (where decode alone grows without
    bound). The slots held grow smoothly with the rate up to the batch limit, so the bracket shrinks by
    false position (`next_rate`, `narrow`) where the fixed point exists and by bisection where it does
    not: a median of 9 steps (90 % within 11, 2,000 random designs) where bisection took 16."""
    hi = 1.0 / (p0 + pk)
    if slope > 0.0:
        hi = min(hi, 1.0 / (slope * (output_tokens - 1.0)))
    if np.isfinite(interval(hi * (1.0 - 1e-9), d1, slope, p0, pk, output_tokens, slots)[0]):
        return hi
    tol = hi * 2.0 ** -RATE_BISECTIONS
    f_hi = slot_margin(hi, d1, slope, p0, pk, output_tokens, slots)
    if not f_hi >= 0.0:
        f_hi = np.inf                             # past the prefill chain's or decode's bound: no steady state
    bracket = Bracket(0.0, -slots, hi, f_hi, 0)  # no requests: no slots held
    steps = 0
    while bracket.hi_req_s - bracket.lo_req_s > tol:
        mid = next_rate(bracket, tol, steps)
        f = slot_margin(mid, d1, slope, p0, pk, output_tokens, slots)
        bracket = narrow(bracket, mid, f, f < 0.0)
        steps += 1
    return bracket.lo_req_s


@nb.njit(cache=True)
def chunk_slot_margin(rate_req_s, d1, slope, p0, pk, prompt_tokens, output_tokens, chunk_tokens, slots):
    """Chunked prefill's slots held at ``rate_req_s`` less those there are (inf without a steady state)."""
    c = chunk_interval(rate_req_s, d1, slope, p0, pk, prompt_tokens, output_tokens, chunk_tokens)
    if not np.isfinite(c.decode_interval_s):
        return np.inf
    return landing(rate_req_s, c.decode_interval_s, c.in_flight, c.chunk_share, c.budget_tokens, d1, slope, p0, pk,
                   prompt_tokens).slots_held - slots


@nb.njit(cache=True)
def chunk_saturation(d1, slope, p0, pk, prompt_tokens, output_tokens, chunk_tokens, slots):
    """Chunked prefill's saturation rate, to 2^-RATE_BISECTIONS of its bound 1 / max(s (O - 1) + pk, pk +
    P (d1 + p0) / chunk): by bisection where `chunk_interval` exists (the loop and the budget), then, if the
    batch slots held reach ``slots`` below that, by false position on the slots held (as `saturation`)."""
    hi = 1.0 / max(slope * (output_tokens - 1.0) + pk, pk + prompt_tokens * (d1 + p0) / chunk_tokens)
    tol = hi * 2.0 ** -RATE_BISECTIONS
    lo = 0.0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if np.isfinite(chunk_interval(mid, d1, slope, p0, pk, prompt_tokens, output_tokens,
                                      chunk_tokens).decode_interval_s):
            lo = mid
        else:
            hi = mid
    a = (d1, slope, p0, pk, prompt_tokens, output_tokens, chunk_tokens, slots)
    f_hi = chunk_slot_margin(lo, *a)
    if f_hi < 0.0:
        return lo
    bracket = Bracket(0.0, -slots, lo, f_hi, 0)
    steps = 0
    while bracket.hi_req_s - bracket.lo_req_s > tol:
        mid = next_rate(bracket, tol, steps)
        f = chunk_slot_margin(mid, *a)
        bracket = narrow(bracket, mid, f, f < 0.0)
        steps += 1
    return bracket.lo_req_s
