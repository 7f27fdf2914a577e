"""Which experts a batch of tokens touches: per-token selection probabilities and their consequences.

A router picks ``k`` distinct experts of ``E`` for each token. We describe a layer's routing by
``q[e]``, the probability that a token selects expert ``e`` (``sum(q) == k``, ``0 <= q <= 1``).
From it follow, for a batch of ``T`` independent tokens:

* expected tokens at expert ``e``: ``T * q[e]``;
* probability the expert is touched at all: ``1 - (1 - q[e]) ** T``;
* expected distinct experts touched: the sum of the above, which for uniform routing is the
  closed form ``E * (1 - (1 - k/E) ** T)`` (shared/reference/workloads.md).

Distributions (``routing["distribution"]``): ``uniform``; ``zipf`` (popularity of rank r is ``r**-s``,
ranks permuted per layer from the seed); ``dirichlet`` (popularity ~ Dirichlet(alpha), drawn per layer
from the seed); ``trace`` (counted from a user JSONL file, rows ``{layer, token, experts, weights}``).
Popularity w becomes ``q`` as the router's top-k sampling does: k draws without replacement, each
proportional to w among the experts left (Plackett-Luce); `plackett_luce_inclusion` computes the
inclusion probabilities exactly (up to quadrature), which reproduces the reference's Zipf loads (s 0.5 /
1.0, 64 experts, top-8: max/mean 3.7 / 7.1, Gini 0.25 / 0.50).

Inter-layer affinity (``routing["affinity"]`` = rho in [0, 1], or counted from a trace): a Markov matrix
``A[i, j] = P(a selection lands on j at the next MoE layer | it was on i)`` over single selections
(``p = q / k``). Synthetic: ``A = (1 - rho) 1 p_next^T + rho C / p[:, None]`` where ``C`` is the monotone
(rank-matching) coupling of ``p`` and ``p_next``, so the marginals stay exact (``p A = p_next``) and
experts of equal popularity rank are the affine pairs (ExFlow reports strong, stable affinity).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numba as nb
import numpy as np

from .errors import WorkloadError

DISTRIBUTIONS = ("uniform", "zipf", "dirichlet", "trace")
ROUTING_KEYS = ("distribution", "s", "alpha", "trace", "seed", "affinity")


def _cap_at_one(weights: np.ndarray, k: int) -> np.ndarray:
    """Scale popularity weights to selection probabilities summing to k, none above 1.

    Mass above 1 (an expert cannot be picked twice by one token) is redistributed to the others in
    proportion to their weights, repeatedly until no probability exceeds 1.
    """
    weights = np.maximum(np.asarray(weights, dtype=float), 0.0)
    if weights.sum() <= 0:
        weights = np.ones_like(weights)
    q = np.zeros_like(weights, dtype=float)
    free = np.ones(weights.size, dtype=bool)
    budget = float(k)
    while True:
        if weights[free].sum() <= 0:     # the rest have no popularity: share what is left evenly
            q[free] = budget / free.sum()
            return np.minimum(q, 1.0)
        q[free] = budget * weights[free] / weights[free].sum()
        over = free & (q > 1.0)
        if not over.any():
            return q
        q[over] = 1.0
        free &= ~over
        budget = k - q[~free].sum()


#: weights below this fraction of the largest count as zero: such an expert is never drawn in any sample one
#: could take, and keeping it stretched the integration grid past the float range (NaN inclusion
#: probabilities from Dirichlet draws with alpha ~ 1e-3 over 64 experts)
NEGLIGIBLE_WEIGHT = 1e-15


def plackett_luce_inclusion(weights: np.ndarray, k: int, points: int = 600) -> np.ndarray:
    """P(expert i is among k draws without replacement, each proportional to weight among those left).

    Exponential-race form: draw T_j ~ Exp(w_j); the k smallest are the picks. So
    ``pi_i = int_0^inf w_i exp(-w_i t) P(#{j != i: T_j < t} < k) dt``; the count is Poisson-binomial
    with ``p_j(t) = 1 - exp(-w_j t)``, computed for every i at once with prefix / suffix DPs (truncated
    at k) on a log-spaced grid of t, and integrated by the trapezoid rule.
    """
    w = np.asarray(weights, dtype=float)
    E = w.size
    if k >= E:
        return np.ones(E)
    pos = w > w.max() * NEGLIGIBLE_WEIGHT
    if pos.sum() <= k:     # fewer experts with popularity than picks: they all go, the rest share
        return _cap_at_one(np.where(pos, 1e12, 1.0), k)
    w = w / w[pos].sum()
    t_max = 40.0 / w[pos].min()
    t = np.concatenate([[0.0], np.geomspace(1e-6, t_max, points)])
    pi = _inclusion_integral(w, t, k)
    pi = np.clip(pi, 0.0, 1.0)
    return pi * (k / pi.sum())


@nb.njit(cache=True)
def _inclusion_integral(w, t, k):
    """Trapezoid integral of w_i exp(-w_i t) P(#{j != i: T_j < t} < k) over the grid t, for every i."""
    E, G = w.size, t.size
    out = np.zeros(E)
    pre = np.zeros((E + 1, k))
    suf = np.zeros((E + 1, k))
    prev_f = np.zeros(E)
    for gi in range(G):
        pre[:] = 0.0
        suf[:] = 0.0
        pre[0, 0] = 1.0
        suf[E, 0] = 1.0
        for j in range(E):
            pj = 1.0 - np.exp(-w[j] * t[gi])
            for a in range(k):
                pre[j + 1, a] = pre[j, a] * (1.0 - pj) + (pre[j, a - 1] * pj if a > 0 else 0.0)
        for j in range(E - 1, -1, -1):
            pj = 1.0 - np.exp(-w[j] * t[gi])
            for a in range(k):
                suf[j, a] = suf[j + 1, a] * (1.0 - pj) + (suf[j + 1, a - 1] * pj if a > 0 else 0.0)
        for i in range(E):
            g = 0.0
            csum = 0.0
            # P(prefix = a, suffix <= k - 1 - a): accumulate suffix CDF from the top
            cdf = np.empty(k)
            for b in range(k):
                csum += suf[i + 1, b]
                cdf[b] = csum
            for a in range(k):
                g += pre[i, a] * cdf[k - 1 - a]
            f = w[i] * np.exp(-w[i] * t[gi]) * g
            if gi > 0:
                out[i] += 0.5 * (f + prev_f[i]) * (t[gi] - t[gi - 1])
            prev_f[i] = f
    return out


_RANK_CACHE: dict[tuple, np.ndarray] = {}


def selection_probabilities(experts: int, top_k: int, distribution: str = "uniform", s: float = 1.0,
                            seed: int = 0, layer: int = 0, alpha: float = 1.0) -> np.ndarray:
    """Per-token selection probability of each expert of one MoE layer (synthetic distributions).

    ``zipf``: popularity of the expert of rank r is proportional to ``r ** -s``; which expert holds which
    rank is a random permutation drawn from ``seed`` and ``layer`` (popularity is layer-dependent).
    ``dirichlet``: popularity drawn from a symmetric Dirichlet(alpha) with ``seed`` and ``layer``
    (alpha -> 0 concentrates the load on few experts, alpha -> inf tends to uniform).
    """
    if not 1 <= top_k <= experts:
        raise WorkloadError(f"top-k {top_k} must be in 1..{experts} (the experts of a layer)")
    rng = np.random.default_rng([seed, layer])
    if distribution == "uniform":
        return np.full(experts, top_k / experts)
    if distribution == "zipf":
        if not (math.isfinite(s) and s >= 0):
            raise WorkloadError(f"routing.s must be a finite number >= 0, got {s}")
        key = (experts, top_k, float(s))
        if key not in _RANK_CACHE:    # layers differ only in which expert holds which rank
            _RANK_CACHE[key] = plackett_luce_inclusion(np.arange(1, experts + 1, dtype=float) ** -s, top_k)
        return _RANK_CACHE[key][rng.permutation(experts)]
    if distribution == "dirichlet":
        if not (math.isfinite(alpha) and alpha > 0):
            raise WorkloadError(f"routing.alpha must be a finite number > 0, got {alpha}")
        return plackett_luce_inclusion(rng.dirichlet(np.full(experts, float(alpha))), top_k)
    if distribution == "trace":
        raise WorkloadError("routing.distribution 'trace' needs routing.trace, the path of a JSONL routing trace")
    raise WorkloadError(f"unknown routing distribution {distribution!r}; allowed: {', '.join(DISTRIBUTIONS)}")


def touch_probability(q: np.ndarray, tokens: float) -> np.ndarray:
    """Probability that each expert receives at least one of ``tokens`` independent tokens."""
    return 1.0 - (1.0 - np.asarray(q, dtype=float)) ** tokens


def expected_distinct_experts(q: np.ndarray, tokens: float) -> float:
    """Expected number of distinct experts a batch of ``tokens`` touches."""
    return float(touch_probability(q, tokens).sum())


# ----------------------------------------------------------------------------------------------------
# user routing traces


#: rows a routing trace may have (a JSONL file of ten million selections is already hundreds of MB)
MAX_TRACE_ROWS = 10_000_000


def trace_rows(path: str | Path) -> list[tuple[int, dict]]:
    """(line number, JSON object) of every non-blank line of a JSONL routing trace, at most
    `MAX_TRACE_ROWS`; a `WorkloadError` naming the file and line otherwise."""
    try:
        lines = Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"cannot read routing trace {path}: "
                            f"{getattr(exc, 'strerror', None) or exc.__class__.__name__}") from None
    if len(lines) > MAX_TRACE_ROWS:
        raise WorkloadError(f"routing trace {path}: {len(lines):,} rows; at most {MAX_TRACE_ROWS:,}")
    rows = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"routing trace {path}, line {n}: not valid JSON: {exc.msg}") from None
        if not isinstance(row, dict):
            raise WorkloadError(f"routing trace {path}, line {n}: a row is a JSON object "
                                "{layer, token, experts, weights}")
        rows.append((n, row))
    return rows


