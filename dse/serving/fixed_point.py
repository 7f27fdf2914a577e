"""The decode interval of continuous batching as a fixed point (the model is in dse.serving.closed_form):
D = decode(N(D)) + the prefills chained after it, N = lambda (O - 1) D, solved by Newton's steps."""
from __future__ import annotations

import math

import numba as nb
import numpy as np

#: passes adding the spread of the sequences in flight a sequence sees (`interval`)
SELF_SEEN_STEPS = 2
#: Newton steps to the decode interval at most (they converge quadratically: about 6 suffice)
ROOT_STEPS = 60


@nb.njit(cache=True)
def decode_s(rate, D, d1, slope, output):
    """decode(N(D)): the decode step of the N = lambda (O - 1) D sequences in flight (one at least)."""
    return d1 + slope * max(rate * (output - 1.0) * D - 1.0, 0.0)


@nb.njit(cache=True)
def prefill_chain(rate, d, p0, pk):
    """Mean prefill time between two decode steps: the prompts that arrived during the decode step d
    ((1 - exp(-lambda d)) p0 + lambda d pk), then those arriving during that prefill, and so on (vLLM
    prefills first): a geometric chain of ratio about lambda (p0 + pk)."""
    return ((1.0 - math.exp(-rate * d)) * p0 + rate * d * pk) / (1.0 - rate * (p0 + pk))


@nb.njit(cache=True)
def _gap(D, rate, d1, slope, p0, pk, output):
    """h(D) = decode(N(D)) + its prefill chain - D."""
    d = decode_s(rate, D, d1, slope, output)
    return d + prefill_chain(rate, d, p0, pk) - D


@nb.njit(cache=True)
def loop_gain(rate, D, d1, slope, p0, pk, output):
    """g = dRHS/dD of the fixed point D = decode(N(D)) + chain(decode): how much one more second of
    interval lengthens the next (more sequences in flight, a longer decode, more prompts meanwhile)."""
    if rate * (output - 1.0) * D <= 1.0:
        return 0.0
    d = decode_s(rate, D, d1, slope, output)
    chain = (rate * math.exp(-rate * d) * p0 + rate * pk) / (1.0 - rate * (p0 + pk))
    return slope * rate * (output - 1.0) * (1.0 + chain)


@nb.njit(cache=True)
def _slope(D, rate, d1, slope, p0, pk, output):
    """h'(D) (`_gap`)."""
    return loop_gain(rate, D, d1, slope, p0, pk, output) - 1.0


@nb.njit(cache=True)
def _root(lo, hi, rate, d1, slope, p0, pk, output):
    """The root of h in [lo, hi] (h(lo) > 0 >= h(hi), h concave there): Newton's steps from hi, which
    stay right of the root and fall to it (a concave function's tangents lie above it); bisection if a
    step leaves the bracket."""
    x = hi
    for _ in range(ROOT_STEPS):
        g = _gap(x, rate, d1, slope, p0, pk, output)
        if g >= 0.0:                       # at the root to rounding
            return x
        d = _slope(x, rate, d1, slope, p0, pk, output)
        new = x - g / d if d < 0.0 else 0.5 * (lo + x)
        if not lo < new <= x:
            new = 0.5 * (lo + x)
        if x - new <= 1e-13 * x:
            return new
        x = new
    return x


@nb.njit(cache=True)
def upper_root(rate, d1, slope, p0, pk, output):
    """A D past the root beyond D1 (h(D) <= 0 there), or inf where none is sure: h lies below the line
    through 1 - exp(-lambda d) <= 1, decode(N(D)) + (p0 + lambda pk decode(N(D))) / (1 - rho) - D, whose root
    this is (rho = lambda (p0 + pk); a negative slope of the line at infinity is what a root needs)."""
    rho = rate * (p0 + pk)
    gain = 1.0 + rate * pk / (1.0 - rho)
    a = slope * rate * (output - 1.0)
    if a * gain >= 1.0:
        return np.inf
    return ((d1 - slope) * gain + p0 / (1.0 - rho)) / (1.0 - a * gain)


@nb.njit(cache=True)
def free_interval(rate, d1, slope, p0, pk, output):
    """(D, N) at ``rate`` without a batch limit; D = inf where the fixed point has no root.

    D is the smallest root of h(D) = decode(N(D)) + chain - D (`_gap`), h(0) > 0. h is concave below and
    above D1, where N reaches one sequence: a root below D1 is the one where h changes sign there; else
    h, concave beyond D1, falls to a root only when its slope at infinity is negative, bracketed by
    `upper_root`. The prefill chain needs lambda (p0 + pk) < 1."""
    if rate <= 0.0:
        return d1, 0.0
    if rate * (p0 + pk) >= 1.0:
        return np.inf, np.inf
    D1 = 1.0 / (rate * (output - 1.0))
    if _gap(D1, rate, d1, slope, p0, pk, output) <= 0.0:
        D = _root(0.0, D1, rate, d1, slope, p0, pk, output)
    else:
        hi = max(upper_root(rate, d1, slope, p0, pk, output), D1)
        if not np.isfinite(hi):
            return np.inf, np.inf
        D = _root(D1, hi, rate, d1, slope, p0, pk, output)
        for _ in range(SELF_SEEN_STEPS):        # a sequence sees the decode of itself and N others: + s z
            z = 1.0 / max(1.0 - loop_gain(rate, D, d1, slope, p0, pk, output), 1e-9)
            e = slope * (z - 1.0)
            if _gap(D, rate, d1 + e, slope, p0, pk, output) <= 0.0:
                break
            hi = max(upper_root(rate, d1 + e, slope, p0, pk, output), D)
            if not np.isfinite(hi):
                return np.inf, np.inf
            D = _root(D, hi, rate, d1 + e, slope, p0, pk, output)
    return D, rate * (output - 1.0) * D


@nb.njit(cache=True)
def interval(rate, d1, slope, p0, pk, output, n_max):
    """(D, N): mean decode interval and sequences in flight at ``rate``; D = inf past saturation: where
    `free_interval` has no root or the batch slots held reach ``n_max``."""
    D, N = free_interval(rate, d1, slope, p0, pk, output)
    return (D, N) if np.isfinite(D) and slots_busy(rate, D, N, p0, pk) < n_max else (np.inf, N)


@nb.njit(cache=True)
def slots_busy(rate, D, N, p0, pk):
    """Batch slots held on average: a request holds one from admission, through its prefill iteration
    (of 1 + lambda D prompts on average), to its last token: N + lambda x that prefill."""
    return N + rate * (p0 + pk * (1.0 + rate * D))
