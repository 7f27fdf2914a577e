"""Continuous batching's time to first token (Numba; the model: dse.serving.closed_form.continuous).

TTFT = W + R + p0 + pk (1 + K): the wait W for a slot (dse.serving.closed_form.slot_queue), then the rest
R of the iteration under way, a decode or a prefill (uniform over it; arrivals see time averages, PASTA,
and land in long iterations more often), and the prefill of its batch: itself and the K ~ Poisson(lambda
L) others arriving in that iteration of length L.

Names: ``lengths_s`` and ``shares`` the iterations an arrival lands in and their probabilities (four
each), ``wait_p`` and ``wait_decay_per_s`` the slot wait's probability and tail rate (`slot_wait`).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numba as nb

from .fixed_point import decode_step_s, loop_gain
from .slot_queue import continuous_slot_wait
from .tails import poisson_quantile, poisson_start

#: bisections of TTFT's quantile (2^-24 of about 2 decode intervals)
QUANTILE_BISECTIONS = 24
#: the quantile of the arrivals in an iteration that bounds TTFT's quantile search from above
BRACKET_Q = 1.0 - 1e-9


@nb.njit(cache=True)
def iterations(rate_req_s, decode_interval_s, decode_step, sd_s, p0, pk):
    """The iterations an arrival can land in, as (lengths, probabilities), four each: decode iterations of
    length normal around d (deviation ``sd_s``; three Gauss-Hermite points) and the prefill iterations
    filling the rest of each interval D (their mean length: the chain's prompts lambda D over its
    iterations); an arrival lands in an iteration in proportion to its length (length-biased sampling),
    so the weights are the time shares."""
    T = max(decode_interval_s - decode_step, 0.0)
    h = 1.7320508075688772 * sd_s
    L0, L1, L2 = max(decode_step - h, 0.0), max(decode_step, 0.0), max(decode_step + h, 0.0)
    a1 = rate_req_s * decode_step
    first = a1 / (1.0 - math.exp(-a1)) if a1 > 1e-12 else 1.0      # prompts of a prefill after a decode
    L3 = p0 + pk * first
    if p0 > 0.0 and T > 0.0:                                        # T = n p0 + pk lambda D over n iterations
        n = max((T - pk * rate_req_s * decode_interval_s) / p0, 1e-12)
        L3 = T / n if n >= 1e-9 else L3
    w0, w1, w2, w3 = L0 / 6.0, L1 * 2.0 / 3.0, L2 / 6.0, T
    total = w0 + w1 + w2 + w3
    return (L0, L1, L2, L3), (w0 / total, w1 / total, w2 / total, w3 / total)


@nb.njit(cache=True)
def ttft_tail(t, rate_req_s, lengths_s, shares, p0, pk, wait_p, wait_decay_per_s):
    """P(TTFT > t). Without a wait, TTFT is X: over the iterations an arrival lands in, the rest R ~ U(0,
    L) of it, then the prefill p0 + pk (1 + K) of itself and the K ~ Poisson(lambda L) others arriving in
    it. With probability C a request first waits for a slot, an exponential wait of rate theta:
    P(X + W > t) = P(X > t) + C E[exp(-theta (t - X)); X <= t], the expectation over R in closed form per
    iteration and K (one pass for both; K summed from `poisson_start`)."""
    below = 0.0
    waited = 0.0
    theta = wait_decay_per_s
    for j in range(4):
        if shares[j] <= 0.0:
            continue
        L = lengths_s[j]
        m = rate_req_s * L
        k0, term = poisson_start(m)
        mass = 0.0
        part = 0.0
        wait = 0.0
        k = k0
        while mass < 1.0 - 1e-12 and k < k0 + 1_000_000:
            if k > k0:
                term *= m / k
            ready = t - p0 - pk * (1.0 + k)          # room left for R and the wait
            if ready <= 0.0:
                break
            if L > 0.0:
                part += term * min(ready / L, 1.0)
                if wait_p > 0.0:
                    upper = min(L, ready)
                    wait += term * (math.exp(-theta * (ready - upper)) - math.exp(-theta * ready)) / (theta * L)
            else:
                part += term
                if wait_p > 0.0:
                    wait += term * math.exp(-theta * ready)
            mass += term
            k += 1
        below += shares[j] * part
        waited += shares[j] * wait
    return 1.0 - below + wait_p * waited


@nb.njit(cache=True)
def ttft_mean(rate_req_s, lengths_s, shares, p0, pk):
    """Mean TTFT without a wait (`ttft_tail`'s X)."""
    total = 0.0
    for j in range(4):
        total += shares[j] * (lengths_s[j] / 2.0 + p0 + pk * (1.0 + rate_req_s * lengths_s[j]))
    return total


@nb.njit(cache=True)
def ttft_quantile(q, rate_req_s, lengths_s, shares, p0, pk, wait_p, wait_decay_per_s):
    """TTFT's q-quantile (`ttft_tail`), by bisection from above the longest iteration's rest and the
    prefill of the `BRACKET_Q` quantile of the arrivals in it, plus the wait's tail beyond 1 - q."""
    longest = max(max(lengths_s[0], lengths_s[1]), max(lengths_s[2], lengths_s[3]))
    lo = p0 + pk
    hi = longest + p0 + pk * (2.0 + poisson_quantile(BRACKET_Q, rate_req_s * longest))
    if wait_p > 1.0 - q:
        hi += math.log(wait_p / (1.0 - q)) / wait_decay_per_s
    for _ in range(QUANTILE_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if ttft_tail(mid, rate_req_s, lengths_s, shares, p0, pk, wait_p, wait_decay_per_s) <= 1.0 - q:
            hi = mid
        else:
            lo = mid
    return hi


@nb.njit(cache=True)
def interval_sd(rate_req_s, decode_interval_s, in_flight, d1, slope, p0, pk, output_tokens):
    """Deviation of one iteration's length: slope x the sequences in flight, Poisson(N) with the loop's
    variance amplification 1 / (1 - g) (dse.serving.closed_form.tpot.shot_noise)."""
    g = loop_gain(rate_req_s, decode_interval_s, d1, slope, p0, pk, output_tokens)
    return slope * math.sqrt(in_flight / max(1.0 - g, 1e-9))


class TtftParts(NamedTuple):
    """What TTFT's distribution needs (`ttft_parts`): the iterations an arrival lands in, their lengths (s)
    and probabilities (four each), and the slot wait's probability and tail rate (1/s)."""
    lengths_s: tuple
    shares: tuple
    wait_p: float
    wait_decay_per_s: float


@nb.njit(cache=True)
def ttft_parts(rate_req_s, decode_interval_s, in_flight, d1, slope, p0, pk, output_tokens, slots):
    """`TtftParts`, what TTFT's distribution needs at a steady state (D, N): the iterations' lengths and probabilities
    (`iterations`) and the slot wait's probability and tail rate (`continuous_slot_wait`)."""
    d = decode_step_s(rate_req_s, decode_interval_s, d1, slope, output_tokens)
    sd = interval_sd(rate_req_s, decode_interval_s, in_flight, d1, slope, p0, pk, output_tokens)
    lengths_s, shares = iterations(rate_req_s, decode_interval_s, d, sd, p0, pk)
    wait_p, wait_decay_per_s = continuous_slot_wait(rate_req_s, decode_interval_s, in_flight, d1, slope, p0, pk,
                                                    output_tokens, slots)
    return TtftParts(lengths_s, shares, wait_p, wait_decay_per_s)
