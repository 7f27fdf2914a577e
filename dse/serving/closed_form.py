"""Continuous batching in closed form, over arrays of designs (Numba): the serving objectives' model.

Requests arrive as a Poisson stream at rate lambda, each with P prompt and O >= 2 output tokens. The
server runs iterations (Orca / vLLM without chunking): before an iteration it prefills, in one batch,
every prompt that arrived during the previous one; otherwise it decodes one token of each of the N
sequences in flight. A design's steps are affine (the step model at two batch sizes and two prompt counts,
dse.serving.analytic): ``decode(n) = d1 + s (n - 1)``, ``prefill(k) = p0 + pk k``.

With D the mean time between two decode steps of a sequence:

* D = d + chain: the decode step d = decode(N) + s (z - 1) a sequence sees (itself and the others in
  flight: E[N^2] / E[N] = N + z, z = 1 / (1 - g) the spread the loop gain g leaves) and the prefills
  chained after it (the prompts that arrived during it, then those arriving during that prefill: a
  geometric chain of ratio lambda (p0 + pk)); Little's law N = lambda (O - 1) D. The rate saturates
  when this has no solution or the batch slots held (N and the prompts being prefilled) reach the
  sequences the batch and the KV cache hold (``n_max``); short of that a request may wait for a slot
  (Erlang C at the slots' peakedness, with a diffusion tail: `slot_wait`);
* TTFT = W + R + p0 + pk (1 + K): the wait W for a slot, then the rest R of the iteration under way, a
  decode or a prefill (uniform over it; arrivals see time averages, PASTA, and land in long iterations
  more often), and the prefill of its batch: itself and the K ~ Poisson(lambda L) others arriving in
  that iteration of length L (`ttft_tail`);
* TPOT: its mean is D; its spread is shot noise of the arrivals over a request's life (the sequences
  in flight and the prompts prefilled meanwhile, `tpot_moments`), and its quantiles are the interval at
  the local arrival rate a life sees at that quantile (the fixed point is convex in the rate: busy
  stretches skew TPOT right; `tpot_quantile`);
* p99s are the 99th percentiles; goodput is lambda x P(TTFT <= SLO) x P(TPOT <= SLO) (0 past
  saturation); ``max_rate_at_slo`` is the largest rate whose p99 TTFT and TPOT meet the SLOs (bisection;
  both grow with the rate; the saturation rate by false position on the batch slots held).

Checked against the discrete-event simulation (dse.serving.simulate) in tests/test_serving_closed_form.py.
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np

from .fixed_point import decode_s, free_interval, interval, loop_gain, slots_busy

Q99 = 0.99
Z99 = 2.3263478740408408           # the standard normal's 99th percentile
#: columns of `serving_metrics`
COLUMNS = ("ttft_mean_s", "tpot_mean_s", "ttft_p99_s", "tpot_p99_s", "goodput_req_s", "max_rate_at_slo_req_s",
           "saturation_req_s", "in_flight")
#: bisections of TTFT's quantile (2^-24 of about 2 decode intervals) and of TPOT's normal quantile
#: (12 / 2^14 of z)
QUANTILE_BISECTIONS = 24
Z_BISECTIONS = 14
#: bisections of a rate (saturation, max_rate_at_slo: 2^-16 of the saturation rate)
RATE_BISECTIONS = 16
#: a request's life over the correlation time of the sequences in flight without the loop: where an
#: Ornstein-Uhlenbeck average over the life keeps 2/3 of the variance, as the M/D/infinity queue's does
#: (solves 2 (x - 1 + exp(-x)) / x^2 = 2/3)
OU_LIFE = 1.3607795323484027


@nb.njit(cache=True)
def peakedness(rate, D, d1, slope, p0, pk, output):
    """Variance over mean of the batch slots held: 1 / (1 - g) from the loop (a sequence's decode
    lengthens with the others in flight: a Hawkes count over a window its box kernel spans, whose index of
    dispersion is exactly 1 / (1 - g)) times 1 / (1 - rho)^2 from the prefills (every arrival stalls the
    batch for its prefill, during which more arrive: a branching cluster of ratio rho = lambda (p0 + pk),
    the prefill chain's, has index of dispersion 1 / (1 - rho)^2)."""
    g = loop_gain(rate, D, d1, slope, p0, pk, output)
    rho = rate * (p0 + pk)
    return 1.0 / max((1.0 - g) * (1.0 - rho) ** 2, 1e-9)


@nb.njit(cache=True)
def slot_wait(rate, D, N, d1, slope, p0, pk, output, n_max):
    """(probability C a request waits for a batch slot, rate theta of its wait's exponential tail). The
    slots are the n_max servers of a queue holding each request S = A / lambda seconds, A the slots held
    (`slots_busy`); their occupancy is peaked (variance z times its mean, `peakedness`), so C is Erlang C
    at n_max / z servers and load A / z (Hayward's approximation for peaked traffic, Erlang B's
    recursion). Once the slots are full the queue drains at mu - lambda, mu = n_max / S, with departures
    as bursty as the occupancy was: a Brownian queue of variance rate lambda (1 + z), whose wait has the
    tail rate theta = 2 (mu - lambda) mu / (lambda (1 + z)) (the diffusion approximation of a G/G/c queue
    in heavy traffic)."""
    A = slots_busy(rate, D, N, p0, pk)
    if not np.isfinite(n_max) or rate <= 0.0:
        return 0.0, np.inf
    z = peakedness(rate, D, d1, slope, p0, pk, output)
    if n_max - A > 6.0 * math.sqrt(z * A) + 10.0:
        return 0.0, np.inf
    c, load = n_max / z, A / z
    B = 1.0
    for k in range(1, int(c) + 1):
        B = load * B / (k + load * B)
    C = min(c * B / (c - load * (1.0 - B)), 1.0) if c > load else 1.0
    mu = n_max * rate / A
    return C, 2.0 * (mu - rate) * mu / (rate * (1.0 + z))


@nb.njit(cache=True)
def poisson_cdf(x, m):
    """P(X <= x) for X ~ Poisson(m) (normal approximation with continuity correction past m = 400)."""
    if x < 0.0:
        return 0.0
    if m <= 0.0:
        return 1.0
    if m > 400.0:
        z = (math.floor(x) + 0.5 - m) / math.sqrt(m)
        return 0.5 * math.erfc(-z / math.sqrt(2.0))
    term = math.exp(-m)
    total = term
    k = 0
    while k < math.floor(x):
        k += 1
        term *= m / k
        total += term
        if total >= 1.0 - 1e-15:
            return 1.0
    return min(total, 1.0)


@nb.njit(cache=True)
def poisson_quantile(q, m):
    """Smallest x with P(X <= x) >= q, X ~ Poisson(m)."""
    if m <= 0.0:
        return 0.0
    if m > 400.0:
        return max(0.0, math.ceil(m + 2.3263478740408408 * math.sqrt(m) - 0.5))
    term = math.exp(-m)
    total = term
    k = 0
    while total < q:
        k += 1
        term *= m / k
        total += term
    return float(k)


@nb.njit(cache=True)
def iterations(rate, D, d, sd, p0, pk):
    """The iterations an arrival can land in, as (lengths, probabilities), four each: decode iterations of
    length normal around d (deviation ``sd``; three Gauss-Hermite points) and the prefill iterations
    filling the rest of each interval D (their mean length: the chain's prompts lambda D over its
    iterations); an arrival lands in an iteration in proportion to its length (length-biased sampling),
    so the weights are the time shares."""
    T = max(D - d, 0.0)
    h = 1.7320508075688772 * sd
    L0, L1, L2 = max(d - h, 0.0), max(d, 0.0), max(d + h, 0.0)
    a1 = rate * d
    first = a1 / (1.0 - math.exp(-a1)) if a1 > 1e-12 else 1.0      # prompts of a prefill after a decode
    L3 = p0 + pk * first
    if p0 > 0.0 and T > 0.0:                                        # T = n p0 + pk lambda D over n iterations
        n = max((T - pk * rate * D) / p0, 1e-12)
        L3 = T / n if n >= 1e-9 else L3
    w0, w1, w2, w3 = L0 / 6.0, L1 * 2.0 / 3.0, L2 / 6.0, T
    total = w0 + w1 + w2 + w3
    return (L0, L1, L2, L3), (w0 / total, w1 / total, w2 / total, w3 / total)


@nb.njit(cache=True)
def ttft_tail(t, rate, L, w, p0, pk, C, theta):
    """P(TTFT > t). Without a wait, TTFT is X: over the iterations (lengths ``L``, probabilities ``w``:
    `iterations`) an arrival lands in, the rest R ~ U(0, L) of it, then the prefill p0 + pk (1 + K) of
    itself and the K ~ Poisson(lambda L) others arriving in it. With probability C a request first waits
    for a slot, an exponential wait of rate theta (`slot_wait`): P(X + W > t) = P(X > t) + C E[exp(-theta
    (t - X)); X <= t], the expectation over R in closed form per iteration and K (one pass for both)."""
    below = 0.0
    waited = 0.0
    for j in range(4):
        if w[j] <= 0.0:
            continue
        m = rate * L[j]
        term = math.exp(-m)
        mass = 0.0
        part = 0.0
        wait = 0.0
        k = 0
        while mass < 1.0 - 1e-12 and k < 1_000_000:
            if k > 0:
                term *= m / k
            ready = t - p0 - pk * (1.0 + k)          # room left for R and the wait
            if ready <= 0.0:
                break
            if L[j] > 0.0:
                part += term * min(ready / L[j], 1.0)
                if C > 0.0:
                    upper = min(L[j], ready)
                    wait += term * (math.exp(-theta * (ready - upper)) - math.exp(-theta * ready)) / (theta * L[j])
            else:
                part += term
                if C > 0.0:
                    wait += term * math.exp(-theta * ready)
            mass += term
            k += 1
        below += w[j] * part
        waited += w[j] * wait
    return 1.0 - below + C * waited


@nb.njit(cache=True)
def ttft_mean(rate, L, w, p0, pk):
    """Mean TTFT without a wait (`ttft_tail`'s X)."""
    total = 0.0
    for j in range(4):
        total += w[j] * (L[j] / 2.0 + p0 + pk * (1.0 + rate * L[j]))
    return total


@nb.njit(cache=True)
def ttft_quantile(q, rate, L, w, p0, pk, C, theta):
    """TTFT's q-quantile (`ttft_tail`), by bisection."""
    longest = max(max(L[0], L[1]), max(L[2], L[3]))
    lo, hi = p0 + pk, longest + p0 + pk * (2.0 + poisson_quantile(1.0 - 1e-9, rate * longest))
    if C > 1.0 - q:
        hi += math.log(C / (1.0 - q)) / theta
    for _ in range(QUANTILE_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if ttft_tail(mid, rate, L, w, p0, pk, C, theta) <= 1.0 - q:
            hi = mid
        else:
            lo = mid
    return hi


@nb.njit(cache=True)
def interval_sd(rate, D, N, d1, slope, p0, pk, output):
    """Deviation of one iteration's length: slope x the sequences in flight, Poisson(N) with the loop's
    variance amplification 1 / (1 - g) (`tpot_moments`)."""
    g = loop_gain(rate, D, d1, slope, p0, pk, output)
    return slope * math.sqrt(N / max(1.0 - g, 1e-9))


@nb.njit(cache=True)
def per_prompt(rate, D, d, pk):
    """Prefill seconds per arriving prompt: the chain's time over the lambda D prompts it prefills."""
    a = rate * D
    return (D - d) / a if a > 0.0 else pk


@nb.njit(cache=True)
def tpot_moments(rate, D, N, d1, slope, p0, pk, output):
    """(mean, standard deviation, skewness) of a request's TPOT: the Poisson arrivals over its life
    T = (O - 1) D each add slope x their overlap with it / T (the sequences in flight, averaged) and, when
    they arrive during it, one prefill of c / (O - 1): a shot-noise sum whose cumulants are
    lambda x the integrals of the kernel's powers (2/3, 1/2 and 1 of T for the overlap, squared, cubed).
    The loop (more sequences lengthen the interval, which keeps more in flight) slows the fluctuations'
    decay by 1 - g, g = dD/dD of the fixed point's right side: as for an Ornstein-Uhlenbeck process whose
    restoring rate shrinks by that factor, the variance grows by 1 / (1 - g) and its correlation time by
    as much, so a life's average of the sequences in flight keeps more of it (`OU_LIFE`)."""
    d = decode_s(rate, D, d1, slope, output)
    sd, skew = shot_noise(N, slope, per_prompt(rate, D, d, pk) / (output - 1.0),
                          loop_gain(rate, D, d1, slope, p0, pk, output))
    return D, sd, skew


@nb.njit(cache=True)
def shot_noise(N, slope, b, g):
    """(deviation, skewness) of a request's TPOT (`tpot_moments`): ``N`` sequences in flight on average,
    each adding ``slope``; ``b`` the prefill seconds an arrival adds to each of a life's O - 1 tokens;
    ``g`` the loop gain."""
    g = min(g, 1.0 - 1e-9)
    x = OU_LIFE * (1.0 - g)
    averaged = 2.0 * (x - 1.0 + math.exp(-x)) / (x * x)         # 2/3 without the loop (g = 0)
    var = N * (averaged * slope ** 2 + slope * b + b ** 2) / (1.0 - g)
    k3 = N * (0.5 * slope ** 3 + slope ** 2 * b + 1.5 * slope * b ** 2 + b ** 3)
    sd = math.sqrt(var)
    return sd, (k3 / sd ** 3 if sd > 0.0 else 0.0)


@nb.njit(cache=True)
def cornish_fisher(z, skew):
    """The standardised quantile at normal quantile z, corrected for skewness (Cornish-Fisher)."""
    return z + (z * z - 1.0) * skew / 6.0


@nb.njit(cache=True)
def tpot_spread(rate, D, N, d1, slope, p0, pk, output, n_max):
    """What `tpot_quantile` needs whatever the quantile: TPOT's mean, deviation and skewness
    (`tpot_moments`) and the effective window m of arrivals (NaN where the interval does not grow with the
    rate there: the quantile is then the moments' Cornish-Fisher one)."""
    mean, sd, skew = tpot_moments(rate, D, N, d1, slope, p0, pk, output)
    h = 1e-4 * rate
    up = interval(rate + h, d1, slope, p0, pk, output, n_max)[0]
    if not (sd > 0.0 and np.isfinite(up) and up > D):
        return mean, sd, skew, np.nan
    return mean, sd, skew, (rate * (up - D) / h / sd) ** 2


@nb.njit(cache=True)
def tpot_at(z, rate, D, spread, d1, slope, p0, pk, output, n_max, sat):
    """`tpot_quantile` at standard-normal quantile z given its `tpot_spread`."""
    mean, sd, skew, m = spread
    if not np.isfinite(m):
        return mean + sd * cornish_fisher(z, skew)
    q = max(0.0, m + z * math.sqrt(m) + (z * z - 1.0) / 6.0)            # Poisson quantile (Cornish-Fisher)
    at = interval(min(rate * q / m, sat), d1, slope, p0, pk, output, n_max)[0]
    if not np.isfinite(at):          # saturation to rounding: the largest rate below it that has one
        at = interval(max(rate, sat * (1.0 - 2.0 ** -RATE_BISECTIONS)), d1, slope, p0, pk, output, n_max)[0]
    return mean - D + at


@nb.njit(cache=True)
def tpot_quantile(z, rate, D, N, d1, slope, p0, pk, output, n_max, sat):
    """TPOT at standard-normal quantile z: the interval D(lambda') at the local rate lambda' a request's
    life sees at that quantile (the fixed point is convex in the rate: busy stretches skew TPOT right).
    The local rate is Poisson over an effective window of m arrivals, m set so that the linearised
    spread D'(lambda) lambda / sqrt(m) equals `tpot_moments`' deviation; a local rate past the design's
    saturation ``sat`` (`saturation`) fills the batch: the interval stays at saturation's."""
    return tpot_at(z, rate, D, tpot_spread(rate, D, N, d1, slope, p0, pk, output, n_max), d1, slope, p0, pk, output,
                   n_max, sat)


@nb.njit(cache=True)
def tpot_cdf(t, rate, D, N, d1, slope, p0, pk, output, n_max, sat):
    """P(TPOT <= t): `tpot_quantile` inverted by bisection on the normal quantile z (its spread computed
    once)."""
    spread = tpot_spread(rate, D, N, d1, slope, p0, pk, output, n_max)
    lo, hi = -6.0, 6.0
    if tpot_at(lo, rate, D, spread, d1, slope, p0, pk, output, n_max, sat) >= t:
        return 0.0
    if tpot_at(hi, rate, D, spread, d1, slope, p0, pk, output, n_max, sat) <= t:
        return 1.0
    for _ in range(Z_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if tpot_at(mid, rate, D, spread, d1, slope, p0, pk, output, n_max, sat) <= t:
            lo = mid
        else:
            hi = mid
    return 0.5 * math.erfc(-lo / math.sqrt(2.0))


@nb.njit(cache=True)
def ttft_parts(rate, D, N, d1, slope, p0, pk, output, n_max):
    """What TTFT's distribution needs at a steady state (D, N): the iterations' lengths and probabilities
    (`iterations`) and the slot wait's probability and tail rate (`slot_wait`)."""
    d = decode_s(rate, D, d1, slope, output)
    L, w = iterations(rate, D, d, interval_sd(rate, D, N, d1, slope, p0, pk, output), p0, pk)
    C, theta = slot_wait(rate, D, N, d1, slope, p0, pk, output, n_max)
    return L, w, C, theta


@nb.njit(cache=True)
def p99s(rate, d1, slope, p0, pk, output, n_max, sat):
    """(TTFT p99, TPOT p99, D, N) at ``rate`` (inf past saturation ``sat``)."""
    D, N = interval(rate, d1, slope, p0, pk, output, n_max)
    if not np.isfinite(D):
        return np.inf, np.inf, D, N
    L, w, C, theta = ttft_parts(rate, D, N, d1, slope, p0, pk, output, n_max)
    ttft = ttft_quantile(Q99, rate, L, w, p0, pk, C, theta)
    return ttft, tpot_quantile(Z99, rate, D, N, d1, slope, p0, pk, output, n_max, sat), D, N


@nb.njit(cache=True)
def meets_slo(rate, d1, slope, p0, pk, output, n_max, slo_ttft, slo_tpot, sat):
    """Whether the p99 TTFT and TPOT at ``rate`` are within the SLOs (`p99s` without its quantile
    searches: P(TTFT > SLO) <= 0.01, TPOT's quantile)."""
    D, N = interval(rate, d1, slope, p0, pk, output, n_max)
    if not np.isfinite(D):
        return False
    if tpot_quantile(Z99, rate, D, N, d1, slope, p0, pk, output, n_max, sat) > slo_tpot:
        return False
    L, w, C, theta = ttft_parts(rate, D, N, d1, slope, p0, pk, output, n_max)
    return ttft_tail(slo_ttft, rate, L, w, p0, pk, C, theta) <= 1.0 - Q99


@nb.njit(cache=True, inline="always")
def next_rate(lo, f_lo, hi, f_hi, tol, steps):
    """The next rate to try inside the bracket (lo, hi) of a margin (<= 0 at lo, > 0 at hi): false position
    while both ends' margins are finite, the midpoint where one is not (no fixed point there) or after
    `RATE_BISECTIONS` steps (a safeguard: where false position creeps along a curved margin; 0.5 % of 2,000
    random designs reach it)."""
    if np.isfinite(f_lo) and np.isfinite(f_hi) and f_hi > f_lo and steps < RATE_BISECTIONS:
        mid = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        return min(max(mid, lo + 0.5 * tol), hi - 0.5 * tol)
    return 0.5 * (lo + hi)


@nb.njit(cache=True, inline="always")
def narrow(lo, f_lo, hi, f_hi, kept, mid, f, below):
    """The bracket after trying ``mid`` (margin ``f``, on the low side when ``below``); Illinois: an end kept
    twice running has its margin halved, so false position does not stall at it. ``kept``: the end kept
    last (1 hi, -1 lo)."""
    if below:
        return mid, f, hi, f_hi * 0.5 if kept == 1 else f_hi, 1
    return lo, f_lo * 0.5 if kept == -1 else f_lo, mid, f, -1


@nb.njit(cache=True)
def slot_margin(rate, d1, slope, p0, pk, output, n_max):
    """Batch slots held at ``rate`` less those there are (< 0: a steady state; inf: no fixed point)."""
    D, N = free_interval(rate, d1, slope, p0, pk, output)
    return slots_busy(rate, D, N, p0, pk) - n_max if np.isfinite(D) else np.inf


@nb.njit(cache=True)
def saturation(d1, slope, p0, pk, output, n_max):
    """The largest rate with a steady state (`interval` finite), at most 1 / (p0 + pk) (the prefill chain's
    bound) and 1 / (s (O - 1)) (where decode alone grows without bound), to 2^-RATE_BISECTIONS of that
    bound and from below. The slots held grow smoothly with the rate up to the batch limit, so the bracket
    shrinks by false position (`next_rate`, `narrow`) where the fixed point exists and by bisection
    where it does not: a median of 9 steps (90 % within 11, 2,000 random designs) where bisection took 16."""
    hi = 1.0 / (p0 + pk)
    if slope > 0.0:
        hi = min(hi, 1.0 / (slope * (output - 1.0)))
    if np.isfinite(interval(hi * (1.0 - 1e-9), d1, slope, p0, pk, output, n_max)[0]):
        return hi
    tol = hi * 2.0 ** -RATE_BISECTIONS
    lo, f_lo = 0.0, -n_max                       # no requests: no slots held
    f_hi = slot_margin(hi, d1, slope, p0, pk, output, n_max)
    if not f_hi >= 0.0:
        f_hi = np.inf                             # past the prefill chain's or decode's bound: no steady state
    kept = 0
    steps = 0
    while hi - lo > tol:
        mid = next_rate(lo, f_lo, hi, f_hi, tol, steps)
        f = slot_margin(mid, d1, slope, p0, pk, output, n_max)
        lo, f_lo, hi, f_hi, kept = narrow(lo, f_lo, hi, f_hi, kept, mid, f, f < 0.0)
        steps += 1
    return lo


@nb.njit(cache=True)
def serving_metrics(rates, d1, slope, p0, pk, output, n_max, slo_ttft, slo_tpot):
    """`COLUMNS` of every design (arrays ``rates``, ``d1``, ``slope``, ``p0``, ``pk``, ``n_max``; scalars the rest); a
    design that cannot serve one request (n_max < 1 or a non-finite step) gets inf latencies, 0 rates."""
    n = d1.shape[0]
    out = np.zeros((n, len(COLUMNS)))
    for i in range(n):
        rate = rates[i]
        if not (n_max[i] >= 1.0 and np.isfinite(d1[i]) and np.isfinite(p0[i]) and np.isfinite(pk[i])
                and np.isfinite(slope[i]) and d1[i] > 0.0 and p0[i] + pk[i] > 0.0):
            out[i, :4] = np.inf
            continue
        sat = saturation(d1[i], slope[i], p0[i], pk[i], output, n_max[i])
        ttft99, tpot99, D, N = p99s(rate, d1[i], slope[i], p0[i], pk[i], output, n_max[i], sat)
        if np.isfinite(D):
            out[i, 1] = tpot_moments(rate, D, N, d1[i], slope[i], p0[i], pk[i], output)[0]
            L, w, C, theta = ttft_parts(rate, D, N, d1[i], slope[i], p0[i], pk[i], output, n_max[i])
            out[i, 0] = ttft_mean(rate, L, w, p0[i], pk[i]) + C / theta
            out[i, 4] = rate * (1.0 - ttft_tail(slo_ttft, rate, L, w, p0[i], pk[i], C, theta)) * \
                tpot_cdf(slo_tpot, rate, D, N, d1[i], slope[i], p0[i], pk[i], output, n_max[i], sat)
        else:
            out[i, 0] = out[i, 1] = np.inf
        out[i, 2], out[i, 3] = ttft99, tpot99
        lo, hi = 0.0, sat
        if meets_slo(1e-9 * sat, d1[i], slope[i], p0[i], pk[i], output, n_max[i], slo_ttft, slo_tpot, sat):
            for _ in range(RATE_BISECTIONS):
                mid = 0.5 * (lo + hi)
                if meets_slo(mid, d1[i], slope[i], p0[i], pk[i], output, n_max[i], slo_ttft, slo_tpot, sat):
                    lo = mid
                else:
                    hi = mid
        out[i, 5] = lo
        out[i, 6] = sat
        out[i, 7] = N
    return out
