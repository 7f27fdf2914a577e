"""Serving studies (``workload.phase: serve``): `dse run` searches packages and systems for service-level
objectives under continuous batching or chunked prefill (the ``serving`` section: lengths, rate, batch
limit, scheduler, SLOs).

Each design is costed by the system evaluator (dse.system) at four steps, all at once over the
population: the decode of ``max_batch`` sequences at the mean context (the study's own step, with every
metric it reports: latency, energy, area, fault tolerance ...), the decode of one sequence, and the
prefill of one and of `REF_PROMPTS` prompts (without failures: they only fit the affine steps of
dse.serving.analytic). The closed form (dse.serving.closed_form, of continuous batching or of chunked prefill)
turns them into the serving columns:

* ``ttft_p99_s``, ``tpot_p99_s`` at the study's ``request_rate``; ``ttft_mean_s``, ``tpot_mean_s``;
* ``goodput_req_s``: requests per second meeting both SLOs at that rate;
* ``max_rate_at_slo_req_s``: the largest rate whose p99 TTFT and TPOT meet the SLOs;
* ``saturation_req_s``: the largest rate with a steady state; ``kv_cache_tokens``: the KV cache the
  design's memory holds beside the weights, within ``gpu_memory_utilization`` of it (vLLM's; it and
  ``max_batch`` bound the sequences in flight);
* ``energy_j_per_token``: joules per *output* token of the server at the study's ``request_rate``
  (dse.serving.analytic.energy_per_output_token: the decode steps at the batch the closed form keeps in
  flight at that rate, every request's prefill and the chips' idle power over the time they wait; the
  four steps' energies fitted affine as their latencies are), not the ``max_batch`` decode step's; a
  design past saturation is priced at its saturation rate. ``carbon_operational_g_per_token`` (and
  ``carbon_g_per_token``) follow it. The energy breakdown columns (``energy_compute_j_per_token`` ...)
  and ``throughput_tok_s`` stay the ``max_batch`` decode step's.

With ``enable_prefix_caching`` every prompt's cached share (``ServingSpec.cached_tokens``) is not prefilled:
the prefill's per-prompt work scales with the uncached share.

A system's replicas each serve an equal share of the requests; a replica's step is the system's step
latency (its pipeline stages in sequence, one batch in flight: a conservative bound for pipelines).
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from ..errors import StudyError
from ..model.phases import Phase, PhaseConstraint
from ..model.prepare import Prepared
from ..study.spec import Study
from ..system.evaluator import SystemEvaluator
from ..system.layout import layout_of
from ..system.metrics import SYSTEM_METRICS, C
from ..system.phase_evaluator import PhaseEvaluator
from ..system.prepare import prepare_step
from ..system.carbon import operational_g
from .analytic import REF_PROMPTS, AffineSteps, energy_per_output_token
from .closed_form import chunked_prefill, continuous_batching
from .steps import package_idle_w

#: columns a serving study adds to the system's (units in the names)
SERVING_METRICS = ["ttft_p99_s", "tpot_p99_s", "goodput_req_s", "max_rate_at_slo_req_s", "ttft_mean_s",
                   "tpot_mean_s", "saturation_req_s", "kv_cache_tokens"]
METRICS = SYSTEM_METRICS + SERVING_METRICS
#: what the serving study takes of its other steps
STEP_COLUMNS = ("latency_s", "energy_j_per_token")
S = {name: i for i, name in enumerate(METRICS)}


def step_study(study: Study, phase: str, batch: int, context: int) -> Study:
    """The serving study's workload as one step: ``phase`` of ``batch`` sequences of ``context`` tokens."""
    workload = study.workload.model_copy(update={"phase": phase, "batch": batch, "context": context})
    return study.model_copy(update={"workload": workload, "serving": None})


def prepare_serving(study: Study) -> Prepared:
    """The study's designs made ready to cost as servers (module docstring)."""
    p = prepare_step(study)
    sv = study.serving
    points = {"decode_1": step_study(study, "decode", 1, sv.mean_context),
              "prefill_1": step_study(study, "prefill", 1, sv.input_len),
              "prefill_ref": step_study(study, "prefill", min(REF_PROMPTS, sv.max_batch), sv.input_len)}
    evaluators = {}
    for name, s in points.items():
        q = prepare_step(s)
        if q.space.n_var != p.space.n_var:
            raise StudyError(f"the {name.replace('_', ' of ')} step has another design space than the decode step "
                             "(the workload's units differ by phase)", key="workload.phase")
        evaluators[name] = q.evaluator
    serving = ServingEvaluator(p.evaluator, study, p.tables, evaluators)
    return dataclasses.replace(p, evaluator=serving, system_evaluator=p.evaluator, phase_evaluator=serving)


