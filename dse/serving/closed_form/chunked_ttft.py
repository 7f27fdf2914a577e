"""Chunked prefill's time to first token (Numba; the model: dse.serving.closed_form.chunked).

TTFT = R + n full-chunk iterations (less what its last chunk lacks) + a slot wait: R the rest of the
iteration under way (length-biased); n = ceil((C + J S) / full + P / b), C the token backlog carried into
the next iteration (dse.serving.closed_form.token_backlog), J ~ Poisson(lambda (L - R)) the prompts that
arrived before it in the same iteration; the slot wait as in dse.serving.closed_form.slot_queue, at the
peakedness of the loop alone, 1 / (1 - g) (prompts never stall the decodes).

Names: ``budget_tokens`` b, the prompt tokens an iteration takes; ``prompt_iterations`` f = P / b, the
full iterations' worth of budget a prompt takes; ``service_s`` S = f x a full iteration, a prompt's work
in the backlog; ``backlog_p``, ``backlog_decay_per_s`` the backlog wait's tail C exp(-theta w)
(`backlog_wait`); ``wait_p``, ``wait_decay_per_s`` the slot wait's (`slot_wait`).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numba as nb
import numpy as np

from .chunk_interval import chunk_gain
from .slot_queue import slot_wait
from .tails import poisson_start
from .token_backlog import backlog_wait, carried_over

#: Poisson mass of the prompts ahead left out of a tail (counted as past t: an upper bound to 1e-9)
TAIL_MASS = 1e-9
#: bisections of TTFT's quantile (2^-16 of its bracket, a few us)
TTFT_BISECTIONS = 16
#: Gauss-Legendre nodes and weights on [0, 1] (8 points): the rest R of the iteration under way
GL_X = np.array([0.019855071751231856, 0.10166676129318664, 0.2372337950418355, 0.4082826787521751,
                 0.5917173212478249, 0.7627662049581645, 0.8983332387068134, 0.9801449282487681])
GL_W = np.array([0.05061426814518813, 0.11119051722668724, 0.15685332293894363, 0.18134189168918100,
                 0.18134189168918100, 0.15685332293894363, 0.11119051722668724, 0.05061426814518813])


@nb.njit(cache=True)
def chunk_tail(t, rate_req_s, lengths_s, shares, prompt_iterations, budget_tokens, decode_step, p0, pk,
               prompt_tokens, service_s, backlog_p, backlog_decay_per_s, wait_p, wait_decay_per_s):
    """P(TTFT > t) (module docstring): an arrival with R of the iteration under way left waits for it;
    its tokens then follow the backlog C carried into the next iteration and the J ~ Poisson(lambda (L -
    R)) prompts that arrived before it in this one, so its first token comes n = ceil((C + J S) / full + f)
    full-chunk iterations later, less what its last chunk lacks; plus the slot wait's exponential tail
    beyond the mean."""
    f, b = prompt_iterations, budget_tokens
    full = decode_step + p0 + pk * b / prompt_tokens
    total = 0.0
    for j in range(4):
        if shares[j] <= 0.0:
            continue
        L = lengths_s[j]
        part = 0.0
        for g in range(GL_X.shape[0] if L > 0.0 else 1):
            r = L * GL_X[g] if L > 0.0 else 0.0
            weight = GL_W[g] if L > 0.0 else 1.0
            m_ahead = rate_req_s * (L - r)
            J0, term = poisson_start(m_ahead)
            mass = 0.0
            over = 0.0
            J = J0
            while mass < 1.0 - TAIL_MASS and J < J0 + 1_000_000:
                if J > J0:
                    term *= m_ahead / J
                last = min(b, (1.0 + J + rate_req_s * r) * prompt_tokens)     # its last chunk, those after it in
                m = math.floor((t - r + pk * (b - last) / prompt_tokens) / full)  # iterations that fit before t
                x = (m - f - J * f) * full                                   # backlog that pushes it past m
                if x < 0.0 and f * J >= m:                                   # so for every larger J
                    break
                over += term * carried_over(x, rate_req_s, service_s, backlog_p, backlog_decay_per_s, full)
                mass += term
                J += 1
            part += weight * min(over + max(1.0 - mass, 0.0), 1.0)      # the rest of J's mass: past t
        total += shares[j] * part
    if wait_p > 0.0:
        mean = chunk_ttft_mean(rate_req_s, lengths_s, shares, f, b, decode_step, p0, pk, prompt_tokens, service_s,
                               0.0, np.inf)
        total += wait_p * (math.exp(-wait_decay_per_s * max(t - mean, 0.0)) if wait_decay_per_s > 0.0 else 1.0)
    return min(total, 1.0)


@nb.njit(cache=True)
def chunk_ttft_mean(rate_req_s, lengths_s, shares, prompt_iterations, budget_tokens, decode_step, p0, pk,
                    prompt_tokens, service_s, wait_p, wait_decay_per_s):
    """Mean TTFT: the rest of the iteration, E[n] full iterations (n = ceil(W / full + f); W zero with
    probability 1 - rho, else exponential with the Pollaczek-Khinchine mean S / (2 (1 - rho))), less the
    last chunk's shortfall, plus the slot wait's C / theta."""
    f, b = prompt_iterations, budget_tokens
    full = decode_step + p0 + pk * b / prompt_tokens
    rho = rate_req_s * service_s
    n = math.ceil(f)
    mu = service_s / (2.0 * (1.0 - rho)) / full if rho > 0.0 else 0.0     # E[W | W > 0] in iterations
    if mu > 0.0:                                     # W | W > 0 exponential: sum over m of P(n > m)
        n += rho * math.exp(-(math.ceil(f) - f) / mu) / -math.expm1(-1.0 / mu)
    total = 0.0
    for j in range(4):
        if shares[j] <= 0.0:
            continue
        m = rate_req_s * lengths_s[j]
        k0, term = poisson_start(m)
        mass = 0.0
        short = 0.0
        k = k0
        while mass < 1.0 - 1e-12 and (1.0 + k) * prompt_tokens < b:
            if k > k0:
                term *= m / k
            short += term * pk * (b - (1.0 + k) * prompt_tokens) / prompt_tokens
            mass += term
            k += 1
        total += shares[j] * (lengths_s[j] / 2.0 - short)
    return total + n * full + (wait_p / wait_decay_per_s if wait_p > 0.0 else 0.0)


@nb.njit(cache=True)
def chunk_ttft_quantile(q, rate_req_s, lengths_s, shares, prompt_iterations, budget_tokens, decode_step, p0, pk,
                        prompt_tokens, service_s, backlog_p, backlog_decay_per_s, wait_p, wait_decay_per_s):
    """TTFT's q-quantile (`chunk_tail`), by bisection."""
    full = decode_step + p0 + pk * budget_tokens / prompt_tokens
    lo, hi = 0.0, max(lengths_s[1], lengths_s[2]) + (math.ceil(prompt_iterations) + 1.0) * full
    if backlog_p > 0.0:
        hi += max(math.log(2.0 * backlog_p / (1.0 - q)), 0.0) / backlog_decay_per_s + full
    if wait_p > 0.0:
        hi += max(math.log(2.0 * wait_p / (1.0 - q)), 0.0) / max(wait_decay_per_s, 1e-9)
    for _ in range(TTFT_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if chunk_tail(mid, rate_req_s, lengths_s, shares, prompt_iterations, budget_tokens, decode_step, p0, pk,
                      prompt_tokens, service_s, backlog_p, backlog_decay_per_s, wait_p,
                      wait_decay_per_s) <= 1.0 - q:
            hi = mid
        else:
            lo = mid
    return hi


class Landing(NamedTuple):
    """`landing`'s: the iterations an arrival lands in, their lengths (s) and probabilities (four each),
    f = P / b, the decode step d of an iteration (s), a prompt's work S in the token backlog (s) and the
    batch slots held."""
    lengths_s: tuple
    shares: tuple
    prompt_iterations: float
    decode_step: float
    service_s: float
    slots_held: float


@nb.njit(cache=True)
def landing(rate_req_s, decode_interval_s, in_flight, chunk_share, budget_tokens, d1, slope, p0, pk, prompt_tokens):
    """`Landing`: the iterations an arrival lands in (lengths and probabilities: idle, without a chunk, with one;
    ``chunk_share`` q the share of iterations with a chunk), f = P / b, the decode d of an iteration, a
    prompt's work S in the token backlog (f full iterations) and the batch slots held (the sequences in
    flight and the prompts not yet through their first token: lambda x the mean TTFT, Little)."""
    N, q, b = in_flight, chunk_share, budget_tokens
    d = d1 * (1.0 - math.exp(-N)) + slope * max(N - 1.0 + math.exp(-N), 0.0)    # decode of Poisson(N) others
    f = prompt_tokens / b                            # iterations' worth of budget one prompt takes
    L1 = d + p0 + pk * rate_req_s * decode_interval_s / max(q, 1e-12)   # with a chunk: lambda D prompts over q
    idle = math.exp(-N) * (1.0 - q)
    w0, w1 = (1.0 - q) * d, q * L1                   # time shares (length-biased landing)
    total = w0 + w1
    L = (0.0, d, L1, 0.0)
    w = (idle, (1.0 - idle) * w0 / total, (1.0 - idle) * w1 / total, 0.0) if total > 0.0 else (1.0, 0.0, 0.0, 0.0)
    service_s = f * (d + p0 + pk * b / prompt_tokens)
    held = N + rate_req_s * chunk_ttft_mean(rate_req_s, L, w, f, b, d, p0, pk, prompt_tokens, service_s, 0.0,
                                            np.inf)
    return Landing(L, w, f, d, service_s, held)


class ChunkParts(NamedTuple):
    """What chunked prefill's TTFT needs (`chunk_parts`): `Landing`'s fields and the token backlog's and
    the slot wait's tails, C exp(-theta w) each (probability, decay rate in 1/s)."""
    lengths_s: tuple
    shares: tuple
    prompt_iterations: float
    decode_step: float
    service_s: float
    backlog_p: float
    backlog_decay_per_s: float
    wait_p: float
    wait_decay_per_s: float
    slots_held: float


@nb.njit(cache=True)
def chunk_parts(rate_req_s, decode_interval_s, in_flight, chunk_share, budget_tokens, d1, slope, p0, pk,
                prompt_tokens, output_tokens, slots):
    """`ChunkParts`, what TTFT's distribution needs (module docstring): `landing`'s, the token backlog's (C, theta)
    (`backlog_wait`) and the slot wait's (C, theta) (`slot_wait` at peakedness 1 / (1 - g))."""
    at = landing(rate_req_s, decode_interval_s, in_flight, chunk_share, budget_tokens, d1, slope, p0, pk,
                 prompt_tokens)
    backlog_p, backlog_decay_per_s = backlog_wait(rate_req_s, at.service_s)
    peaked = 1.0 / (1.0 - chunk_gain(rate_req_s, slope, pk, output_tokens))
    wait_p, wait_decay_per_s = slot_wait(rate_req_s, at.slots_held, slots, peaked)
    return ChunkParts(lengths_s=at.lengths_s, shares=at.shares, prompt_iterations=at.prompt_iterations,
                      decode_step=at.decode_step, service_s=at.service_s, backlog_p=backlog_p,
                      backlog_decay_per_s=backlog_decay_per_s, wait_p=wait_p, wait_decay_per_s=wait_decay_per_s,
                      slots_held=at.slots_held)
