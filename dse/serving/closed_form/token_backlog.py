"""Chunked prefill's backlog of prompt tokens as an M/D/1 queue (Numba; the model:
dse.serving.closed_form.chunked): prompts arrive as a Poisson stream and each brings S seconds of work
(its tokens' share of full-chunk iterations), served first come first served.
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np

#: services of the M/D/1 wait within which `md1_over` sums Erlang's exact formula
EXACT_SERVICES = 6


@nb.njit(cache=True)
def backlog_wait(rate_req_s, service_s):
    """(C, theta) of an M/D/1 queue's wait, ``service_s`` seconds a request: its tail P(W > w) ~ C
    exp(-theta w), theta > 0 the root of lambda (exp(theta S) - 1) = theta, C = (1 - rho) / (lambda S
    exp(theta S) - 1) (Cramer-Lundberg)."""
    rho = rate_req_s * service_s
    if rho <= 1e-12:
        return 0.0, np.inf
    # y = theta S solves y = log(1 + y / rho), whose left less right side is convex and nearly linear:
    # Newton's steps fall to the root from above, from the heavy-traffic 2 (1 - rho) / rho or, where rho
    # is small, 2 log(1 / rho) + 1 (both above it), in a few steps
    y = min(2.0 * (1.0 - rho) / rho, 2.0 * math.log(1.0 / rho) + 1.0)
    for _ in range(60):
        step = (y - math.log1p(y / rho)) / (1.0 - 1.0 / (rho + y))
        y -= step
        if abs(step) <= 1e-13 * y:
            break
    x = y / service_s
    return (1.0 - rho) / (rate_req_s * service_s * math.exp(x * service_s) - 1.0), x


@nb.njit(cache=True)
def md1_over(u, rate_req_s, service_s, C, theta):
    """P(W > u) of the M/D/1 wait: Erlang's exact sum P(W <= u) = (1 - rho) sum_{k <= u / S}
    (lambda (k S - u))^k / k! exp(-lambda (k S - u)) (Erlang 1909; Franx, "A simple solution for the M/D/c
    waiting time distribution", Oper. Res. Lett. 2001) up to `EXACT_SERVICES` services and lambda u <= 20
    (its alternating terms stay within 1e-7 of the result), the Cramer-Lundberg tail C exp(-theta u)
    beyond (`backlog_wait`), which the exact sum approaches within a few services."""
    if u < 0.0:
        return 1.0
    rho = rate_req_s * service_s
    if rho <= 1e-12:
        return 0.0
    if rate_req_s * u > 20.0 or u > EXACT_SERVICES * service_s:
        return C * math.exp(-theta * u)
    total = 0.0
    log_factorial = 0.0
    for k in range(int(u / service_s) + 1):
        x = rate_req_s * (k * service_s - u)                 # <= 0
        if k > 0:
            log_factorial += math.log(k)
        if x < 0.0:
            term = math.exp(k * math.log(-x) - log_factorial - x)
            total += -term if k % 2 else term
        elif k == 0:
            total += 1.0
    return min(max(1.0 - (1.0 - rho) * total, 0.0), 1.0)


@nb.njit(cache=True)
def carried_over(x, rate_req_s, service_s, C, theta, full_s):
    """P(backlog > x) for the token backlog carried into the next iteration (seconds of work): what the
    M/D/1 wait (`md1_over`) leaves after the iteration under way drains one full chunk of ``full_s``."""
    return 1.0 if x < 0.0 else md1_over(x + full_s, rate_req_s, service_s, C, theta)