class ServingEvaluator(PhaseEvaluator):
    """The evaluator contract (dse.model.contract) over serving designs (module docstring), built on the
    system evaluator ``system`` of the study's decode step and those of the ``points`` steps."""

    def __init__(self, system: SystemEvaluator, study: Study, tables, points: dict[str, SystemEvaluator]):
        super().__init__(system)
        self.study, self.tables, self.points = study, tables, points
        w = tables.workload.summary
        self.weight_bytes = float(tables.unit_capacity_bytes.sum())
        self.kv_bytes_per_token = float(w.get("kv_cache_bytes_per_token", 0.0))

    @property
    def columns(self) -> list[str]:
        return METRICS

    def metrics_array(self, X: np.ndarray, with_faults: bool = True) -> np.ndarray:
        X = self.vectors(X)
        base = self.system.metrics_array(X, with_faults)
        figures = self.system.package_figures(X)          # the same under the three extra steps' workloads
        steps = {name: ev.step_array(X, figures, STEP_COLUMNS) for name, ev in self.points.items()}
        d = self.system.decode(X)
        return self._serve(base, steps, self.system.layouts_of(X), d)

    def design_metrics(self, designs, with_faults: bool = True) -> np.ndarray:
        base = self.system.design_metrics(designs, with_faults)
        steps = {name: ev.design_metrics(designs, False)[:, [C[c] for c in STEP_COLUMNS]]
                 for name, ev in self.points.items()}
        return self._serve(base, steps, [layout_of(d) for d in designs], self.system.package_arrays(designs))

    def kv_cache_tokens(self, stacks: np.ndarray, ddr: np.ndarray, packages_per_replica: np.ndarray) -> np.ndarray:
        """Tokens of KV cache a replica holds: the serving section's gpu_memory_utilization of its packages'
        HBM and DDR less the model's weights, over the KV bytes of one token (all layers); inf for a model
        without a KV cache."""
        t = self.tables
        memory = np.asarray(stacks).sum(axis=1) * (t.hbm.capacity_bytes if t.hbm else 0.0) + \
            np.asarray(ddr) * (t.ddr.capacity_bytes if t.ddr else 0.0)
        share = self.study.serving.gpu_memory_utilization
        free = np.maximum(share * memory * packages_per_replica - self.weight_bytes, 0.0)
        return free / self.kv_bytes_per_token if self.kv_bytes_per_token > 0 else np.full(len(free), math.inf)

    def steps_of(self, design) -> tuple[AffineSteps, float, int]:
        """A design's affine steps (one replica's), the sequences a replica holds at once, its replicas."""
        base = self.system.design_metrics([design], False)[0, C["latency_s"]]
        at = {name: float(ev.design_metrics([design], False)[0, C["latency_s"]]) for name, ev in self.points.items()}
        sv = self.study.serving
        layout = layout_of(design)
        packages = self.system.package_arrays([design])
        kv = float(self.kv_cache_tokens(packages.stacks, packages.ddr, np.array([float(layout.per_replica)]))[0])
        n_max = min(float(sv.max_batch), math.floor(kv / (sv.input_len + sv.output_len)) if math.isfinite(kv) else
                    math.inf)
        steps = AffineSteps.from_points(at["decode_1"], float(base), sv.max_batch, at["prefill_1"], at["prefill_ref"],
                                        min(REF_PROMPTS, sv.max_batch), sv.input_len)
        computed = uncached_share(sv)
        steps = dataclasses.replace(steps, pk=steps.pk * computed, prompt=steps.prompt * computed)
        return steps, n_max, layout.replicas

    def _serve(self, base: np.ndarray, steps: dict, layouts, packages) -> np.ndarray:
        """The serving columns from the decode step's metrics ``base``, the other steps' (latency, energy
        per token) ``steps``, the layouts and the packages (kernel arrays: kind, chiplets, stacks, ddr)."""
        sv = self.study.serving
        out = np.zeros((len(base), len(METRICS)))
        out[:, : len(SYSTEM_METRICS)] = base
        replicas = np.array([layout.replicas for layout in layouts], float)
        per_replica = np.array([layout.per_replica for layout in layouts], float)
        kv = self.kv_cache_tokens(packages.stacks, packages.ddr, per_replica)
        n_max = np.minimum(float(sv.max_batch), np.floor(kv / (sv.input_len + sv.output_len)))
        batch, ref = sv.max_batch, min(REF_PROMPTS, sv.max_batch)
        seconds = affine(base[:, C["latency_s"]], steps, 0, batch, ref, uncached_share(sv))
        rates = np.asarray(sv.request_rate / replicas, float)
        cf = self.closed_form(rates, seconds, n_max)
        for name in cf.dtype.names:                        # the closed form's results a serving study reports
            if name in S:
                out[:, S[name]] = cf[name]
        for name in ("goodput_req_s", "max_rate_at_slo_req_s", "saturation_req_s"):
            out[:, S[name]] *= replicas
        out[:, S["kv_cache_tokens"]] = kv
        # energy per output token at the request rate (capped at saturation), one replica's (module docstring)
        tokens = {"decode_1": 1.0, "prefill_1": float(sv.input_len), "prefill_ref": float(ref * sv.input_len)}
        joules = affine(base[:, C["energy_j_per_token"]] * batch, {k: v * tokens[k] for k, v in steps.items()}, 1,
                        batch, ref, uncached_share(sv))
        served = np.minimum(rates, cf["saturation_req_s"])
        over = served < rates
        if over.any():
            cf[over] = self.closed_form(served[over], tuple(x[over] for x in seconds), n_max[over])
        idle_w = per_replica * package_idle_w(self.tables, packages.kind, packages.chiplets)
        energy = energy_per_output_token(served, cf["in_flight"], n_max, seconds, joules, idle_w,
                                         float(sv.output_len), sv.scheduler == "chunked")
        out[:, S["energy_j_per_token"]] = energy
        operational = operational_g(energy, self.system.factors.grid_g_per_kwh)
        out[:, S["carbon_g_per_token"]] += operational - out[:, S["carbon_operational_g_per_token"]]
        out[:, S["carbon_operational_g_per_token"]] = operational
        return out

    def closed_form(self, rates: np.ndarray, seconds: tuple, n_max: np.ndarray) -> np.ndarray:
        """The study's scheduler's closed form at ``rates`` (requests/s per replica) for affine ``seconds``."""
        sv = self.study.serving
        if sv.scheduler == "chunked":
            return chunked_prefill(rates, *seconds, float(sv.input_len - sv.cached_tokens), float(sv.output_len),
                                   float(sv.chunk_tokens), n_max, sv.slo.ttft_ms * 1e-3, sv.slo.tpot_ms * 1e-3)
        return continuous_batching(rates, *seconds, float(sv.output_len), n_max, sv.slo.ttft_ms * 1e-3,
                                   sv.slo.tpot_ms * 1e-3)


