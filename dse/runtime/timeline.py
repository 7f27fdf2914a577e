"""A design through a scenario (`dse timeline`, docs/runtime.md): dse.runtime.plan runs the policy
window by window; every segment's step is then costed by the study's own evaluator (the contract of
dse.model.contract), the distinct segments of every design given as kernel arrays in one population call
of the package evaluator (`Evaluator.decoded_metrics`; popularity drift is a relabelling of the arrays,
dse.runtime.mapping.Relabel, and no design record is built per window), so a timeline costs one
population evaluation of its distinct mappings, not one call per window; the windows and totals are
summed from the step latencies, energies and the plan.

Per segment: the step serves ``tokens_per_step / latency`` tokens/s (the evaluator's throughput), times
the share of selections it can serve, over its serving time, capped by the offered load. ``served_frac``
is what was served over what the running design could take (or was offered): stalls and lost experts
lower it, a slower step does not. Energy: the step's energy per token for each token served plus the
moves' energy."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import StudyError
from ..model.contract import DecodedDesigns
from ..model.metrics import METRICS
from ..study.space import Design
from .compact import CompactPlan, SegmentSums, segment_sums
from .failures import names
from .link_energy import link_energy_per_token
from .plan import Planner, WindowPlan
from .policies import make_policy
from .powered_off import chiplets_off, off_energy_per_token
from .scenario import Scenario
from .serving_window import serving_windows

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
                  every_s: float | None = None, bound: float | None = None, strict: bool = True,
                  detail: bool = True, arrays: DecodedDesigns | None = None,
                  planners: dict | None = None) -> list[Timeline]:
    """Each design of ``designs`` (one package each, of ``prepared``'s study) through ``scenario``;
    ``strict``: a failure naming a component a design lacks is an error (otherwise it spares that design:
    the search's designs differ in size); ``detail``: each window's record and imbalance (the search
    needs the totals only: its timelines have no windows); ``arrays``: the designs' kernel arrays when
    the caller decoded them (one package variant); ``planners``: the planners of earlier calls with the
    same scenario and policy to reuse (their popularity, outages and remembered packings: the search's
    generations)."""
    evaluator = prepared.system_evaluator          # the step's (a runtime study's evaluator wraps it)
    missing = [c for c in NEEDED if c not in evaluator.columns]
    if missing or any(d.system for d in designs):
        raise StudyError("dse timeline follows one package's step (a study without system or a serving or "
                         "training phase)", key="--design")
    check_links(prepared, scenario)
    reconfig = {c.name: c.reconfig_us * 1e-6 for c in prepared.study.hardware.chiplets if c.kind == "reconfigurable"}
    planners = {} if planners is None else planners
    serving = serving_windows(prepared)         # a serving study: the closed form per window
    plans, packages = [], []
    for design in designs:
        package = prepared.for_design(design)
        key = id(package.package_evaluator)
        if key not in planners:         # one planner per package variant: popularity and packings shared
            planners[key] = Planner(package.package_evaluator, package.tables, prepared.study.hardware.package,
                                    prepared.study.mapping.max_replicas, scenario, make_policy(policy, every_s, bound),
                                    prepared.study.workload.phase, reconfig, strict, detail,
                                    compact=serving is None and not detail)
        i = len(plans)
        plans.append(planners[key].plan(design, None if arrays is None else arrays.take(slice(i, i + 1))))
        packages.append((key, planners[key].base))
    step = step_metrics(plans, packages, planners, serving)
    if serving is not None:
        return [Timeline(policy, scenario.name, *serving.summarise(plan, step[i], scenario.failures.spares))
                for i, plan in enumerate(plans)]
    return [(compact_summary if isinstance(plan, CompactPlan) else summarise)(
                plan, step[i], planners[packages[i][0]].tables.tokens_per_step, scenario, policy, detail)
            for i, plan in enumerate(plans)]


def check_links(prepared, scenario: Scenario) -> None:
    """Link failures are priced on the evaluator's re-routed tables: the study must build them."""
    f = scenario.failures
    if (f.link_mtbf_h or any(e.component == "link" for e in f.events)) and not prepared.study.faults.links:
        raise StudyError("link failures are priced on the evaluator's re-routed tables: give the study "
                         "faults: {links: true}", key="failures")


def step_metrics(plans: list, packages: list, planners: dict, serving=None) -> list[dict]:
    """Each design's distinct segments (by key) costed by its package evaluator: one population call per
    package variant, every segment of every design in it; per design, key -> (latency, p99, energy/token).
    A segment with links down takes the latency of the evaluator's single-link-failure report of its
    design (`Evaluator.link_failure_report`: routes detoured by minimum hops), the slowest of its links,
    with p99 scaled alike, and the intact energy per token plus what the detours add
    (dse.runtime.link_energy: the step's traffic re-routed around every link down), less the idle power
    the evaluator charges chiplets that are down and draw nothing (dse.runtime.powered_off). A serving study's
    segments also carry its other steps' latencies and KV cache (dse.runtime.serving_window)."""
    out: list[dict] = [{} for _ in plans]
    todo: dict[int, list] = {}
    for i, (plan, (pkey, _)) in enumerate(zip(plans, packages)):
        pairs = zip(plan.keys, plan.mappings) if isinstance(plan, CompactPlan) else \
            ((seg.key, seg.mapping) for window in plan for seg in window.segments)
        for key, mapping in pairs:
            if mapping is not None and key not in out[i]:
                out[i][key] = None
                todo.setdefault(pkey, []).append((i, key, mapping))
    cols = [METRICS.index(c) for c in NEEDED]
    for pkey, every in todo.items():
        items, same = distinct(every, packages)
        widths = {m.slots.shape[1] for _, _, m in items}
        if len(widths) == 1:
            slots = np.stack([m.slots for _, _, m in items])
        else:
            slots = np.full((len(items), items[0][2].slots.shape[0], max(widths)), -1, np.int64)
            for j, (_, _, m) in enumerate(items):
                slots[j, :, : m.slots.shape[1]] = m.slots
        first: dict[int, int] = {}      # each design's package rows once, then one gather
        for i, _, _ in items:
            first.setdefault(i, len(first))
        rows = [packages[i][1] for i in first]
        pos = np.fromiter((first[i] for i, _, _ in items), np.int64, len(items))
        d = DecodedDesigns(*(np.concatenate([r[f] for r in rows])[pos] for f in (0, 1, 2)),
                           np.stack([m.stacks for _, _, m in items]), np.concatenate([r.ddr for r in rows])[pos],
                           slots, np.stack([m.ncopy for _, _, m in items]), np.zeros(len(items), np.int64))
        ev = planners[pkey].ev
        metrics = ev.decoded_metrics(d, with_faults=False, memory_path=False)[:, cols]
        intact_s = metrics[:, 0].copy()
        for j, (i, key, m) in enumerate(items):
            if m.links:
                metrics[j, :2] *= link_slowdown(ev, d, j, m.links, metrics[j, 0])
                metrics[j, 2] += link_energy_per_token(ev, planners[pkey].package_spec, d, j, m.links,
                                                       planners[pkey].tables.tokens_per_step)
        if serving is not None:         # the serving study's other steps and KV cache (serving_window.py)
            metrics = serving.figures(ev, d, metrics, intact_s)
        for (i, key, _), j in zip(every, same):
            out[i][key] = metrics[j]
            if serving is None and key.failed:  # chiplets down: those powered off draw nothing (powered_off.py)
                off = chiplets_off(key.failed, key.stacks, d, j)
                if off:
                    out[i][key] = metrics[j].copy()
                    out[i][key][2] -= off_energy_per_token(ev.tables, d, j, off, intact_s[j])
    return out


def distinct(items: list, packages: list) -> tuple[list, list[int]]:
    """The segments of ``items`` (design index, key, `SegmentMapping`) with distinct designs (the same
    package and the same arrays: the same step), and each item's index among them."""
    seen: dict[tuple, int] = {}
    bases: dict[int, bytes] = {}
    keep, index = [], []
    for item in items:
        i, _, m = item
        if i not in bases:
            base = packages[i][1]
            bases[i] = b"".join((base.rows.tobytes(), base.cols.tobytes(), base.kind.tobytes(), base.ddr.tobytes()))
        content = (bases[i], m.slots.shape, m.slots.tobytes(), m.ncopy.tobytes(), m.stacks.tobytes(), m.links)
        if content not in seen:
            seen[content] = len(keep)
            keep.append(item)
        index.append(seen[content])
    return keep, index


def link_slowdown(ev, d: DecodedDesigns, j: int, links: frozenset, intact_s: float) -> float:
    """Latency with the slowest of ``links`` failed over the intact latency ``intact_s``, design ``j`` of
    ``d`` (a design record built from its arrays for the evaluator's failure report)."""
    n = int(d.rows[j] * d.cols[j])
    design = Design(rows=int(d.rows[j]), cols=int(d.cols[j]), chiplets=[ev.tables.kind_names[k] for k in d.kind[j, :n]],
                    hbm_stacks=[int(x) for x in d.stacks[j, :n]], ddr_channels=int(d.ddr[j]), link=ev.link,
                    mapping=ev.space.mapping, topology=ev.topology,
                    placement={u: [int(x) for x in d.slots[j, i, : d.ncopy[j, i]]]
                               for i, u in enumerate(ev.tables.unit_names)})
    report = ev.link_failure_report(design).set_index("failed_link")["latency_s"]
    return max(float(report.get(f"{a}-{b}", report.get(f"{b}-{a}", np.inf))) for a, b in links) / intact_s


def run_timeline(prepared, design: Design, scenario: Scenario, policy: str = "static",
                 every_s: float | None = None, bound: float | None = None) -> Timeline:
    """``design`` through ``scenario`` under ``policy`` (module docstring)."""
    return run_timelines(prepared, [design], scenario, policy, every_s, bound)[0]


def summarise(plan: list[WindowPlan], step: dict, tokens_per_step: float, scenario: Scenario,
              policy: str, detail: bool = True) -> Timeline:
    """Windows and totals from the plan and each segment's step (latency, p99, energy per token);
    ``detail``: the windows' records too (the search needs the totals only)."""
    windows, served_all, lat_all, p99_all, energy = [], [], [], [], 0.0
    demand_total = 0.0
    figures = {k: tuple(v.tolist()) for k, v in step.items() if v is not None}     # Python floats: same sums
    for win in plan:
        served = demand = lat_time = lat_sum = 0.0
        failed = []
        for seg in win.segments:
            down = seg.down
            if detail and (down.chiplets or down.links or down.stacks):
                failed += [x for x in names(down) if x not in failed]
            offered = seg.offered_tps
            if seg.mapping is None:
                demand += (offered or 0.0) * seg.length_s
                continue
            latency, p99, e_tok = figures[seg.key]
            rate = tokens_per_step / latency
            cap = rate * seg.selected * seg.serve_s
            if offered is None:
                x, d = cap, rate * seg.length_s
            else:
                x, d = min(cap, offered * seg.length_s), offered * seg.length_s
            served, demand = served + x, demand + d
            energy += x * e_tok
            lat_sum, lat_time = lat_sum + latency * seg.length_s, lat_time + seg.length_s
            served_all.append(x)
            lat_all.append(latency)
            p99_all.append(p99)
        demand_total += demand
        move = win.move
        energy += move.energy_j
        if detail:
            windows.append({"t_s": float(win.t_s), "latency_s": float(lat_sum / lat_time) if lat_time else float("inf"),
                            "tokens_per_s": float(served / win.length_s), "imbalance": float(win.imbalance),
                            "migrations": int(move.moves), "migration_bytes": float(move.bytes),
                            "migration_s": float(move.time_s),
                            "failed_components": failed,
                            "served_frac": float(served / demand) if demand else 0.0})
    totals = totals_of(served_all, lat_all, p99_all, energy, demand_total, [x.move.bytes for x in plan],
                       [x.move.energy_j for x in plan])
    return Timeline(policy=policy, scenario=scenario.name, windows=windows, totals=totals)


def compact_summary(plan: CompactPlan, step: dict, tokens_per_step: float, scenario: Scenario, policy: str,
                    detail: bool = False) -> Timeline:
    """`summarise`'s totals of a `CompactPlan` (no window records), summed in one compiled pass
    (dse.runtime.compact.segment_sums: the same operations in the same order)."""
    mapped = np.array([m is not None for m in plan.mappings], bool)
    fig = np.full((len(plan.keys), 3), np.nan)
    for j, (key, m) in enumerate(zip(plan.keys, plan.mappings)):
        if m is not None:
            fig[j] = step[key]
    sums = SegmentSums._make(segment_sums(
        plan.window, plan.length_s, plan.serve_s, plan.offered_tps, plan.key, mapped, plan.selected, fig[:, 0],
        fig[:, 1], fig[:, 2], float(tokens_per_step), np.asarray(plan.move_energy_j, float)))
    totals = totals_of(sums.served.tolist(), sums.latency, sums.p99, sums.energy_j, sums.demand, plan.move_bytes,
                       plan.move_energy_j)
    return Timeline(policy=policy, scenario=scenario.name, windows=[], totals=totals)


def totals_of(served_all: list, lat_all, p99_all, energy: float, demand_total: float, move_bytes: list,
              move_energy: list) -> dict:
    """A timeline's totals from its costed segments (tokens served, latency, p99 each), the energy and
    demand over the horizon, and each window's moves (bytes, J)."""
    tokens = float(sum(served_all))
    w = np.asarray(served_all)
    return {"tokens_served": tokens,
            "mean_latency_s": float(np.average(lat_all, weights=w)) if tokens else float("inf"),
            "p99_latency_s": weighted_quantile(np.asarray(p99_all), w, 0.99) if tokens else float("inf"),
            "availability": float(tokens / demand_total) if demand_total else 0.0,
            "migration_bytes": float(sum(move_bytes)),
            "migration_energy_j": float(sum(move_energy)),
            "energy_j_per_token": float(energy / tokens) if tokens else float("inf")}


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The ``q`` quantile of ``values`` weighted by ``weights`` (the value a ``q`` share of weight lies at
    or below)."""
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    return float(values[order][min(np.searchsorted(cum, q * cum[-1]), len(values) - 1)])
