"""Tails and quantiles the closed form shares (Numba): the Poisson distribution's CDF and quantile, exact
for every mean, and the normal-based corrections (Cornish-Fisher) for skewed figures.

The Poisson probabilities are summed outward from the mode in Loader's saddle-point form, p(k; m) =
exp(-stirlerr(k) - bd0(k, m)) / sqrt(2 pi k) (C. Loader, "Fast and accurate computation of binomial
probabilities", 2000; R's and scipy's dpois), so no term underflows whatever the mean; a sum stops where
the terms fall under `TAIL_STOP` of the mode's probability (the mass it leaves out: under 1e-18).
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np

#: the quantile of the p99 figures, and the standard normal's quantile at it
Q99 = 0.99
Z99 = 2.3263478740408408
#: a Poisson mean up to which sums start at 0 (exp(-m) is far from underflow); past it, at the mode
SMALL_MEAN = 400.0
#: a Poisson sum from the mode stops at terms under this share of the mode's probability
TAIL_STOP = 1e-17
#: Stirling's series' coefficients for stirlerr(k), k > 15 (1/12, 1/360, 1/1260, 1/1680)
S0, S1, S2, S3 = 1.0 / 12.0, 1.0 / 360.0, 1.0 / 1260.0, 1.0 / 1680.0
HALF_LOG_2PI = 0.9189385332046728


@nb.njit(cache=True)
def stirlerr(k):
    """log(k!) - log(sqrt(2 pi k) (k / e)^k), k >= 1: Stirling's series past 15, else lgamma."""
    if k > 15.0:
        k2 = k * k
        return (S0 - (S1 - (S2 - S3 / k2) / k2) / k2) / k
    return math.lgamma(k + 1.0) - (k + 0.5) * math.log(k) + k - HALF_LOG_2PI


@nb.njit(cache=True)
def bd0(k, m):
    """k log(k / m) + m - k without cancellation (Loader's series where k is near m)."""
    if abs(k - m) < 0.1 * (k + m):
        v = (k - m) / (k + m)
        s = (k - m) * v
        ej = 2.0 * k * v
        v2 = v * v
        j = 1
        while True:
            ej *= v2
            s1 = s + ej / (2 * j + 1)
            if s1 == s:
                return s1
            s = s1
            j += 1
    return k * math.log(k / m) + m - k


@nb.njit(cache=True)
def poisson_pmf(k, m):
    """P(X = k) for X ~ Poisson(m > 0), k a whole number (Loader's saddle-point form)."""
    if k <= 0.0:
        return math.exp(-m) if k == 0.0 else 0.0
    return math.exp(-stirlerr(k) - bd0(k, m)) / math.sqrt(2.0 * math.pi * k)


@nb.njit(cache=True)
def poisson_edge(m):
    """(k, P(X = k)): the first k below the mode of Poisson(m) (0 at least) whose probability is under
    `TAIL_STOP` of the mode's: where a sum of the lower tail may start."""
    k = math.floor(m)
    term = poisson_pmf(k, m)
    stop = TAIL_STOP * term
    while k > 0.0 and term >= stop:
        term *= k / m
        k -= 1.0
    return k, term


@nb.njit(cache=True)
def poisson_start(m):
    """(k, P(X = k)) where a sum over X ~ Poisson(m) may start: 0 up to `SMALL_MEAN` (the sums there as they
    always were), else `poisson_edge` (exp(-m) underflows to 0 past m = 745, which left such sums empty)."""
    if m <= SMALL_MEAN:
        return 0, math.exp(-m)
    k, term = poisson_edge(m)
    return int(k), term


@nb.njit(cache=True)
def poisson_cdf(x, m):
    """P(X <= x) for X ~ Poisson(m): summed from 0 up to a mean of `SMALL_MEAN`; past it, from x down
    (below the mean) or 1 - the upper tail from x + 1 up (above it), each sum outward from its largest
    term to 1e-17 of the total."""
    if x < 0.0:
        return 0.0
    if m <= 0.0:
        return 1.0
    x = math.floor(x)
    if m > SMALL_MEAN:
        if x < m:
            k, term = x, poisson_pmf(x, m)
            total = term
            while k > 0.0 and term > TAIL_STOP * total:
                term *= k / m
                k -= 1.0
                total += term
            return total
        k, term = x + 1.0, poisson_pmf(x + 1.0, m)
        over = term
        while term > TAIL_STOP * over:
            k += 1.0
            term *= m / k
            over += term
        return max(1.0 - over, 0.0)
    term = math.exp(-m)
    total = term
    k = 0.0
    while k < x:
        k += 1.0
        term *= m / k
        total += term
        if total >= 1.0 - 1e-15:
            return 1.0
    return min(total, 1.0)


@nb.njit(cache=True)
def poisson_quantile(q, m):
    """Smallest x with P(X <= x) >= q, X ~ Poisson(m), by an exact search of the CDF: for q < 1/2 up the
    CDF summed from below (from 0 up to `SMALL_MEAN`, else from `poisson_edge`); else, past the mean,
    down the upper tail P(X > x) summed from above (from where its terms fall under `TAIL_STOP` of the
    mode's), so a tail of 1e-9 keeps its relative precision."""
    if m <= 0.0 or q <= 0.0:
        return 0.0
    if q >= 1.0:
        return np.inf
    if m <= SMALL_MEAN:
        term = math.exp(-m)
        total = term
        k = 0
        while total < q and (term > 0.0 or k < m):
            k += 1
            term *= m / k
            total += term
        return float(k)
    if q < 0.5:
        k, term = poisson_edge(m)
        total = term
        while total < q:
            k += 1.0
            term *= m / k
            total += term
        return k
    k = math.floor(m)
    term = poisson_pmf(k, m)
    stop = TAIL_STOP * term
    while term >= stop:                              # up to where the upper tail starts
        k += 1.0
        term *= m / k
    over, room = 0.0, 1.0 - q                        # over: P(X > k)
    while k > 0.0 and over + term <= room:           # P(X > k - 1) = P(X > k) + P(X = k) still within
        over += term
        term *= k / m
        k -= 1.0
    return k


@nb.njit(cache=True)
def local_count(z, m):
    """A Poisson(m) count at standard-normal quantile z, Cornish-Fisher to first order (as a real number,
    not rounded: the local arrival rate of `tpot`'s quantiles)."""
    return max(0.0, m + z * math.sqrt(m) + (z * z - 1.0) / 6.0)


@nb.njit(cache=True)
def cornish_fisher(z, skew):
    """The standardised quantile at normal quantile z, corrected for skewness (Cornish-Fisher)."""
    return z + (z * z - 1.0) * skew / 6.0


@nb.njit(cache=True)
def normal_cdf(z):
    """Phi(z), the standard normal CDF."""
    return 0.5 * math.erfc(-z / math.sqrt(2.0))