def affine(d_batch: np.ndarray, steps: dict, col: int, batch: int, ref: int, share: float) -> tuple:
    """(d1, slope, p0, pk) arrays through the decode of ``batch`` (``d_batch``) and column ``col`` of the
    other steps (`AffineSteps.from_points` on arrays; pk scaled by the prompt's uncached ``share``)."""
    d1, p1, p_ref = (steps[k][:, col] for k in ("decode_1", "prefill_1", "prefill_ref"))
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.maximum((d_batch - d1) / (batch - 1), 0.0) if batch > 1 else np.zeros(len(d1))
        pk = np.maximum((p_ref - p1) / (ref - 1), 0.0) if ref > 1 else p1.copy()
    return d1, slope, np.maximum(p1 - pk, 0.0), pk * share


def uncached_share(sv) -> float:
    """The share of a prompt computed when prefix caching finds ``sv.cached_tokens`` of it (the serving
    section's): a prompt's prefill work (pk) scales with it; the KV cache still holds the whole prompt."""
    return (sv.input_len - sv.cached_tokens) / sv.input_len


def request_rate_over(metrics: pd.DataFrame, study: Study) -> np.ndarray:
    """A server must keep up with the offered rate (a steady state): the study's request rate over the
    design's saturation rate, less 1 (> 0: infeasible; inf for a design that serves no rate)."""
    saturation = metrics["saturation_req_s"].to_numpy(float)
    with np.errstate(divide="ignore"):
        return np.where(saturation > 0, study.serving.request_rate / np.where(saturation > 0, saturation, 1.0) - 1.0,
                        np.inf)


#: ``workload.phase: serve``, registered by the facade (dse.model.phases)
PHASE = Phase(name="serve", prepare=prepare_serving, step_phase="decode", metrics=tuple(SERVING_METRICS),
              objectives={"ttft_p99": ("ttft_p99_s", 1.0), "tpot_p99": ("tpot_p99_s", 1.0),
                          "goodput": ("goodput_req_s", -1.0), "max_rate_at_slo": ("max_rate_at_slo_req_s", -1.0)},
              constraints=(PhaseConstraint("request_rate_over", request_rate_over),))
