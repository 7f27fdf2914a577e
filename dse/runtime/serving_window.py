"""A serving study's windows through the serving closed form (docs/runtime.md, "Serving studies").

For a study with a ``serving`` section (``workload.phase: serve``) a window is not one step: it is a
server under the window's offered load. Each segment's mapping (the same kernel arrays the timeline costs,
relabelled to the window's popularity, re-mapped after failures) is costed by the serving study's own
evaluators at its four steps, as `dse run` costs a serving design (dse.serving.package.ServingEvaluator):
the study's decode step of ``max_batch`` sequences (the timeline's step) and the decode of one sequence,
the prefill of one and of `REF_PROMPTS` prompts; they give the affine steps (dse.serving.analytic.
AffineSteps.from_points, the prefix cache's uncached share applied as dse.serving.package does), the KV
cache the segment's memory holds (`ServingEvaluator.kv_cache_tokens`, failed HBM stacks less) and, at the
segment's request rate, the closed form of the study's scheduler (dse.serving.closed_form:
`continuous_batching` or `chunked_prefill`).

The offered load is output tokens/s (vLLM benchmark_serving's ``output_throughput``): the request rate is
it over the study's ``output_len``. A load past the segment's saturation rate (the largest with a steady
state, the closed form's ``saturation_req_s``) is served at that rate, the rest refused (``served_frac``
< 1; the latencies are the closed form's there); a saturating scenario (no ``tokens_per_s``) serves at the
saturation rate. A window reports vLLM's names beside the timeline's: ``request_throughput`` (req/s),
``output_throughput`` (tokens/s, = ``tokens_per_s``), ``mean_ttft_ms``, ``p99_ttft_ms``,
``mean_tpot_ms``, ``p99_tpot_ms``; its ``latency_s`` is the mean TPOT (the time between two decode steps
of a sequence at that load). Energy per output token is priced at the load the segment serves
(dse.serving.analytic.energy_per_output_token): the decode steps at the batch the closed form keeps in
flight at that rate, each request's prefill, and the package's idle power (dse.serving.steps.
package_idle_w) over the time it waits, the steps' joules fitted affine through the four steps'
energies as their latencies are; so a lightly loaded window costs more per token than a saturated one.

Idle power follows what is powered in the segment (`segment_idle_w`): a failed chiplet is powered off
and draws nothing (the slot's kind's idle power is taken off until it is repaired or a spare stands in);
a spare standing in for it draws the slot's kind's idle power; a spare not yet in service (the scenario's
``failures.spares`` less those standing in) draws idle power too, that of the largest idle power among
the design's kinds. The assumption: a spare is a die on the package, bonded and on the package's power
rails, which can take a failed slot's role as soon as its weights land only if it is powered and idle (a
warm standby; the failure model still lets only serving chiplets fail); it waits at the idle power of the
largest kind it may stand in for (an upper bound for a package of several kinds; exact for one kind). A chiplet whose
HBM stacks all failed still forwards (its router and the die are powered): it keeps its idle power."""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from ..model.metrics import METRICS
from ..serving.analytic import REF_PROMPTS, AffineSteps, energy_per_output_token
from ..serving.closed_form import chunked_prefill, continuous_batching
from ..serving.package import ServingEvaluator, uncached_share
from ..serving.steps import package_idle_w, slot_idle_w
from .failures import names

#: the serving study's other steps, as dse.serving.package names them
POINTS = ("decode_1", "prefill_1", "prefill_ref")
LATENCY = METRICS.index("latency_s")
ENERGY = METRICS.index("energy_j_per_token")


class Served(NamedTuple):
    """The segments that serve and, per segment, its request rate (req/s), closed-form record, energy
    per output token (J) at that rate and the package's idle power (W, `segment_idle_w`)
    (`ServingWindows.segments`)."""

    segments: list
    rates: np.ndarray
    records: np.ndarray
    energy_per_token: np.ndarray
    idle_w: np.ndarray


