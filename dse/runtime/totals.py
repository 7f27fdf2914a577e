"""The one reducer of a timeline (docs/runtime.md, "Output"): its windows and totals from its segment
table (dse.runtime.segments) and what each segment's step serves (`Served`), for `dse timeline`, the
search's runtime columns and a serving study's windows alike.

Per segment: the step serves ``rate`` tokens/s, times the share of selections it can serve, over its
serving time, capped by the offered load (a serving segment's rate is its closed form's, already capped).
``served_frac`` is what was served over what the running design could take (or was offered): stalls and
lost experts lower it, a slower step does not. Energy: the step's energy per token for each token served
plus the moves' energy. A window's latencies are time-weighted means over its serving segments (its p99s
the worst segment's); the totals' are token-weighted (the p99s: the token-weighted 99th percentile).
The sums run in one compiled pass (`served_sums`), in the segments' order."""
from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from .failures import names
from .segments import SegmentTable


class Served(NamedTuple):
    """What each segment's step serves: its row (``row[s]``, -1: nothing serves) of the per-row figures:
    tokens/s, energy per token (J), latency and p99 latency (s); ``ms``: more latencies a serving study
    reports (name -> (mean, p99) per row, s; shown in ms under vLLM's names); ``limit``: the offered load
    caps what a segment serves (False: its rate is capped already)."""

    row: np.ndarray
    rate_tps: np.ndarray
    energy_j_per_token: np.ndarray
    latency_s: np.ndarray
    p99_s: np.ndarray
    ms: dict
    limit: bool = True


class Sums(NamedTuple):
    """`served_sums`' result: per segment the tokens served, per window those served and demanded, and
    over the horizon the energy (J) and the tokens demanded."""

    served: np.ndarray
    window_served: np.ndarray
    window_demand: np.ndarray
    energy_j: float
    demand: float


@nb.njit(cache=True)
def served_sums(window, length, serve, offered, row, selected, rate, e_tok, move_energy, limit):
    """Per segment the tokens served, per window the tokens served and demanded, and over the horizon
    the energy and the demand (module docstring), segment by segment in order."""
    n, nw = window.shape[0], move_energy.shape[0]
    x_all, served_w, demand_w = np.zeros(n), np.zeros(nw), np.zeros(nw)
    energy = demand_total = 0.0
    s = 0
    for w in range(nw):
        served = demand = 0.0
        while s < n and window[s] == w:
            r, off = row[s], offered[s]
            if r < 0:
                demand += (0.0 if np.isnan(off) else off) * length[s]
            else:
                cap = rate[r] * selected[s] * serve[s]
                if np.isnan(off):
                    x, d = cap, rate[r] * length[s]
                else:
                    o = off * length[s]
                    x, d = (o if limit and o < cap else cap), o
                served, demand = served + x, demand + d
                if x > 0:
                    energy += x * e_tok[r]
                x_all[s] = x
            s += 1
        served_w[w], demand_w[w] = served, demand
        demand_total += demand
        energy += move_energy[w]
    return x_all, served_w, demand_w, energy, demand_total


def reduce_timeline(table: SegmentTable, served: Served, detail: bool = True,
                    extra_window=None) -> tuple[list[dict], dict]:
    """The windows (``detail``; else none) and totals of one timeline (module docstring);
    ``extra_window(w, served tokens)``: more figures of a window, appended to its record."""
    moves = table.moves
    sums = Sums(*served_sums(table.window, table.length_s, table.serve_s, table.offered_tps, served.row,
                             table.selected[table.key] if len(table.key) else np.zeros(0), served.rate_tps,
                             served.energy_j_per_token, table.move_energy_j, served.limit))
    x, energy, demand = sums.served, sums.energy_j, sums.demand
    mapped = served.row >= 0
    at, rows = x[mapped], served.row[mapped]
    tokens = float(sum(at.tolist()))
    totals = {"tokens_served": tokens, "mean_latency_s": token_mean(served.latency_s[rows], at, tokens),
              "p99_latency_s": token_p99(served.p99_s[rows], at, tokens),
              "availability": float(tokens / demand) if demand else 0.0,
              "migration_bytes": float(sum(table.move_bytes.tolist())),
              "migration_energy_j": float(sum(table.move_energy_j.tolist())),
              "energy_j_per_token": float(energy / tokens) if tokens else float("inf")}
    for name, (mean, p99) in served.ms.items():
        totals[f"mean_{name}_ms"] = 1e3 * token_mean(mean[rows], at, tokens)
        totals[f"p99_{name}_ms"] = 1e3 * token_p99(p99[rows], at, tokens)
    windows = [window_record(table, served, w, sums.window_served[w], sums.window_demand[w], extra_window)
               for w in range(len(moves))] if detail else []
    return windows, totals


def window_record(table: SegmentTable, served: Served, w: int, tokens: float, demand: float,
                  extra_window=None) -> dict:
    """Window ``w``'s record (docs/runtime.md, "Output")."""
    a, b = np.searchsorted(table.window, [w, w + 1])
    failed = []
    for d in dict.fromkeys(table.down[a:b].tolist()):
        failed += [x for x in names(table.downs[d]) if x not in failed]
    rows = served.row[a:b]
    mine = rows >= 0
    rows, lengths = rows[mine], table.length_s[a:b][mine].tolist()
    move, length = table.moves[w], float(table.window_s[w])
    record = {"t_s": float(table.t_s[w]), "latency_s": time_mean(served.latency_s[rows].tolist(), lengths)}
    for name, (mean, p99) in served.ms.items():
        record[f"mean_{name}_ms"] = 1e3 * time_mean(mean[rows].tolist(), lengths)
        record[f"p99_{name}_ms"] = 1e3 * float(p99[rows].max()) if len(rows) else float("inf")
    record.update({"tokens_per_s": float(tokens / length), "imbalance": float(table.imbalance[w]),
                   "migrations": int(move.moves), "migration_bytes": float(move.bytes),
                   "migration_s": float(move.time_s), "failed_components": failed,
                   "served_frac": float(tokens / demand) if demand else 0.0})
    if extra_window is not None:
        record.update(extra_window(tokens, length))
    return record


def time_mean(values: list, lengths: list) -> float:
    """Mean of ``values`` weighted by ``lengths``, summed in order; inf when there are none."""
    total = time = 0.0
    for v, t in zip(values, lengths):
        total, time = total + v * t, time + t
    return float(total / time) if time else float("inf")


def token_mean(values: np.ndarray, tokens: np.ndarray, total: float) -> float:
    """``values`` weighted by ``tokens`` (float arrays; ``total``: their sum): `np.average`'s own steps
    (the products summed over the weights summed), without its checks."""
    return float(np.multiply(values, tokens).sum() / tokens.sum()) if total else float("inf")


def token_p99(values: np.ndarray, tokens: np.ndarray, total: float) -> float:
    return weighted_quantile(np.asarray(values), tokens, 0.99) if total else float("inf")


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The ``q`` quantile of ``values`` weighted by ``weights`` (the value a ``q`` share of weight lies at
    or below)."""
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    return float(values[order][min(np.searchsorted(cum, q * cum[-1]), len(values) - 1)])