def distinct_indices(experts, limit: int | None = None) -> bool:
    """Whether ``experts`` is a non-empty list of distinct whole numbers >= 0 (and < ``limit``)."""
    return (isinstance(experts, list) and bool(experts)
            and all(isinstance(e, int) and not isinstance(e, bool) and e >= 0 and (limit is None or e < limit)
                    for e in experts) and len(set(experts)) == len(experts))


class RoutingTrace:
    """Expert choices counted from a JSONL trace: one row per (layer, token), ``experts`` its top-k."""

    def __init__(self, path: str | Path, experts: int, top_k: int, moe_layers: list[int]):
        self.path = Path(path)
        self.experts, self.top_k, self.moe_layers = experts, top_k, list(moe_layers)
        self.counts: dict[int, np.ndarray] = {l: np.zeros(experts) for l in self.moe_layers}
        self.tokens: dict[int, int] = {l: 0 for l in self.moe_layers}
        self.choices: dict[int, dict] = {l: {} for l in self.moe_layers}   # layer -> token -> experts
        self._read()

    def _read(self) -> None:
        for n, row in trace_rows(self.path):
            where = f"routing trace {self.path}, line {n}"
            missing = [k for k in ("layer", "token", "experts") if k not in row]
            if missing:
                raise WorkloadError(f"{where}: missing key {missing[0]!r}; a row has layer, token, experts, weights")
            layer, token, chosen = row["layer"], row["token"], row["experts"]
            if not isinstance(layer, int) or isinstance(layer, bool) or layer not in self.counts:
                raise WorkloadError(f"{where}: layer {layer!r} is not a MoE layer of the model "
                                    f"(MoE layers: {self.moe_layers[0]}..{self.moe_layers[-1]})")
            if not distinct_indices(chosen, self.experts) or len(chosen) != self.top_k:
                raise WorkloadError(f"{where}: experts must be {self.top_k} distinct indices in "
                                    f"0..{self.experts - 1}, got {chosen!r}")
            if not isinstance(token, (int, str)) or isinstance(token, bool):
                raise WorkloadError(f"{where}: token is a whole number or a string naming the token, got {token!r}")
            weights = row.get("weights")
            if weights is not None and (not isinstance(weights, list) or len(weights) != len(chosen) or not all(
                    isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w >= 0
                    for w in weights)):
                raise WorkloadError(f"{where}: weights must be a list of {len(chosen)} finite numbers >= 0, "
                                    f"got {weights!r}"[:300])
            self.counts[layer][chosen] += 1
            self.tokens[layer] += 1
            self.choices[layer][token] = chosen
        empty = [l for l in self.moe_layers if self.tokens[l] == 0]
        if empty:
            raise WorkloadError(f"routing trace {self.path} has no rows for MoE layer {empty[0]}")

    def probabilities(self, layer: int) -> np.ndarray:
        return self.counts[layer] / self.tokens[layer]

    def transitions(self, layer: int, next_layer: int) -> np.ndarray:
        """Row-stochastic A[i, j]: of the selections on i at ``layer``, the share on j at ``next_layer``."""
        pairs = np.zeros((self.experts, self.experts))
        nxt = self.choices[next_layer]
        for token, chosen in self.choices[layer].items():
            after = nxt.get(token)
            if after is not None:
                pairs[np.ix_(chosen, after)] += 1
        rows = pairs.sum(axis=1, keepdims=True)
        p_next = self.probabilities(next_layer) / self.top_k
        return np.where(rows > 0, pairs / np.where(rows > 0, rows, 1), p_next[None, :])