class ServingWindows:
    """The closed form per segment of a serving study (module docstring); ``serving``: the study's
    `ServingEvaluator`, ``system``: its decode step's evaluator (the timeline's)."""

    def __init__(self, serving, system):
        self.serving, self.sv = serving, serving.study.serving
        self.packages = system.package_evaluators()
        self.points = {name: serving.points[name].package_evaluators() for name in POINTS}

    def figures(self, ev, d, metrics: np.ndarray, intact_s: np.ndarray) -> np.ndarray:
        """``[n, 12]`` per design of the kernel arrays ``d`` (package evaluator ``ev``): the timeline's
        (latency, p99, energy per token) of the decode step, then the latencies of `POINTS` (scaled as a
        failed link scales the decode step: ``metrics`` latency over ``intact_s``), the KV cache tokens,
        the joules of the decode step and of `POINTS` (energy per token x the step's tokens, as
        dse.serving.steps.step_figures), the package's idle power (W), then each slot's (W,
        dse.serving.steps.slot_idle_w: `segment_idle_w` takes failed chiplets' off)."""
        k = next(i for i, p in enumerate(self.packages) if p is ev)
        pts = {name: self.points[name][k] for name in POINTS}
        rows = {name: p.decoded_metrics(d, with_faults=False) for name, p in pts.items()}
        at = np.column_stack([rows[name][:, LATENCY] for name in POINTS])
        at *= (metrics[:, 0] / intact_s)[:, None]
        kv = self.serving.kv_cache_tokens(d.stacks, d.ddr, np.ones(len(metrics)))
        joules = np.column_stack([metrics[:, 2] * ev.tables.tokens_per_step] +
                                 [rows[name][:, ENERGY] * pts[name].tables.tokens_per_step for name in POINTS])
        return np.column_stack([metrics, at, kv, joules, package_idle_w(ev.tables, d.kind, d.chiplets),
                                slot_idle_w(ev.tables, d.kind, d.chiplets)])

    def steps(self, rows: np.ndarray) -> tuple:
        """Affine steps (d1, slope, p0, pk arrays) in seconds, the same in joules, and slots of `figures`
        rows, as dse.serving.package fits them."""
        sv = self.sv
        ref, share = min(REF_PROMPTS, sv.max_batch), uncached_share(sv)

        def fit(d1, d_batch, p1, p_ref) -> tuple:
            fitted = [AffineSteps.from_points(a, b, sv.max_batch, p, q, ref, sv.input_len)
                      for a, b, p, q in zip(d1, d_batch, p1, p_ref)]
            fitted = [dataclasses.replace(s, pk=s.pk * share) for s in fitted]
            return tuple(np.array([getattr(s, f) for s in fitted]) for f in ("d1", "slope", "p0", "pk"))
        slots = np.minimum(float(sv.max_batch), np.floor(rows[:, 6] / (sv.input_len + sv.output_len)))
        return (fit(rows[:, 3], rows[:, 0], rows[:, 4], rows[:, 5]),
                fit(rows[:, 8], rows[:, 7], rows[:, 9], rows[:, 10]), slots)

    def closed_form(self, rates: np.ndarray, steps: tuple, slots: np.ndarray) -> np.ndarray:
        """The study's scheduler's closed form at ``rates`` (requests/s) for each row."""
        sv = self.sv
        if sv.scheduler == "chunked":
            return chunked_prefill(rates, *steps, float(sv.input_len - sv.cached_tokens), float(sv.output_len),
                                   float(sv.chunk_tokens), slots, sv.slo.ttft_ms * 1e-3, sv.slo.tpot_ms * 1e-3)
        return continuous_batching(rates, *steps, float(sv.output_len), slots, sv.slo.ttft_ms * 1e-3,
                                   sv.slo.tpot_ms * 1e-3)

    def segments(self, plan: list, step: dict, spares: int = 0) -> Served:
        """The segments that serve, their request rates (offered, capped at saturation), closed-form
        records (one call at the offered rates, one at saturation for those past it) and energies per
        output token at those rates, with ``spares`` spare chiplets in the scenario (module docstring)."""
        segs = [s for win in plan for s in win.segments if s.mapping is not None]
        out = self.sv.output_len
        if not segs:
            return Served(segs, np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0))
        rows = np.array([step[s.key] for s in segs])
        idle_w = np.array([segment_idle_w(seg, row[12:], spares) for seg, row in zip(segs, rows)])
        steps, joules, slots = self.steps(rows)
        offered = np.array([np.inf if s.offered_tps is None else s.offered_tps / out for s in segs])
        cf = self.closed_form(np.where(np.isfinite(offered), offered, 0.0), steps, slots)
        rates = np.minimum(offered, cf["saturation_req_s"])
        over = rates < offered
        if over.any():
            cf[over] = self.closed_form(rates[over], tuple(x[over] for x in steps), slots[over])
        e_tok = energy_per_output_token(rates, cf["in_flight"], slots, steps, joules, idle_w, float(out),
                                        self.sv.scheduler == "chunked")
        return Served(segs, rates, cf, e_tok, idle_w)

    def summarise(self, plan: list, step: dict, spares: int = 0) -> tuple[list[dict], dict]:
        """The windows and totals of a serving study's timeline (module docstring); ``spares``: the
        scenario's spare chiplets."""
        served_segs = self.segments(plan, step, spares)
        segs, rates, cf, e_tok = served_segs.segments, served_segs.rates, served_segs.records, \
            served_segs.energy_per_token
        at = {id(s): i for i, s in enumerate(segs)}
        out_len = self.sv.output_len
        windows, served_all, rows, energy, demand_total = [], [], [], 0.0, 0.0
        for win in plan:
            served = demand = 0.0
            failed, mine = [], []
            for seg in win.segments:
                failed += [x for x in names(seg.down) if x not in failed]
                if seg.mapping is None:
                    demand += (seg.offered_tps or 0.0) * seg.length_s
                    continue
                i = at[id(seg)]
                cap = rates[i] * out_len * seg.selected * seg.serve_s
                d = rates[i] * out_len * seg.length_s if seg.offered_tps is None else seg.offered_tps * seg.length_s
                served, demand = served + cap, demand + d
                energy += cap * e_tok[i] if cap > 0 else 0.0
                served_all.append(cap)
                rows.append(i)
                mine.append((i, seg.length_s))
            demand_total += demand
            energy += win.move.energy_j
            windows.append({"t_s": float(win.t_s), **window_latency(cf, mine),
                            "tokens_per_s": float(served / win.length_s), "imbalance": float(win.imbalance),
                            "migrations": int(win.move.moves), "migration_bytes": float(win.move.bytes),
                            "migration_s": float(win.move.time_s), "failed_components": failed,
                            "served_frac": float(served / demand) if demand else 0.0,
                            "request_throughput": float(served / win.length_s / out_len),
                            "output_throughput": float(served / win.length_s)})
        tokens = float(sum(served_all))
        w = np.asarray(served_all)
        picked = cf[rows] if rows else cf[:0]

        def mean(field: str) -> float:
            return float(np.average(picked[field], weights=w)) if tokens else float("inf")

        def p99(field: str) -> float:
            return token_quantile(picked[field], w, 0.99) if tokens else float("inf")
        totals = {"tokens_served": tokens, "mean_latency_s": mean("tpot_mean_s"),
                  "p99_latency_s": p99("tpot_p99_s"),
                  "availability": float(tokens / demand_total) if demand_total else 0.0,
                  "migration_bytes": float(sum(x.move.bytes for x in plan)),
                  "migration_energy_j": float(sum(x.move.energy_j for x in plan)),
                  "energy_j_per_token": float(energy / tokens) if tokens else float("inf"),
                  "mean_ttft_ms": 1e3 * mean("ttft_mean_s"), "p99_ttft_ms": 1e3 * p99("ttft_p99_s"),
                  "mean_tpot_ms": 1e3 * mean("tpot_mean_s"), "p99_tpot_ms": 1e3 * p99("tpot_p99_s")}
        return windows, totals


