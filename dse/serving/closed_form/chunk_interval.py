"""Chunked prefill's iteration as a fixed point (Numba; the model: dse.serving.closed_form.chunked): the
mean iteration D a sequence sees is its decode (itself and the others in flight, N + z) plus the chunk
(pk for each of the lambda D prompts arriving per iteration, p0 in the share q of iterations that carry
one), N = lambda (O - 1) D (Little). The loop gain does not depend on D, so D is a fixed point in q alone.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numba as nb
import numpy as np

from .fixed_point import decode_step_s

#: fixed-point steps on the chunk share q at most (it converges geometrically, to 1e-12 in about 10)
Q_STEPS = 60


@nb.njit(cache=True)
def chunk_gain(rate_req_s, slope, pk, output_tokens):
    """The loop gain g = s lambda (O - 1) / (1 - lambda pk) (inf where lambda pk >= 1)."""
    r = rate_req_s * pk
    return slope * rate_req_s * (output_tokens - 1.0) / (1.0 - r) if r < 1.0 else np.inf


class ChunkInterval(NamedTuple):
    """`chunk_interval`'s steady state: the decode interval D (s), the sequences in flight N, the share q
    of iterations with a prompt chunk, the prompt budget b of an iteration (tokens) and the token queue's
    utilisation rho."""
    decode_interval_s: float
    in_flight: float
    chunk_share: float
    budget_tokens: float
    token_utilisation: float


@nb.njit(cache=True)
def chunk_interval(rate_req_s, d1, slope, p0, pk, prompt_tokens, output_tokens, chunk_tokens):
    """`ChunkInterval` (D, N, q, b, rho): the mean iteration a sequence sees (its decode interval), the
    sequences in flight, the share of iterations with a prompt chunk, the prompt budget per iteration b =
    chunk - N and the token queue's utilisation rho = lambda P D_c / b (D_c an iteration with a full
    chunk); D = inf past saturation: where g reaches 1, or the budget runs out or is outgrown (rho >= 1)."""
    if rate_req_s <= 0.0:
        return ChunkInterval(d1, 0.0, 0.0, float(chunk_tokens), 0.0)
    g = chunk_gain(rate_req_s, slope, pk, output_tokens)
    if not g < 1.0:
        return ChunkInterval(np.inf, np.inf, 1.0, 0.0, np.inf)
    z = 1.0 / (1.0 - g)
    base = d1 - slope + slope * z
    scale = 1.0 / (1.0 - slope * rate_req_s * (output_tokens - 1.0) - rate_req_s * pk)
    q = 0.0
    D = base * scale
    for _ in range(Q_STEPS):
        N = rate_req_s * (output_tokens - 1.0) * D
        b = chunk_tokens - N
        if b <= 0.0:
            return ChunkInterval(np.inf, N, 1.0, 0.0, np.inf)
        q_new = max(1.0 - math.exp(-rate_req_s * D), min(1.0, rate_req_s * D * prompt_tokens / b))
        D_new = (base + q_new * p0) * scale
        done = abs(D_new - D) <= 1e-12 * D_new
        D, q = D_new, q_new
        if done:
            break
    N = rate_req_s * (output_tokens - 1.0) * D
    b = chunk_tokens - N
    if b <= 0.0:
        return ChunkInterval(np.inf, N, 1.0, 0.0, np.inf)
    full = decode_step_s(rate_req_s, D, d1, slope, output_tokens) + slope * (z - 1.0) + p0 + pk * b / prompt_tokens
    rho = rate_req_s * prompt_tokens * full / b
    if rho >= 1.0:
        return ChunkInterval(np.inf, N, q, b, rho)
    return ChunkInterval(D, N, q, b, rho)