# ----------------------------------------------------------------------------------------------------
# affinity between consecutive MoE layers


def monotone_coupling(p: np.ndarray, p_next: np.ndarray) -> np.ndarray:
    """Joint distribution with marginals p and p_next pairing equal popularity ranks (north-west rule)."""
    E = p.size
    order_a, order_b = np.argsort(-p, kind="stable"), np.argsort(-p_next, kind="stable")
    a, b = p[order_a].astype(float).copy(), p_next[order_b].astype(float).copy()
    a /= a.sum()
    b /= b.sum()
    C = np.zeros((E, E))
    i = j = 0
    while i < E and j < E:
        m = min(a[i], b[j])
        C[order_a[i], order_b[j]] += m
        a[i] -= m
        b[j] -= m
        if a[i] <= 1e-15:
            i += 1
        if b[j] <= 1e-15:
            j += 1
    return C


def synthetic_affinity(q: np.ndarray, q_next: np.ndarray, rho: float) -> np.ndarray:
    """Markov matrix between single selections of consecutive layers (module docstring)."""
    p, p_next = q / q.sum(), q_next / q_next.sum()
    C = monotone_coupling(p, p_next)
    with np.errstate(divide="ignore", invalid="ignore"):
        follow = np.where(p[:, None] > 0, C / p[:, None], p_next[None, :])
    return (1.0 - rho) * p_next[None, :] + rho * follow