def segment_idle_w(seg, slot_w: np.ndarray, spares: int) -> float:
    """The package's idle power (W) in segment ``seg`` (module docstring): every slot's (``slot_w``, its
    kind's idle power; 0 where unused) but those of chiplets down with no spare standing in
    (``seg.down.chiplets`` and ``seg.failed``), plus each spare not in service at the largest of them."""
    off = [c for c in seg.down.chiplets if c in seg.failed and c < len(slot_w)]
    in_service = len(seg.down.chiplets) - len(off)
    waiting = max(spares - in_service, 0)
    return float(slot_w.sum() - slot_w[off].sum() + waiting * (slot_w.max() if len(slot_w) else 0.0))


def window_latency(cf: np.ndarray, mine: list[tuple[int, float]]) -> dict:
    """A window's latencies from its serving segments ``(record, length s)``: means weighted by time,
    p99s the worst segment's; inf when nothing served."""
    if not mine:
        return {"latency_s": float("inf"), "mean_ttft_ms": float("inf"), "p99_ttft_ms": float("inf"),
                "mean_tpot_ms": float("inf"), "p99_tpot_ms": float("inf")}
    idx = [i for i, _ in mine]
    t = np.array([x for _, x in mine])
    r = cf[idx]
    tpot = float(np.average(r["tpot_mean_s"], weights=t))
    return {"latency_s": tpot, "mean_ttft_ms": 1e3 * float(np.average(r["ttft_mean_s"], weights=t)),
            "p99_ttft_ms": 1e3 * float(r["ttft_p99_s"].max()), "mean_tpot_ms": 1e3 * tpot,
            "p99_tpot_ms": 1e3 * float(r["tpot_p99_s"].max())}


def token_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The ``q`` quantile of ``values`` weighted by tokens ``weights`` (as dse.runtime.timeline's totals)."""
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    return float(values[order][min(np.searchsorted(cum, q * cum[-1]), len(values) - 1)])


def serving_windows(prepared) -> ServingWindows | None:
    """The closed form per window for a serving study (None for a study of one step)."""
    if prepared.study.serving is None:
        return None
    serving = prepared.evaluator        # a runtime study's wraps the serving evaluator (dse.runtime.search)
    while not isinstance(serving, ServingEvaluator):
        serving = serving.inner
    return ServingWindows(serving, prepared.system_evaluator)
