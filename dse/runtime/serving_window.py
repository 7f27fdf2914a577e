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
HBM stacks all failed still forwards (its router and the die are powered): it keeps its idle power.

The study's serving evaluator is its phase's (dse.model.phases: `Prepared.phase_evaluator`, set by the
serving layer's preparer). Its figures per distinct mapping come through the one costing call
(dse.runtime.costing: `ServingWindows.figures`, named by `ServingFigures`), and the windows and totals
through the one reducer (dse.runtime.totals), each segment's rate and latencies the closed form's."""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from ..model.metrics import METRICS
from ..serving.analytic import REF_PROMPTS, AffineSteps, energy_per_output_token
from ..serving.closed_form import chunked_prefill, continuous_batching
from ..serving.package import uncached_share
from ..serving.steps import slot_idle_w
from .segments import SegmentTable
from .totals import Served, reduce_timeline

#: the serving study's other steps, as dse.serving.package names them
POINTS = ("decode_1", "prefill_1", "prefill_ref")
LATENCY, ENERGY = 0, 1              # the columns of a point's figures read here (`ServingWindows.figures`)


class ServingFigures(NamedTuple):
    """A serving study's figures per key of a segment table, beyond the decode step's (`StepFigures`):
    the latencies of `POINTS` (s, ``[n, 3]``), the KV cache tokens the segment's memory holds, the
    joules of the decode step and of `POINTS` (``[n, 4]``) and each slot's idle power (W, ``[n, S]``)."""

    points_s: np.ndarray
    kv_tokens: np.ndarray
    joules: np.ndarray
    slot_w: np.ndarray


class ServingWindows:
    """The closed form per segment of a serving study (module docstring); ``serving``: the study's
    `ServingEvaluator`."""

    def __init__(self, serving):
        self.serving, self.sv = serving, serving.study.serving
        self.points = {name: serving.points[name].package_evaluators() for name in POINTS}

    def figures(self, variant: int, ev, d, metrics: np.ndarray, intact_s: np.ndarray) -> np.ndarray:
        """``[n, 3 + 1 + 4 + S]`` per design of the kernel arrays ``d`` (package variant ``variant``,
        evaluator ``ev``; ``metrics``: the decode step's latency, p99 and energy per token): the latencies
        of `POINTS` (scaled as a failed link scales the decode step: ``metrics`` latency over
        ``intact_s``), the KV cache tokens, the joules of the decode step and of `POINTS` (energy per
        token x the step's tokens, as dse.serving.steps.step_figures), each slot's idle power (W,
        dse.serving.steps.slot_idle_w: `segment_idle_w` takes failed chiplets' off): `record` names them."""
        cols = [METRICS.index("latency_s"), METRICS.index("energy_j_per_token")]
        pts = {name: self.points[name][variant] for name in POINTS}
        rows = {name: p.decoded_metrics(d, with_faults=False)[:, cols] for name, p in pts.items()}
        at = np.column_stack([rows[name][:, LATENCY] for name in POINTS])
        at *= (metrics[:, 0] / intact_s)[:, None]
        kv = self.serving.kv_cache_tokens(d.stacks, d.ddr, np.ones(len(metrics)))
        joules = np.column_stack([metrics[:, 2] * ev.tables.tokens_per_step] +
                                 [rows[name][:, ENERGY] * pts[name].tables.tokens_per_step for name in POINTS])
        return np.column_stack([at, kv, joules, slot_idle_w(ev.tables, d.kind, d.chiplets)])

    @staticmethod
    def record(rows: np.ndarray) -> ServingFigures:
        """`figures`' columns by name."""
        return ServingFigures(rows[:, 0:3], rows[:, 3], rows[:, 4:8], rows[:, 8:])

    def steps(self, decode_s: np.ndarray, f: ServingFigures) -> tuple:
        """Affine steps (d1, slope, p0, pk arrays) in seconds, the same in joules, and slots, as
        dse.serving.package fits them, from the decode step's latency and the other figures."""
        sv = self.sv
        ref, share = min(REF_PROMPTS, sv.max_batch), uncached_share(sv)

        def fit(d1, d_batch, p1, p_ref) -> tuple:
            fitted = [AffineSteps.from_points(a, b, sv.max_batch, p, q, ref, sv.input_len)
                      for a, b, p, q in zip(d1, d_batch, p1, p_ref)]
            fitted = [dataclasses.replace(s, pk=s.pk * share) for s in fitted]
            return tuple(np.array([getattr(s, f) for s in fitted]) for f in ("d1", "slope", "p0", "pk"))
        slots = np.minimum(float(sv.max_batch), np.floor(f.kv_tokens / (sv.input_len + sv.output_len)))
        return (fit(f.points_s[:, 0], decode_s, f.points_s[:, 1], f.points_s[:, 2]),
                fit(f.joules[:, 1], f.joules[:, 0], f.joules[:, 2], f.joules[:, 3]), slots)

    def closed_form(self, rates: np.ndarray, steps: tuple, slots: np.ndarray) -> np.ndarray:
        """The study's scheduler's closed form at ``rates`` (requests/s) for each row."""
        sv = self.sv
        if sv.scheduler == "chunked":
            return chunked_prefill(rates, *steps, float(sv.input_len - sv.cached_tokens), float(sv.output_len),
                                   float(sv.chunk_tokens), slots, sv.slo.ttft_ms * 1e-3, sv.slo.tpot_ms * 1e-3)
        return continuous_batching(rates, *steps, float(sv.output_len), slots, sv.slo.ttft_ms * 1e-3,
                                   sv.slo.tpot_ms * 1e-3)

    def served(self, table: SegmentTable, step, spares: int = 0) -> Served:
        """What each segment serves (dse.runtime.totals.Served): the segments that serve at their request
        rates (offered, capped at saturation), their closed-form records (one call at the offered rates,
        one at saturation for those past it) and energies per output token at those rates, with
        ``spares`` spare chiplets in the scenario (module docstring)."""
        out = self.sv.output_len
        mapped = table.mapped[table.key] if len(table.key) else np.zeros(0, bool)
        row = np.where(mapped, np.cumsum(mapped) - 1, -1)
        keys = table.key[mapped]
        if not len(keys):
            z = np.zeros(0)
            return Served(row, z, z, z, z, {"ttft": (z, z), "tpot": (z, z)}, False)
        f = step.serving
        rows = ServingFigures(*(x[keys] for x in f))
        idle_w = np.array([segment_idle_w(table.downs[d], table.keys[k].failed, slot_w, spares)
                           for d, k, slot_w in zip(table.down[mapped].tolist(), keys.tolist(), rows.slot_w)])
        steps, joules, slots = self.steps(step.latency_s[keys], rows)
        offered = np.where(np.isnan(table.offered_tps[mapped]), np.inf, table.offered_tps[mapped] / out)
        cf = self.closed_form(np.where(np.isfinite(offered), offered, 0.0), steps, slots)
        rates = np.minimum(offered, cf["saturation_req_s"])
        over = rates < offered
        if over.any():
            cf[over] = self.closed_form(rates[over], tuple(x[over] for x in steps), slots[over])
        e_tok = energy_per_output_token(rates, cf["in_flight"], slots, steps, joules, idle_w, float(out),
                                        self.sv.scheduler == "chunked")
        return Served(row, rates * out, e_tok, cf["tpot_mean_s"], cf["tpot_p99_s"],
                      {"ttft": (cf["ttft_mean_s"], cf["ttft_p99_s"]), "tpot": (cf["tpot_mean_s"], cf["tpot_p99_s"])},
                      False)

    def reduce(self, table: SegmentTable, step, spares: int = 0, detail: bool = True) -> tuple[list[dict], dict]:
        """The windows and totals of a serving study's timeline (dse.runtime.totals, module docstring)."""
        out = self.sv.output_len

        def throughput(tokens: float, length: float) -> dict:
            return {"request_throughput": float(tokens / length / out), "output_throughput": float(tokens / length)}
        return reduce_timeline(table, self.served(table, step, spares), detail, throughput)


def segment_idle_w(down, failed: frozenset, slot_w: np.ndarray, spares: int) -> float:
    """The package's idle power (W) in a segment (module docstring): every slot's (``slot_w``, its kind's
    idle power; 0 where unused) but those of chiplets down (``down.chiplets``) counted ``failed`` (no spare
    standing in), plus each spare not in service at the largest of them."""
    off = [c for c in down.chiplets if c in failed and c < len(slot_w)]
    in_service = len(down.chiplets) - len(off)
    waiting = max(spares - in_service, 0)
    return float(slot_w.sum() - slot_w[off].sum() + waiting * (slot_w.max() if len(slot_w) else 0.0))


def serving_windows(prepared) -> ServingWindows | None:
    """The closed form per window for a serving study (None for a study of one step)."""
    if prepared.study.serving is None:
        return None
    return ServingWindows(prepared.phase_evaluator)
