"""A design through a scenario (`dse timeline`, docs/runtime.md): dse.runtime.plan runs the policy
window by window; every segment's step is then costed by the study's own evaluator (the contract of
dse.model.contract: ``design_metrics``), the segments of every design given in one population call (so a
timeline costs one population evaluation of its distinct mappings, not one call per window); and the
windows and totals are summed from the step latencies, energies and the plan.

Per segment: the step serves ``tokens_per_step / latency`` tokens/s (the evaluator's throughput), times
the share of selections it can serve, over its serving time, capped by the offered load. ``served_frac``
is what was served over what the running design could take (or was offered): stalls and lost experts
lower it, a slower step does not. Energy: the step's energy per token for each token served plus the
moves' energy."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import StudyError
from ..study.space import Design
from .plan import Planner, WindowPlan
from .policies import make_policy
from .scenario import Scenario

NEEDED = ("latency_s", "latency_p99_s", "energy_j_per_token")


@dataclass
class Timeline:
    """One design's timeline: ``windows`` (one record per window) and ``totals`` (docs/runtime.md)."""

    policy: str
    scenario: str
    windows: list[dict]
    totals: dict

    def to_dict(self) -> dict:
        return {"scenario": self.scenario, "policy": self.policy, "windows": self.windows, "totals": self.totals}


def run_timelines(prepared, designs: list[Design], scenario: Scenario, policy: str = "static",
                  every_s: float | None = None, bound: float | None = None) -> list[Timeline]:
    """Each design of ``designs`` (one package each, of ``prepared``'s study) through ``scenario``."""
    evaluator = prepared.evaluator
    missing = [c for c in NEEDED if c not in evaluator.columns]
    if missing or any(d.system for d in designs):
        raise StudyError("dse timeline follows one package's step (a study without system or a serving or "
                         "training phase)", key="--design")
    plans, tables = [], []
    for design in designs:
        package = prepared.for_design(design)
        planner = Planner(package.package_evaluator, package.tables, prepared.study.hardware.package,
                          prepared.study.mapping.max_replicas, scenario, make_policy(policy, every_s, bound))
        plans.append(planner.plan(design))
        tables.append(package.tables)
    unique: dict[tuple, int] = {}
    todo: list[Design] = []
    for i, plan in enumerate(plans):
        for window in plan:
            for seg in window.segments:
                if seg.design is not None and (i, seg.key) not in unique:
                    unique[(i, seg.key)] = len(todo)
                    todo.append(seg.design)
    metrics = evaluator.design_metrics(todo, with_faults=False) if todo else np.zeros((0, len(evaluator.columns)))
    cols = [evaluator.columns.index(c) for c in NEEDED]
    step = {k: metrics[i, cols] for k, i in unique.items()}
    return [summarise(plan, {k: v for (j, k), v in step.items() if j == i}, t.tokens_per_step, scenario, policy)
            for i, (plan, t) in enumerate(zip(plans, tables))]


def run_timeline(prepared, design: Design, scenario: Scenario, policy: str = "static",
                 every_s: float | None = None, bound: float | None = None) -> Timeline:
    """``design`` through ``scenario`` under ``policy`` (module docstring)."""
    return run_timelines(prepared, [design], scenario, policy, every_s, bound)[0]


def summarise(plan: list[WindowPlan], step: dict, tokens_per_step: float, scenario: Scenario,
              policy: str) -> Timeline:
    """Windows and totals from the plan and each segment's step (latency, p99, energy per token)."""
    windows, served_all, lat_all, p99_all, energy = [], [], [], [], 0.0
    demand_total = 0.0
    for win in plan:
        served = demand = lat_time = lat_sum = 0.0
        lats, failed = [], set()
        for seg in win.segments:
            failed |= seg.down
            if seg.design is None:
                demand += (seg.offered_tps or 0.0) * seg.length_s
                continue
            latency, p99, e_tok = step[seg.key]
            rate = tokens_per_step / latency
            cap = rate * seg.selected * seg.serve_s
            if seg.offered_tps is None:
                s, d = cap, rate * seg.length_s
            else:
                s, d = min(cap, seg.offered_tps * seg.length_s), seg.offered_tps * seg.length_s
            served, demand = served + s, demand + d
            energy += s * e_tok
            lats.append(latency)
            lat_sum, lat_time = lat_sum + latency * seg.length_s, lat_time + seg.length_s
            served_all.append(s)
            lat_all.append(latency)
            p99_all.append(p99)
        demand_total += demand
        energy += win.move.energy_j
        windows.append({"t_s": float(win.t_s), "latency_s": float(lat_sum / lat_time) if lat_time else float("inf"),
                        "tokens_per_s": float(served / win.length_s), "imbalance": float(win.imbalance),
                        "migrations": int(win.move.moves), "migration_bytes": float(win.move.bytes),
                        "migration_s": float(win.move.time_s),
                        "failed_components": [f"chiplet {c}" for c in sorted(failed)],
                        "served_frac": float(served / demand) if demand else 0.0})
    tokens = float(sum(served_all))
    w = np.asarray(served_all)
    totals = {"tokens_served": tokens,
              "mean_latency_s": float(np.average(lat_all, weights=w)) if tokens else float("inf"),
              "p99_latency_s": weighted_quantile(np.asarray(p99_all), w, 0.99) if tokens else float("inf"),
              "availability": float(tokens / demand_total) if demand_total else 0.0,
              "migration_bytes": float(sum(x.move.bytes for x in plan)),
              "migration_energy_j": float(sum(x.move.energy_j for x in plan)),
              "energy_j_per_token": float(energy / tokens) if tokens else float("inf")}
    return Timeline(policy=policy, scenario=scenario.name, windows=windows, totals=totals)


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The ``q`` quantile of ``values`` weighted by ``weights`` (the value a ``q`` share of weight lies at
    or below)."""
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    return float(values[order][min(np.searchsorted(cum, q * cum[-1]), len(values) - 1)])
