"""The queue of requests waiting for a batch slot (Numba): both schedulers admit a request only while the
batch and the KV cache hold another sequence (``slots`` of them), so past a point requests wait.

The slots are the ``slots`` servers of a queue holding each request S = A / lambda seconds, A the slots
held on average (Little); their occupancy is peaked (variance z times its mean), so the probability C of
waiting is Erlang C at slots / z servers and load A / z (Hayward's approximation for peaked traffic,
Erlang B's recursion). Once the slots are full the queue drains at mu - lambda, mu = slots / S, with
departures as bursty as the occupancy was: a Brownian queue of variance rate lambda (1 + z), whose wait
has the tail rate theta = 2 (mu - lambda) mu / (lambda (1 + z)) (the diffusion approximation of a G/G/c
queue in heavy traffic).
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np

from .fixed_point import loop_gain, slots_held


@nb.njit(cache=True)
def erlang_c(slots, held, peaked):
    """Erlang C at slots / z servers and load held / z (Hayward's approximation for traffic of peakedness z)."""
    c, load = slots / peaked, held / peaked
    if c <= load:
        return 1.0
    B = 1.0
    for k in range(1, int(c) + 1):
        B = load * B / (k + load * B)
    return min(c * B / (c - load * (1.0 - B)), 1.0)


@nb.njit(cache=True)
def slot_wait(rate_req_s, held, slots, peaked):
    """(probability C a request waits for a slot, rate theta of its wait's exponential tail) with ``held``
    slots held on average at peakedness ``peaked`` (module docstring); no wait where the slots held stay
    6 deviations and 10 slots short of ``slots``."""
    if not (np.isfinite(slots) and slots - held <= 6.0 * math.sqrt(peaked * held) + 10.0):
        return 0.0, np.inf
    C = erlang_c(slots, held, peaked)
    mu = slots * rate_req_s / held
    return C, (2.0 * (mu - rate_req_s) * mu / (rate_req_s * (1.0 + peaked)) if mu > rate_req_s else 0.0)


@nb.njit(cache=True)
def peakedness(rate_req_s, decode_interval_s, d1, slope, p0, pk, output_tokens):
    """Variance over mean of continuous batching's slots held: 1 / (1 - g) from the loop (a sequence's
    decode lengthens with the others in flight: a Hawkes count over a window its box kernel spans, whose
    index of dispersion is exactly 1 / (1 - g)) times 1 / (1 - rho)^2 from the prefills (every arrival
    stalls the batch for its prefill, during which more arrive: a branching cluster of ratio rho =
    lambda (p0 + pk), the prefill chain's, has index of dispersion 1 / (1 - rho)^2)."""
    g = loop_gain(rate_req_s, decode_interval_s, d1, slope, p0, pk, output_tokens)
    rho = rate_req_s * (p0 + pk)
    return 1.0 / max((1.0 - g) * (1.0 - rho) ** 2, 1e-9)


@nb.njit(cache=True)
def continuous_slot_wait(rate_req_s, decode_interval_s, in_flight, d1, slope, p0, pk, output_tokens, slots):
    """`slot_wait` under continuous batching: the slots held of dse.serving.closed_form.fixed_point at its
    `peakedness`."""
    if rate_req_s <= 0.0:
        return 0.0, np.inf
    held = slots_held(rate_req_s, decode_interval_s, in_flight, p0, pk)
    return slot_wait(rate_req_s, held, slots,
                     peakedness(rate_req_s, decode_interval_s, d1, slope, p0, pk, output_tokens))
