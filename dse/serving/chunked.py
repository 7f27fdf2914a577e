"""Chunked prefill in closed form (Sarathi-Serve, Agrawal et al. OSDI 2024; vLLM's default scheduler), over
arrays of designs (Numba): the serving objectives of ``serving.scheduler: chunked``.

Every iteration decodes one token of each of the N sequences in flight and spends the rest of a budget
of ``chunk`` tokens, b = chunk - N, on prompt tokens first come first served; its time is the decode
step plus, when it carries a prompt chunk of c tokens, ``p0 + pk c / P`` (the affine steps of
dse.serving.analytic; P the prompt). Prompts never stall the decodes: they ride along.

* D, the mean iteration a sequence sees, is its decode (itself and the others in flight, N + z: as in
  dse.serving.closed_form) plus the chunk: the prompts arriving per iteration, lambda D, cost pk each,
  and p0 in the share q of iterations that carry a chunk (an arrival during the last iteration, or a
  backlog: the token queue's utilisation), N = lambda (O - 1) D (Little). The loop gain
  g = s lambda (O - 1) / (1 - lambda pk) does not depend on D, so D is a fixed point in q alone.
* It saturates when g reaches 1, the prompt tokens outgrow the budget (rho = lambda P D_c / b, D_c an
  iteration with a full chunk) or the batch slots held reach ``n_max``.
* TTFT = R + n full-chunk iterations (less what its last chunk lacks) + a slot wait: R the rest of the
  iteration under way (length-biased, as in the closed form); n = ceil((C + J S) / full + P / b), C the
  token backlog carried into the next iteration (the M/D/1 wait of a prompt's work S = (P / b) full,
  `md1_over`, less one full chunk), J ~ Poisson(lambda (L - R)) the prompts that arrived before it in the
  same iteration (`chunk_tail`); the slot wait as in `dse.serving.closed_form.slot_wait` without prefill
  stalls (peakedness 1 / (1 - g)).
* TPOT: mean D; spread the shot noise of the arrivals over a life (`closed_form.shot_noise`); quantile the
  interval at the local arrival rate of that quantile, as in the closed form.

Checked against the discrete-event simulation (dse.serving.simulate, ``chunked``) in
tests/test_serving_chunked.py.
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np

from .closed_form import COLUMNS, Q99, RATE_BISECTIONS, Z99, Z_BISECTIONS, cornish_fisher, \
    narrow, next_rate, per_prompt, shot_noise
from .fixed_point import decode_s

#: Poisson mass of the prompts ahead left out of a tail (counted as past t: an upper bound to 1e-9)
TAIL_MASS = 1e-9
#: bisections of TTFT's quantile (2^-16 of its bracket, a few us)
TTFT_BISECTIONS = 16
#: services of the M/D/1 wait within which `md1_over` sums Erlang's exact formula
EXACT_SERVICES = 6
#: fixed-point steps on the chunk share q at most (it converges geometrically, to 1e-12 in about 10)
Q_STEPS = 60


@nb.njit(cache=True)
def chunk_gain(rate, slope, pk, output):
    """The loop gain g = s lambda (O - 1) / (1 - lambda pk) (inf where lambda pk >= 1)."""
    r = rate * pk
    return slope * rate * (output - 1.0) / (1.0 - r) if r < 1.0 else np.inf


@nb.njit(cache=True)
def chunk_interval(rate, d1, slope, p0, pk, prompt, output, chunk):
    """(D, N, q, b, rho): the mean iteration a sequence sees, the sequences in flight, the share of
    iterations with a prompt chunk, the prompt budget per iteration and the token queue's utilisation;
    D = inf past saturation of the loop or of the budget (module docstring)."""
    if rate <= 0.0:
        return d1, 0.0, 0.0, float(chunk), 0.0
    g = chunk_gain(rate, slope, pk, output)
    if not g < 1.0:
        return np.inf, np.inf, 1.0, 0.0, np.inf
    z = 1.0 / (1.0 - g)
    base = d1 - slope + slope * z
    scale = 1.0 / (1.0 - slope * rate * (output - 1.0) - rate * pk)
    q = 0.0
    D = base * scale
    for _ in range(Q_STEPS):
        N = rate * (output - 1.0) * D
        b = chunk - N
        if b <= 0.0:
            return np.inf, N, 1.0, 0.0, np.inf
        q_new = max(1.0 - math.exp(-rate * D), min(1.0, rate * D * prompt / b))
        D_new = (base + q_new * p0) * scale
        done = abs(D_new - D) <= 1e-12 * D_new
        D, q = D_new, q_new
        if done:
            break
    N = rate * (output - 1.0) * D
    b = chunk - N
    if b <= 0.0:
        return np.inf, N, 1.0, 0.0, np.inf
    full = decode_s(rate, D, d1, slope, output) + slope * (z - 1.0) + p0 + pk * b / prompt
    rho = rate * prompt * full / b
    if rho >= 1.0:
        return np.inf, N, q, b, rho
    return D, N, q, b, rho


@nb.njit(cache=True)
def backlog_wait(rate, service):
    """(C, theta) of an M/D/1 queue's wait, ``service`` seconds a request: its tail P(W > w) ~ C exp(-theta
    w), theta > 0 the root of lambda (exp(theta S) - 1) = theta, C = (1 - rho) / (lambda S exp(theta S) - 1)
    (Cramer-Lundberg)."""
    rho = rate * service
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
    x = y / service
    return (1.0 - rho) / (rate * service * math.exp(x * service) - 1.0), x


@nb.njit(cache=True)
def md1_over(u, rate, service, C, theta):
    """P(W > u) of the M/D/1 wait: Erlang's exact sum P(W <= u) = (1 - rho) sum_{k <= u / S}
    (lambda (k S - u))^k / k! exp(-lambda (k S - u)) (Erlang 1909; Franx, "A simple solution for the M/D/c
    waiting time distribution", Oper. Res. Lett. 2001) up to `EXACT_SERVICES` services and lambda u <= 20
    (its alternating terms stay within 1e-7 of the result), the Cramer-Lundberg tail C exp(-theta u)
    beyond (`backlog_wait`), which the exact sum approaches within a few services."""
    if u < 0.0:
        return 1.0
    rho = rate * service
    if rho <= 1e-12:
        return 0.0
    if rate * u > 20.0 or u > EXACT_SERVICES * service:
        return C * math.exp(-theta * u)
    total = 0.0
    log_factorial = 0.0
    for k in range(int(u / service) + 1):
        x = rate * (k * service - u)                 # <= 0
        if k > 0:
            log_factorial += math.log(k)
        if x < 0.0:
            term = math.exp(k * math.log(-x) - log_factorial - x)
            total += -term if k % 2 else term
        elif k == 0:
            total += 1.0
    return min(max(1.0 - (1.0 - rho) * total, 0.0), 1.0)


#: Gauss-Legendre nodes and weights on [0, 1] (8 points): the rest R of the iteration under way
GL_X = np.array([0.019855071751231856, 0.10166676129318664, 0.2372337950418355, 0.4082826787521751,
                 0.5917173212478249, 0.7627662049581645, 0.8983332387068134, 0.9801449282487681])
GL_W = np.array([0.05061426814518813, 0.11119051722668724, 0.15685332293894363, 0.18134189168918100,
                 0.18134189168918100, 0.15685332293894363, 0.11119051722668724, 0.05061426814518813])


@nb.njit(cache=True)
def carried_over(x, rate, service, Cq, theta_q, full):
    """P(C > x) for the token backlog C carried into the next iteration (seconds of work): what the
    M/D/1 wait (`md1_over`) leaves after the iteration under way drains one full chunk."""
    return 1.0 if x < 0.0 else md1_over(x + full, rate, service, Cq, theta_q)


@nb.njit(cache=True)
def chunk_tail(t, rate, L, w, f, b, d, p0, pk, prompt, service, Cq, theta_q, Cs, theta_s):
    """P(TTFT > t) (module docstring): an arrival with R of the iteration under way left waits for it;
    its tokens then follow the backlog C carried into the next iteration and the J ~ Poisson(lambda (L -
    R)) prompts that arrived before it in this one, so its first token comes n = ceil((C + J S) / full + f)
    full-chunk iterations later (S = f full a prompt's work), less what its last chunk lacks; plus the slot
    wait's exponential tail beyond the mean."""
    full = d + p0 + pk * b / prompt
    total = 0.0
    for j in range(4):
        if w[j] <= 0.0:
            continue
        part = 0.0
        for g in range(GL_X.shape[0] if L[j] > 0.0 else 1):
            r = L[j] * GL_X[g] if L[j] > 0.0 else 0.0
            weight = GL_W[g] if L[j] > 0.0 else 1.0
            m_ahead = rate * (L[j] - r)
            term = math.exp(-m_ahead)
            mass = 0.0
            over = 0.0
            J = 0
            while mass < 1.0 - TAIL_MASS and J < 1_000_000:
                if J > 0:
                    term *= m_ahead / J
                last = min(b, (1.0 + J + rate * r) * prompt)              # its last chunk, those after it in
                m = math.floor((t - r + pk * (b - last) / prompt) / full)  # iterations that fit before t
                x = (m - f - J * f) * full                                # backlog that pushes it past m
                if x < 0.0 and f * J >= m:                                # so for every larger J
                    break
                over += term * carried_over(x, rate, service, Cq, theta_q, full)
                mass += term
                J += 1
            part += weight * min(over + max(1.0 - mass, 0.0), 1.0)      # the rest of J's mass: past t
        total += w[j] * part
    if Cs > 0.0:
        mean = chunk_ttft_mean(rate, L, w, f, b, d, p0, pk, prompt, service, 0.0, np.inf)
        total += Cs * (math.exp(-theta_s * max(t - mean, 0.0)) if theta_s > 0.0 else 1.0)
    return min(total, 1.0)


@nb.njit(cache=True)
def chunk_ttft_mean(rate, L, w, f, b, d, p0, pk, prompt, service, Cs, theta_s):
    """Mean TTFT: the rest of the iteration, E[n] full iterations (n = ceil(W / full + f); W zero with
    probability 1 - rho, else exponential with the Pollaczek-Khinchine mean S / (2 (1 - rho))), less the
    last chunk's shortfall, plus the slot wait's C / theta."""
    full = d + p0 + pk * b / prompt
    rho = rate * service
    n = math.ceil(f)
    mu = service / (2.0 * (1.0 - rho)) / full if rho > 0.0 else 0.0     # E[W | W > 0] in iterations
    if mu > 0.0:                                     # W | W > 0 exponential: sum over m of P(n > m)
        n += rho * math.exp(-(math.ceil(f) - f) / mu) / -math.expm1(-1.0 / mu)
    total = 0.0
    for j in range(4):
        if w[j] <= 0.0:
            continue
        m = rate * L[j]
        term = math.exp(-m)
        mass = 0.0
        short = 0.0
        k = 0
        while mass < 1.0 - 1e-12 and (1.0 + k) * prompt < b:
            if k > 0:
                term *= m / k
            short += term * pk * (b - (1.0 + k) * prompt) / prompt
            mass += term
            k += 1
        total += w[j] * (L[j] / 2.0 - short)
    return total + n * full + (Cs / theta_s if Cs > 0.0 else 0.0)


@nb.njit(cache=True)
def chunk_ttft_quantile(q, rate, L, w, f, b, d, p0, pk, prompt, service, Cq, theta_q, Cs, theta_s):
    """TTFT's q-quantile (`chunk_tail`), by bisection."""
    full = d + p0 + pk * b / prompt
    lo, hi = 0.0, max(L[1], L[2]) + (math.ceil(f) + 1.0) * full
    if Cq > 0.0:
        hi += max(math.log(2.0 * Cq / (1.0 - q)), 0.0) / theta_q + full
    if Cs > 0.0:
        hi += max(math.log(2.0 * Cs / (1.0 - q)), 0.0) / max(theta_s, 1e-9)
    for _ in range(TTFT_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if chunk_tail(mid, rate, L, w, f, b, d, p0, pk, prompt, service, Cq, theta_q, Cs, theta_s) <= 1.0 - q:
            hi = mid
        else:
            lo = mid
    return hi


@nb.njit(cache=True)
def erlang_c(n_max, held, z):
    """Erlang C at n_max / z servers and load held / z (Hayward's approximation for traffic of peakedness z)."""
    c, load = n_max / z, held / z
    if c <= load:
        return 1.0
    B = 1.0
    for k in range(1, int(c) + 1):
        B = load * B / (k + load * B)
    return min(c * B / (c - load * (1.0 - B)), 1.0)


@nb.njit(cache=True)
def landing(rate, D, N, q, b, d1, slope, p0, pk, prompt):
    """The iterations an arrival lands in (lengths and probabilities: idle, without a chunk, with one),
    f = P / b, the decode d of an iteration, a prompt's work S in the token backlog (f full iterations)
    and the batch slots held (the sequences in flight and the prompts not yet through their first token:
    lambda x the mean TTFT, Little)."""
    d = d1 * (1.0 - math.exp(-N)) + slope * max(N - 1.0 + math.exp(-N), 0.0)    # decode of Poisson(N) others
    f = prompt / b                                   # iterations' worth of budget one prompt takes
    L1 = d + p0 + pk * rate * D / max(q, 1e-12)      # an iteration with a chunk: lambda D prompts over q of them
    idle = math.exp(-N) * (1.0 - q)
    w0, w1 = (1.0 - q) * d, q * L1                   # time shares (length-biased landing)
    total = w0 + w1
    L = (0.0, d, L1, 0.0)
    w = (idle, (1.0 - idle) * w0 / total, (1.0 - idle) * w1 / total, 0.0) if total > 0.0 else (1.0, 0.0, 0.0, 0.0)
    service = f * (d + p0 + pk * b / prompt)
    held = N + rate * chunk_ttft_mean(rate, L, w, f, b, d, p0, pk, prompt, service, 0.0, np.inf)
    return L, w, f, d, service, held


@nb.njit(cache=True)
def chunk_parts(rate, D, N, q, b, d1, slope, p0, pk, prompt, output, n_max):
    """What TTFT's distribution needs (module docstring): `landing`'s, the token backlog's (C, theta)
    (`backlog_wait`) and the slot wait's (C, theta)."""
    L, w, f, d, service, held = landing(rate, D, N, q, b, d1, slope, p0, pk, prompt)
    Cq, theta_q = backlog_wait(rate, service)
    Cs, theta_s = 0.0, np.inf
    z = 1.0 / (1.0 - chunk_gain(rate, slope, pk, output))
    if np.isfinite(n_max) and n_max - held <= 6.0 * math.sqrt(z * held) + 10.0:
        Cs = erlang_c(n_max, held, z)
        mu = n_max * rate / held
        theta_s = 2.0 * (mu - rate) * mu / (rate * (1.0 + z)) if mu > rate else 0.0
    return L, w, f, d, service, Cq, theta_q, Cs, theta_s, held


@nb.njit(cache=True)
def chunk_saturation(d1, slope, p0, pk, prompt, output, chunk, n_max):
    """The largest rate with a steady state, to 2^-RATE_BISECTIONS of its bound 1 / max(s (O - 1) + pk,
    pk + P (d1 + p0) / chunk): by bisection where `chunk_interval` exists (the loop and the budget), then,
    if the batch slots held reach n_max below that, by false position on the slots held (as
    dse.serving.closed_form.saturation)."""
    hi = 1.0 / max(slope * (output - 1.0) + pk, pk + prompt * (d1 + p0) / chunk)
    tol = hi * 2.0 ** -RATE_BISECTIONS
    lo = 0.0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if np.isfinite(chunk_interval(mid, d1, slope, p0, pk, prompt, output, chunk)[0]):
            lo = mid
        else:
            hi = mid
    f_hi = slot_margin(lo, d1, slope, p0, pk, prompt, output, chunk, n_max)
    if f_hi < 0.0:
        return lo
    hi, lo, f_lo = lo, 0.0, -n_max
    kept = 0
    steps = 0
    while hi - lo > tol:
        mid = next_rate(lo, f_lo, hi, f_hi, tol, steps)
        f = slot_margin(mid, d1, slope, p0, pk, prompt, output, chunk, n_max)
        lo, f_lo, hi, f_hi, kept = narrow(lo, f_lo, hi, f_hi, kept, mid, f, f < 0.0)
        steps += 1
    return lo


@nb.njit(cache=True)
def slot_margin(rate, d1, slope, p0, pk, prompt, output, chunk, n_max):
    """Batch slots held at ``rate`` less those there are (inf without a steady state)."""
    D, N, q, b, rho = chunk_interval(rate, d1, slope, p0, pk, prompt, output, chunk)
    if not np.isfinite(D):
        return np.inf
    return landing(rate, D, N, q, b, d1, slope, p0, pk, prompt)[5] - n_max


@nb.njit(cache=True)
def chunk_tpot_spread(rate, D, N, d1, slope, p0, pk, prompt, output, chunk):
    """(deviation, skewness, window m) of TPOT whatever the quantile (`chunk_tpot`); m NaN where the
    interval does not grow with the rate."""
    d = decode_s(rate, D, d1, slope, output)
    sd, skew = shot_noise(N, slope, per_prompt(rate, D, d, pk) / (output - 1.0), chunk_gain(rate, slope, pk, output))
    h = 1e-4 * rate
    up = chunk_interval(rate + h, d1, slope, p0, pk, prompt, output, chunk)[0]
    if not (sd > 0.0 and np.isfinite(up) and up > D):
        return sd, skew, np.nan
    return sd, skew, (rate * (up - D) / h / sd) ** 2


@nb.njit(cache=True)
def chunk_tpot_at(z, rate, D, spread, d1, slope, p0, pk, prompt, output, chunk, sat):
    """TPOT at standard-normal quantile z: the interval at the local rate of that quantile, the local rate
    Poisson over a window of m arrivals (`closed_form.tpot_quantile`'s method); the Cornish-Fisher
    quantile of the shot-noise moments where the interval does not grow with the rate."""
    sd, skew, m = spread
    if not np.isfinite(m):
        return D + sd * cornish_fisher(z, skew)
    local = max(0.0, m + z * math.sqrt(m) + (z * z - 1.0) / 6.0)
    at = chunk_interval(min(rate * local / m, sat), d1, slope, p0, pk, prompt, output, chunk)[0]
    if not np.isfinite(at):
        edge = max(rate, sat * (1.0 - 2.0 ** -RATE_BISECTIONS))   # saturation to rounding: just below it
        at = chunk_interval(edge, d1, slope, p0, pk, prompt, output, chunk)[0]
    return at


@nb.njit(cache=True)
def chunk_tpot(z, rate, D, N, d1, slope, p0, pk, prompt, output, chunk, sat):
    """TPOT at standard-normal quantile z (`chunk_tpot_spread`, `chunk_tpot_at`)."""
    spread = chunk_tpot_spread(rate, D, N, d1, slope, p0, pk, prompt, output, chunk)
    return chunk_tpot_at(z, rate, D, spread, d1, slope, p0, pk, prompt, output, chunk, sat)


@nb.njit(cache=True)
def chunk_tpot_cdf(t, rate, D, N, d1, slope, p0, pk, prompt, output, chunk, sat):
    """P(TPOT <= t): `chunk_tpot_at` inverted by bisection on z (the spread computed once)."""
    spread = chunk_tpot_spread(rate, D, N, d1, slope, p0, pk, prompt, output, chunk)
    a = (d1, slope, p0, pk, prompt, output, chunk, sat)
    lo, hi = -6.0, 6.0
    if chunk_tpot_at(lo, rate, D, spread, *a) >= t:
        return 0.0
    if chunk_tpot_at(hi, rate, D, spread, *a) <= t:
        return 1.0
    for _ in range(Z_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if chunk_tpot_at(mid, rate, D, spread, *a) <= t:
            lo = mid
        else:
            hi = mid
    return 0.5 * math.erfc(-lo / math.sqrt(2.0))


@nb.njit(cache=True)
def chunk_meets_slo(rate, d1, slope, p0, pk, prompt, output, chunk, n_max, slo_ttft, slo_tpot, sat):
    """Whether the p99 TPOT and TTFT at ``rate`` are within the SLOs (TPOT's quantile, P(TTFT > SLO) <=
    0.01) with the slots held below n_max."""
    D, N, q, b, rho = chunk_interval(rate, d1, slope, p0, pk, prompt, output, chunk)
    if not np.isfinite(D):
        return False
    if chunk_tpot(Z99, rate, D, N, d1, slope, p0, pk, prompt, output, chunk, sat) > slo_tpot:
        return False
    L, w, f, d, service, Cq, tq, Cs, ts, held = chunk_parts(rate, D, N, q, b, d1, slope, p0, pk, prompt, output,
                                                           n_max)
    return held < n_max and \
        chunk_tail(slo_ttft, rate, L, w, f, b, d, p0, pk, prompt, service, Cq, tq, Cs, ts) <= 1.0 - Q99


@nb.njit(cache=True)
def chunked_metrics(rates, d1, slope, p0, pk, prompt, output, chunk, n_max, slo_ttft, slo_tpot):
    """`closed_form.COLUMNS` of every design under chunked prefill (arrays ``rates``, ``d1``, ``slope``,
    ``p0``, ``pk``, ``n_max``; scalars the rest, ``chunk`` the token budget of an iteration)."""
    n = d1.shape[0]
    out = np.zeros((n, len(COLUMNS)))
    for i in range(n):
        rate = rates[i]
        if not (n_max[i] >= 1.0 and np.isfinite(d1[i]) and np.isfinite(p0[i]) and np.isfinite(pk[i])
                and np.isfinite(slope[i]) and d1[i] > 0.0 and p0[i] + pk[i] > 0.0):
            out[i, :4] = np.inf
            continue
        a = (d1[i], slope[i], p0[i], pk[i], prompt, output, chunk)
        sat = chunk_saturation(*a, n_max[i])
        out[i, 6] = sat
        D, N, q, b, rho = chunk_interval(rate, *a)
        out[i, 7] = N
        if rate < sat and np.isfinite(D):
            L, w, f, d, service, Cq, tq, Cs, ts, held = chunk_parts(rate, D, N, q, b, d1[i], slope[i], p0[i],
                                                                   pk[i], prompt, output, n_max[i])
            out[i, 0] = chunk_ttft_mean(rate, L, w, f, b, d, p0[i], pk[i], prompt, service, Cs, ts)
            out[i, 1] = D
            out[i, 2] = chunk_ttft_quantile(Q99, rate, L, w, f, b, d, p0[i], pk[i], prompt, service, Cq, tq, Cs,
                                            ts)
            out[i, 3] = chunk_tpot(Z99, rate, D, N, *a, sat)
            out[i, 4] = rate * (1.0 - chunk_tail(slo_ttft, rate, L, w, f, b, d, p0[i], pk[i], prompt, service, Cq,
                                                 tq, Cs, ts)) * \
                chunk_tpot_cdf(slo_tpot, rate, D, N, *a, sat)
        else:
            out[i, :4] = np.inf
        lo, hi = 0.0, sat
        if chunk_meets_slo(1e-9 * sat, *a, n_max[i], slo_ttft, slo_tpot, sat):
            for _ in range(RATE_BISECTIONS):
                mid = 0.5 * (lo + hi)
                if chunk_meets_slo(mid, *a, n_max[i], slo_ttft, slo_tpot, sat):
                    lo = mid
                else:
                    hi = mid
        out[i, 5] = lo
    return out