class Router:
    """Routing of every MoE layer of one model: ``q(layer)`` and ``affinity(layer, next_layer)``."""

    def __init__(self, routing: dict | None, experts: int, top_k: int, moe_layers: list[int], seed: int = 0):
        routing = dict(routing or {})
        unknown = set(routing) - set(ROUTING_KEYS)
        if unknown:
            raise WorkloadError(f"unknown routing key {sorted(unknown)[0]!r}; allowed: {', '.join(ROUTING_KEYS)}")
        self.distribution = routing.get("distribution") or "uniform"
        self.s = float(routing.get("s", 1.0) if routing.get("s") is not None else 1.0)
        self.alpha = float(routing.get("alpha", 1.0) if routing.get("alpha") is not None else 1.0)
        self.seed = int(routing.get("seed", seed) if routing.get("seed") is not None else seed)
        self.rho = float(routing.get("affinity") or 0.0)
        if not 0.0 <= self.rho <= 1.0:
            raise WorkloadError(f"routing.affinity must be in [0, 1], got {self.rho}")
        self.experts, self.top_k, self.moe_layers = experts, top_k, list(moe_layers)
        self.trace = None
        if self.distribution == "trace":
            if not routing.get("trace"):
                raise WorkloadError("routing.distribution 'trace' needs routing.trace, the path of a JSONL file")
            self.trace = RoutingTrace(routing["trace"], experts, top_k, self.moe_layers)
        elif self.distribution not in DISTRIBUTIONS:
            raise WorkloadError(f"unknown routing distribution {self.distribution!r}; "
                                f"allowed: {', '.join(DISTRIBUTIONS)}")
        self._cache: dict[int, np.ndarray] = {}

    @property
    def has_affinity(self) -> bool:
        return self.trace is not None or self.rho > 0

    def q(self, layer: int) -> np.ndarray:
        if layer not in self._cache:
            if self.trace is not None:
                self._cache[layer] = self.trace.probabilities(layer)
            else:
                self._cache[layer] = selection_probabilities(self.experts, self.top_k, self.distribution, self.s,
                                                             self.seed, layer, self.alpha)
        return self._cache[layer]

    def affinity(self, layer: int, next_layer: int) -> np.ndarray:
        if self.trace is not None:
            return self.trace.transitions(layer, next_layer)
        return synthetic_affinity(self.q(layer), self.q(next_layer), self.rho)
