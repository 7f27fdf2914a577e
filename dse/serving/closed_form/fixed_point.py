"""Continuous batching's decode interval as a fixed point (the model: dse.serving.closed_form.continuous):
D = decode(N(D)) + the prefills chained after it, N = lambda (O - 1) D (Little), solved by Newton's steps.

Names: ``rate_req_s`` lambda, ``decode_interval_s`` D, ``in_flight`` N, ``output_tokens`` O, ``slots`` the
sequences the batch and the KV cache hold; ``d1, slope, p0, pk`` the affine steps (dse.serving.analytic).
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np

#: passes adding the spread of the sequences in flight a sequence sees (`interval`)
SELF_SEEN_STEPS = 2
#: Newton steps to the decode interval at most (they converge quadratically: about 6 suffice)
ROOT_STEPS = 60


@nb.njit(cache=True)
def decode_step_s(rate_req_s, decode_interval_s, d1, slope, output_tokens):
    """decode(N(D)): the decode step of the N = lambda (O - 1) D sequences in flight (one at least)."""
    return d1 + slope * max(rate_req_s * (output_tokens - 1.0) * decode_interval_s - 1.0, 0.0)


@nb.njit(cache=True)
def prefill_chain(rate_req_s, decode_step, p0, pk):
    """Mean prefill time between two decode steps: the prompts that arrived during the decode step d
    ((1 - exp(-lambda d)) p0 + lambda d pk), then those arriving during that prefill, and so on (vLLM
    prefills first): a geometric chain of ratio about lambda (p0 + pk)."""
    return ((1.0 - math.exp(-rate_req_s * decode_step)) * p0 + rate_req_s * decode_step * pk) / \
        (1.0 - rate_req_s * (p0 + pk))


@nb.njit(cache=True)
def gap(decode_interval_s, rate_req_s, d1, slope, p0, pk, output_tokens):
    """h(D) = decode(N(D)) + its prefill chain - D."""
    d = decode_step_s(rate_req_s, decode_interval_s, d1, slope, output_tokens)
    return d + prefill_chain(rate_req_s, d, p0, pk) - decode_interval_s


@nb.njit(cache=True)
def loop_gain(rate_req_s, decode_interval_s, d1, slope, p0, pk, output_tokens):
    """g = dRHS/dD of the fixed point D = decode(N(D)) + chain(decode): how much one more second of
    interval lengthens the next (more sequences in flight, a longer decode, more prompts meanwhile)."""
    if rate_req_s * (output_tokens - 1.0) * decode_interval_s <= 1.0:
        return 0.0
    d = decode_step_s(rate_req_s, decode_interval_s, d1, slope, output_tokens)
    chain = (rate_req_s * math.exp(-rate_req_s * d) * p0 + rate_req_s * pk) / (1.0 - rate_req_s * (p0 + pk))
    return slope * rate_req_s * (output_tokens - 1.0) * (1.0 + chain)


@nb.njit(cache=True)
def root(lo, hi, rate_req_s, d1, slope, p0, pk, output_tokens):
    """The root of h in [lo, hi] (h(lo) > 0 >= h(hi), h concave there; h' = g - 1, `loop_gain`): Newton's
    steps from hi, which stay right of the root and fall to it (a concave function's tangents lie above
    it); bisection if a step leaves the bracket."""
    x = hi
    for _ in range(ROOT_STEPS):
        h = gap(x, rate_req_s, d1, slope, p0, pk, output_tokens)
        if h >= 0.0:                       # at the root to rounding
            return x
        dh = loop_gain(rate_req_s, x, d1, slope, p0, pk, output_tokens) - 1.0
        new = x - h / dh if dh < 0.0 else 0.5 * (lo + x)
        if not lo < new <= x:
            new = 0.5 * (lo + x)
        if x - new <= 1e-13 * x:
            return new
        x = new
    return x


@nb.njit(cache=True)
def upper_root(rate_req_s, d1, slope, p0, pk, output_tokens):
    """A D past the root beyond D1 (h(D) <= 0 there), or inf where none is sure: h lies below the line
    through 1 - exp(-lambda d) <= 1, decode(N(D)) + (p0 + lambda pk decode(N(D))) / (1 - rho) - D, whose root
    this is (rho = lambda (p0 + pk); a negative slope of the line at infinity is what a root needs)."""
    rho = rate_req_s * (p0 + pk)
    gain = 1.0 + rate_req_s * pk / (1.0 - rho)
    a = slope * rate_req_s * (output_tokens - 1.0)
    if a * gain >= 1.0:
        return np.inf
    return ((d1 - slope) * gain + p0 / (1.0 - rho)) / (1.0 - a * gain)


@nb.njit(cache=True)
def free_interval(rate_req_s, d1, slope, p0, pk, output_tokens):
    """(D, N) at ``rate_req_s`` without a batch limit; D = inf where the fixed point has no root.

    D is the smallest root of h(D) = decode(N(D)) + chain - D (`gap`), h(0) > 0. h is concave below and
    above D1, where N reaches one sequence: a root below D1 is the one where h changes sign there; else
    h, concave beyond D1, falls to a root only when its slope at infinity is negative, bracketed by
    `upper_root`. The prefill chain needs lambda (p0 + pk) < 1."""
    if rate_req_s <= 0.0:
        return d1, 0.0
    if rate_req_s * (p0 + pk) >= 1.0:
        return np.inf, np.inf
    D1 = 1.0 / (rate_req_s * (output_tokens - 1.0))
    if gap(D1, rate_req_s, d1, slope, p0, pk, output_tokens) <= 0.0:
        D = root(0.0, D1, rate_req_s, d1, slope, p0, pk, output_tokens)
    else:
        hi = max(upper_root(rate_req_s, d1, slope, p0, pk, output_tokens), D1)
        if not np.isfinite(hi):
            return np.inf, np.inf
        D = root(D1, hi, rate_req_s, d1, slope, p0, pk, output_tokens)
        for _ in range(SELF_SEEN_STEPS):        # a sequence sees the decode of itself and N others: + s z
            z = 1.0 / max(1.0 - loop_gain(rate_req_s, D, d1, slope, p0, pk, output_tokens), 1e-9)
            e = slope * (z - 1.0)
            if gap(D, rate_req_s, d1 + e, slope, p0, pk, output_tokens) <= 0.0:
                break
            hi = max(upper_root(rate_req_s, d1 + e, slope, p0, pk, output_tokens), D)
            if not np.isfinite(hi):
                return np.inf, np.inf
            D = root(D, hi, rate_req_s, d1 + e, slope, p0, pk, output_tokens)
    return D, rate_req_s * (output_tokens - 1.0) * D


@nb.njit(cache=True)
def interval(rate_req_s, d1, slope, p0, pk, output_tokens, slots):
    """(D, N): mean decode interval and sequences in flight at ``rate_req_s``; D = inf past saturation:
    where `free_interval` has no root or the batch slots held reach ``slots``."""
    D, N = free_interval(rate_req_s, d1, slope, p0, pk, output_tokens)
    return (D, N) if np.isfinite(D) and slots_held(rate_req_s, D, N, p0, pk) < slots else (np.inf, N)


@nb.njit(cache=True)
def slots_held(rate_req_s, decode_interval_s, in_flight, p0, pk):
    """Batch slots held on average: a request holds one from admission, through its prefill iteration
    (of 1 + lambda D prompts on average), to its last token: N + lambda x that prefill."""
    return in_flight + rate_req_s * (p0 + pk * (1.0 + rate_req_s * decode_interval_s))
