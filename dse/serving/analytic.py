"""Steady state of continuous batching in closed form: the fast estimate the search can afford.

Requests arrive at rate lambda (Poisson), each with P prompt and O output tokens. The server runs decode
iterations of the N sequences in flight; before an iteration it prefills whatever arrived during the last
one. With D the mean time between two decode steps of a sequence:

* arrivals per iteration a = lambda D; a prefill happens before an iteration with probability
  1 - exp(-a) and then batches a / (1 - exp(-a)) prompts (Poisson arrivals, given at least one);
* D = decode(N, P + O / 2) + (1 - exp(-a)) prefill(a / (1 - exp(-a)), P);
* Little's law: N = lambda (O - 1) D sequences decode at once.

The fixed point (N, D) gives TPOT = D, and TTFT = the residual of the iteration under way when a
request arrives (D / 2 for iterations of nearly constant length) + its prefill; it does not exist when
lambda (O - 1) D outgrows the batch limit or when D grows without bound: the rate is past saturation.
Checked against the discrete-event simulation (dse.serving.simulate) in tests/test_serving.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SteadyState:
    ttft_s: float
    tpot_s: float
    in_flight: float
    saturated: bool


def steady_state(steps, rate: float, prompt: float, output: float, max_batch: int = 256,
                 iterations: int = 200) -> SteadyState:
    """Mean TTFT and TPOT of continuous batching at ``rate`` requests/s (module docstring)."""
    context = prompt + output / 2.0
    D = steps.decode(1, context)
    n = 1.0
    for _ in range(iterations):
        a = rate * D
        p_prefill = 1.0 - math.exp(-a)
        k = a / p_prefill if p_prefill > 0 else 1.0
        n = max(1.0, rate * (output - 1.0) * D)
        if n > max_batch:
            return SteadyState(math.inf, math.inf, n, True)
        new = steps.decode(n, context) + p_prefill * steps.prefill(k, prompt)
        if not math.isfinite(new) or new > 1e6:
            return SteadyState(math.inf, math.inf, n, True)
        if abs(new - D) <= 1e-9 * D:
            D = new
            break
        D = 0.5 * (D + new)
    a = rate * D
    p_prefill = 1.0 - math.exp(-a)
    k = a / p_prefill if p_prefill > 0 else 1.0
    return SteadyState(ttft_s=D / 2.0 + steps.prefill(k, prompt), tpot_s=D, in_flight=n, saturated=False)


def max_rate(steps, prompt: float, output: float, max_batch: int = 256, high: float = 1e6) -> float:
    """The largest rate with a steady state (bisection on `steady_state`)."""
    low = 0.0
    hi = high
    for _ in range(60):
        mid = (low + hi) / 2.0 if hi < high else max(2.0 * low, 1.0)
        if steady_state(steps, mid, prompt, output, max_batch).saturated:
            hi = mid
        else:
            low = mid
        if hi < high and hi - low <= 1e-4 * hi:
            break
    return low
