"""The runtime loop of one design through a scenario, before anything is costed: window by window, the
policy sees the state (dse.runtime.policies), its moves are priced (dse.runtime.migration), and each
window is cut where what is down changes (chiplets, links, HBM stacks: dse.runtime.failures) into
segments, each with the mapping it serves, the share of expert selections it can serve, and the time it
serves (less migration stalls).

A failure takes effect at its time; policies act at window starts on what the last window observed,
once the last move has landed (a move stalls serving, or streams in the background while the old
mapping serves: dse.runtime.scenario.MigrationSpec).
Until one acts, a failed chiplet's units with a surviving copy are served by it, and units with none go
unserved: their selections are lost (a non-expert unit lost: nothing is served). The step of a
segment is the package evaluator's re-mapped design (`Evaluator.remapped`), which still costs the lost
units' work on a survivor: an upper bound on the degraded step. A repaired chiplet comes back with its
weights (the repair time includes reloading them); a spare returns to the pool when the chiplet it
stood in for is repaired. A failed HBM stack cuts its chiplet's stacks (capacity and bandwidth) in the
step's design; a chiplet left with no stack in a package without DDR has no memory for its units: it
counts as failed for the mapping (its units forced off), while its router keeps forwarding. A failed
link is priced in dse.runtime.timeline (the evaluator's re-routed tables)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np

from ..model.contract import DecodedDesigns
from ..model.evaluator import design_arrays
from ..model.routes import physical_links
from ..study.space import Design
from ..errors import StudyError
from .compact import rest_plan, static_plan, static_template
from .contention import contended, serving_traffic
from .failures import Down, change_times, down_at, outages
from .mapping import (ExpertGroups, Placement, Relabel, SegmentKey, SegmentMapping, live_copies, on_chips,
                      perm_key, placement_imbalance)
from .migration import NO_MOVE, MigrationModel, MoveCost, Priced
from .policies import PolicyState
from .policies.base import holds
from .policies.static import StaticPolicy
from .popularity import window_perms
from .scenario import Scenario
from .traces import request_load, trace_perms


@dataclass
class Segment:
    """Part of a window with one mapping and one failed set: ``mapping`` the design to cost at the study's
    popularity as kernel arrays (`SegmentMapping`; None: nothing survives), ``selected`` the share of
    expert selections it serves, ``serve_s`` the serving time (the segment's length less migration
    stalls), ``offered_tps`` offered tokens/s, ``failed`` the chiplets down (or forced off by lost HBM) and
    not stood in for by a spare."""

    window: int
    length_s: float
    serve_s: float
    mapping: "SegmentMapping | None"
    selected: float
    offered_tps: float | None
    failed: frozenset[int]
    down: Down                      # what is down, chiplets a spare stands in for included
    key: SegmentKey | None = None   # equal keys, equal steps


class Outages(NamedTuple):
    """A package shape's outages through the scenario (`Planner.outages`)."""

    outs: list
    downs: Callable[[float], Down]
    cuts: Callable[[int, float, float], list]
    frames: list


@dataclass
class WindowPlan:
    t_s: float
    length_s: float
    move: MoveCost
    imbalance: float
    segments: list[Segment] = field(default_factory=list)


def lost_selections(slots: np.ndarray, ncopy: np.ndarray, failed: frozenset[int], q_unit: np.ndarray,
                    experts: np.ndarray) -> float:
    """Share of expert selections that land on units with no live copy (1 if a non-expert unit has none);
    ``q_unit``: each unit's selections per token at the window's popularity (0 for non-experts),
    ``experts``: which units are routed experts."""
    orphan = orphans(slots, ncopy, failed, experts)
    if orphan is None:
        return 1.0
    total = q_unit.sum()
    return float(q_unit[orphan].sum() / total) if total else 0.0


def orphans(slots: np.ndarray, ncopy: np.ndarray, failed: frozenset[int], experts: np.ndarray) -> np.ndarray | None:
    """Units with no live copy (`lost_selections`); None when a non-expert unit is among them."""
    width = np.arange(slots.shape[1])[None, :] < ncopy[:, None]
    live = (width & ~on_chips(slots, failed)).any(axis=1)
    orphan = ~live & (ncopy > 0)
    return None if (orphan & ~experts).any() else orphan


class Planner:
    """Runs one design through a scenario under a policy (module docstring)."""

    def __init__(self, package_evaluator, tables, package_spec, max_copies: int, scenario: Scenario, policy,
                 phase: str = "prefill", reconfig_kinds: dict[str, float] | None = None, strict: bool = True,
                 detail: bool = True, compact: bool = False):
        self.ev, self.tables, self.scenario, self.policy = package_evaluator, tables, scenario, policy
        self.package_spec, self.max_copies = package_spec, max_copies
        self.reconfig_kinds = reconfig_kinds or {}      # chiplet kind -> its reconfiguration time, s
        self.strict = strict            # components a scenario names and a design lacks: an error (or none)
        self.detail = detail            # each window's imbalance (the search's totals do without it)
        self.compact = compact          # a never-acting policy's plan as arrays (dse.runtime.compact)
        self.shared: dict = {}          # per package shape: outages, what is down when, hops (migration.py)
        self.workspaces: dict = {}      # the evaluator's scratch arrays for re-mapping, per copy width
        self.never_acts = isinstance(policy, StaticPolicy)
        self.quiet = policy.quiet       # (placement, home) -> nothing to do while all are up (base.Policy)
        self.groups = ExpertGroups.from_tables(tables)
        self.relabel = Relabel(self.groups)
        self.is_expert = np.zeros(tables.n_units, bool)
        self.is_expert[self.relabel.src] = True
        sc = scenario
        if sc.popularity.drift == "trace":
            self.perms = trace_perms(sc.popularity.trace, [n[0].rpartition(".")[0] for n in self.groups.names],
                                     self.groups.q, sc.starts(), sc.lengths())
        else:
            self.perms = window_perms(sc.popularity, [len(n) for n in self.groups.names], sc.starts(), sc.lengths())
        self.load = request_load(sc.load.trace, sc.load.rate, phase, sc.starts(), sc.lengths()) \
            if sc.load.kind == "trace" else None
        keys: dict[int, bytes] = {}                     # windows of one popularity may share its list
        for p in self.perms:
            if id(p) not in keys:
                keys[id(p)] = perm_key(p)
        self.perm_keys = [keys[id(p)] for p in self.perms]
        self.q_units: dict[bytes, np.ndarray] = {}
        self.memo: dict = {}            # what the policy keeps between windows of one design
        self.cache: dict = {}
        self.balance: dict = {}

    def q_unit(self, w: int) -> np.ndarray:
        """Each unit's expert selections per token at window ``w``'s popularity (0: not an expert)."""
        key = self.perm_keys[w]
        if key not in self.q_units:
            q = np.zeros(self.tables.n_units)
            q[self.relabel.src] = np.concatenate([g[p] for g, p in zip(self.groups.q, self.perms[w])]) \
                if self.perms[w] else np.zeros(0)
            self.q_units[key] = q
        return self.q_units[key]

    def offered_at(self, a: float, b: float) -> float | None:
        """Offered tokens/s of the segment ``a``..``b`` (at its middle), once per segment."""
        key = ("offered", a, b)
        if key not in self.shared:
            self.shared[key] = self.offered(0.5 * (a + b))
        return self.shared[key]

    def offered(self, t: float) -> float | None:
        load = self.scenario.load
        if self.load is not None:
            return float(self.load[min(int(t // self.scenario.window_s), len(self.load) - 1)])
        if load.tokens_per_s is None:
            return None
        if load.kind == "diurnal":
            return load.tokens_per_s * (1 + load.amplitude * np.sin(2 * np.pi * t / load.period_s))
        return load.tokens_per_s

    def effective(self, version: int, serving: Placement, failed: frozenset[int], w: int, down: Down):
        """The design a segment costs (`SegmentMapping`, relabelled to window ``w``'s popularity; None:
        nothing survives) and the share of selections it serves; the re-mapping once per mapping, failed
        set and stacks (popularity only relabels it)."""
        slots, ncopy = serving
        stacks = self.base.stacks[0].copy()
        for c, k in down.stacks:
            stacks[c] -= k
        if failed:
            held = ("holds", version, failed)
            if held not in self.cache:
                self.cache[held] = holds(serving, failed)
        if not failed or not self.cache[held]:
            return SegmentMapping(*self.relabel(slots, ncopy, self.perms[w]), stacks, down.links), 1.0
        key = ("remap", version, failed, down.stacks)
        if key not in self.cache:
            one = self.base._replace(slots=slots[None], ncopy=ncopy[None], stacks=stacks[None])
            self.cache[key] = self.ev.remapped_arrays(one, sorted(failed), self.workspace(slots.shape[1]))
        ok, new_slots, new_ncopy = self.cache[key]
        if not ok:
            return None, 0.0
        gone = ("orphans", version, failed)         # popularity only weighs them (`lost_selections`)
        if gone not in self.cache:
            self.cache[gone] = orphans(slots, ncopy, failed, self.is_expert)
        orphan, q_unit = self.cache[gone], self.q_unit(w)
        lost = 1.0 if orphan is None else (float(q_unit[orphan].sum() / q_unit.sum()) if q_unit.sum() else 0.0)
        return SegmentMapping(*self.relabel(new_slots, new_ncopy, self.perms[w]), stacks, down.links), 1.0 - lost

    def workspace(self, width: int):
        """The evaluator's scratch arrays for re-mapping at a copy width, reused (one thread)."""
        if width not in self.workspaces:
            self.workspaces[width] = self.ev.workspace(width)
        return self.workspaces[width]

    def remap(self, placement: Placement, failed: frozenset) -> Placement | None:
        """``placement`` after the chiplets ``failed`` die (`Evaluator.remapped_arrays` on the design's own
        HBM stacks); None when nothing survives. The policies' re-mapping."""
        one = self.base._replace(slots=placement.slots[None], ncopy=placement.ncopy[None])
        ok, slots, ncopy = self.ev.remapped_arrays(one, sorted(failed), self.workspace(placement.slots.shape[1]))
        return Placement(slots.copy(), ncopy.copy()) if ok else None

    def chips_down(self, down: Down, design: Design) -> frozenset[int]:
        """Chiplets down, and those whose every HBM stack failed in a package without DDR (units forced off)."""
        if design.ddr_channels or not down.stacks:
            return down.chiplets
        return down.chiplets | {c for c, k in down.stacks if k >= design.hbm_stacks[c]}

    def roles(self, design: Design) -> dict[int, float]:
        """Reconfigurable chiplet slots (the scenario's, and chiplets of a reconfigurable kind) -> the time
        they take to take another role, s."""
        f = self.scenario.failures
        n = design.rows * design.cols
        bad = [s for s in f.reconfigurable if s >= n]
        if bad and self.strict:
            raise StudyError(f"chiplet {bad[0]} is not in the design (slots 0..{n - 1})", key="failures.reconfigurable")
        return {s: f.reconfigure_s + self.reconfig_kinds.get(k, 0.0) for s, k in enumerate(design.chiplets)
                if s in f.reconfigurable or k in self.reconfig_kinds}

    def outages(self, design: Design):
        """The design's outages (dse.runtime.failures), ``downs(t)``: what is down at t, ``cuts``: a window's
        segment edges, and ``frames``: each window's (start, length, what is down at its start, its
        segments as (start, end, what is down, offered tokens/s)); all shared by designs of the same package
        shape (and HBM stacks, when the scenario fails stacks: the draws are seeded, the same for each)."""
        f = self.scenario.failures
        hbm = bool(f.hbm_mtbf_h) or any(e.component == "hbm" for e in f.events)
        key = ("outages", design.rows, design.cols, tuple(design.hbm_stacks) if hbm else None)
        if key not in self.shared:
            sc = self.scenario
            links = physical_links(self.package_spec.network(design.rows, design.cols))
            outs = outages(sc.failures, design.rows * design.cols, sc.horizon_s, links, design.hbm_stacks,
                           self.strict)
            memo: dict[float, Down] = {}
            edges: dict[int, list[float]] = {}

            def downs(t: float) -> Down:
                if t not in memo:
                    memo[t] = down_at(outs, t, design.hbm_stacks)
                return memo[t]

            def cuts(w: int, t0: float, length: float) -> list[float]:
                """Window ``w`` cut where what is down changes: its segments' edges."""
                if w not in edges:
                    edges[w] = sorted({t0, t0 + length, *change_times(outs, t0, t0 + length)})
                return edges[w]
            frames = []
            for w, (t0, length) in enumerate(zip(sc.starts(), sc.lengths())):
                e = cuts(w, t0, length)
                frames.append((t0, length, downs(t0), [(a, b, downs(a), self.offered_at(a, b))
                                                       for a, b in zip(e[:-1], e[1:])]))
            self.shared[key] = Outages(outs, downs, cuts, frames)
        return self.shared[key]

    def plan(self, design: Design, base: DecodedDesigns | None = None) -> list[WindowPlan]:
        """Every window of ``design`` through the scenario (module docstring); ``base``: its kernel arrays
        when the caller has them (a population's decoding), else built from the record. A `compact`
        planner gives a `CompactPlan` (dse.runtime.compact): a never-acting policy's from its shape's
        segments, a quiet one's (nothing to do while all is up) from them in every window that finds the
        runtime at rest (`at_rest`), the policy loop's own segments in the others."""
        sc = self.scenario
        n = design.rows * design.cols
        shape = self.outages(design)
        downs, cuts, frames = shape.downs, shape.cuts, shape.frames
        self.cache, self.balance = {}, {}
        self.base = base if base is not None else \
            design_arrays([design], self.tables, self.ev.space.max_slots, self.max_copies)
        self.home = Placement(self.base.slots[0], self.base.ncopy[0])
        if self.compact and self.never_acts:        # the search's: its shape's segments, built once
            return static_plan(self, design)
        mig = MigrationModel(self.tables, self.package_spec, design, sc.migration.bandwidth_scale, self.shared)
        run = RunState(self.home, sc.failures.spares)       # placements are replaced, never changed
        self.memo = {}
        roles = self.roles(design)
        out: list = []
        starts_down = static_template(self, design)[1].start_down if self.compact else None
        resting = 0
        for w, (t0, length, now0, pieces) in enumerate(frames):
            if w < resting:             # taken by `rest`
                continue
            down = self.chips_down(now0, design)
            run.settle(t0)
            if run.replaced:
                for slot in [s for s in run.replaced if s not in down]:      # repaired: its spare returns
                    run.replaced.discard(slot)
                    run.spares += 1
            if self.compact and self.at_rest(run, t0, down):
                resting = self.rest(run, w, out, starts_down)
                continue
            move = NO_MOVE
            if t0 >= run.move_end and not self.never_acts:      # a policy acts once the last move has landed
                move = self.act(run, design, w, t0, frozenset(down - run.replaced), mig, roles)
            plan = WindowPlan(t0, length, move, 1.0)
            if t0 < run.move_end < t0 + length:
                edges = sorted({*cuts(w, t0, length), run.move_end})
                pieces = [(a, b, downs(a), self.offered_at(a, b)) for a, b in zip(edges[:-1], edges[1:])]
            pkey = self.perm_keys[w]
            for a, b, now, offered in pieces:
                run.settle(a)
                failed = self.chips_down(now, design)
                if run.replaced:
                    failed = frozenset(failed - run.replaced)
                lost = max(0.0, min(b, run.move_end) - max(a, run.move_start)) * (1.0 - run.keep)
                key = SegmentKey(run.version, pkey, failed, now.links, now.stacks)
                if key not in self.cache:
                    self.cache[key] = self.effective(run.version, run.serving, failed, w, now)
                eff, selected = self.cache[key]
                plan.segments.append(Segment(w, b - a, b - a - lost, eff, selected, offered, failed, now, key))
            plan.imbalance = self.imbalance(run, plan.segments[-1], w, n) if self.detail else float("nan")
            out.append(plan)
        return rest_plan(self, design, out) if self.compact else out

    def at_rest(self, run: "RunState", t0: float, down: frozenset[int]) -> bool:
        """Whether a window starting at ``t0`` finds the runtime at rest: no move in flight, every chiplet
        down stood in for by a spare, and a quiet policy (base.Policy.quiet) with nothing to do. Such a
        window serves the design's own mapping with the spares' slots up, as the never-acting policy's
        template (dse.runtime.compact.rest_plan) has it, and the policy would decide nothing."""
        return (self.quiet is not None and t0 >= run.move_end and not run.pending_revive
                and run.serving is run.placement and down <= run.replaced and self.quiet(run.placement, self.home))

    def rest(self, run: "RunState", w: int, out: list, starts_down: list) -> int:
        """Windows ``w`` on while the runtime stays at rest (`at_rest` at ``w``): each appends to ``out`` the
        chiplets spares stand in for, a repaired one's spare returning at a window's start as in `plan`;
        the rest ends at the first window that starts with a chiplet down and no spare in for it (returned)."""
        run.rerolled = set()            # as `act` does when the policy is quiet
        out.append(frozenset(run.replaced))
        for k in range(w + 1, len(starts_down)):
            if not starts_down[k] <= run.replaced:
                return k
            back = run.replaced - starts_down[k]
            run.replaced -= back
            run.spares += len(back)
            out.append(frozenset(run.replaced))
        return len(starts_down)

    def imbalance(self, run: "RunState", seg: Segment, w: int, n: int) -> float:
        """The imbalance the window's last segment shows (dse.runtime.mapping.imbalance), once per key."""
        if seg.key not in self.balance:
            serving = live_copies(run.serving, seg.failed)
            self.balance[seg.key] = placement_imbalance(serving, self.groups, self.perms[w], n)
        return self.balance[seg.key]

    def act(self, run: "RunState", design: Design, w: int, t0: float, failed: frozenset[int],
            mig: MigrationModel, roles: dict[int, float]) -> MoveCost:
        """Ask the policy at window ``w``'s start; price and start the move it decides (a re-roled
        reconfigurable chiplet adds its reconfiguration time to the move)."""
        if not failed and self.quiet is not None and self.quiet(run.placement, self.home):
            run.rerolled = set()        # nothing down, nothing to undo: the policy would decide nothing
            return NO_MOVE
        free = {s: t for s, t in roles.items() if s not in failed and s not in run.rerolled}
        state = PolicyState(w, t0, design, run.placement, self.home, failed, self.perms[max(w - 1, 0)],
                            self.groups, run.spares, self.remap, self.max_copies, run.last_change, self.memo,
                            free)
        decision = self.policy.decide(state)
        if not failed:
            run.rerolled = set()
        if decision is None:
            return NO_MOVE
        new = decision.placement
        links = self.outages(design).downs(t0).links        # moves take the routes around links down
        move = self.contended(run, design, w, t0, mig.priced_change(run.placement, new, decision.revive, failed,
                                                                    links), failed, mig) \
            if self.scenario.migration.mode == "background" \
            else mig.change_cost(run.placement, new, decision.revive, failed, links)
        if decision.rerole:
            run.rerolled |= set(decision.rerole.values())
            move = move._replace(time_s=move.time_s + max(roles[r] for r in decision.rerole.values()))
        run.start(t0, move.time_s, self.scenario.migration, new, set(decision.revive), move.throughput)
        if move.moves:
            run.last_change = t0
        return move

    def contended(self, run: "RunState", design: Design, w: int, t0: float, moves: Priced,
                  failed: frozenset[int], mig: MigrationModel) -> MoveCost:
        """A background move priced against the serving mapping's link traffic (dse.runtime.contention)."""
        now = self.outages(design).downs(t0)
        key = SegmentKey(run.version, self.perm_keys[w], failed, now.links, now.stacks)
        if key not in self.cache:
            self.cache[key] = self.effective(run.version, run.serving, failed, w, now)
        seg = self.cache[key][0]
        if seg is None or not moves.cost.moves:
            return moves.cost
        one = self.base._replace(slots=seg.slots[None], ncopy=seg.ncopy[None], stacks=seg.stacks[None])
        traffic = serving_traffic(self.ev, self.package_spec, one)
        if now.links:           # the moves' routes around the links down (serving's rates stay the intact routes')
            traffic = traffic._replace(routes=mig.routes_after(now.links))
        return contended(mig, moves, traffic, self.scenario.migration.share)


@dataclass
class RunState:
    """The runtime's mapping as it changes: ``placement`` the policy's latest, ``serving`` the one serving
    (the old one while a background move is in flight), spares in use (``replaced``: slots a spare stands
    in for) and left, and the move in flight (``move_start``..``move_end``; ``stall``: serving stops)."""

    placement: Placement
    spares: int
    serving: Placement | None = None
    replaced: set = field(default_factory=set)
    pending_revive: set = field(default_factory=set)
    move_start: float = 0.0
    move_end: float = 0.0
    stall: bool = False
    keep: float = 1.0               # serving's throughput share while the move runs (0: a stall)
    last_change: float = -np.inf
    version: int = 0                # counts the mappings that have served
    rerolled: set = field(default_factory=set)      # reconfigurable slots that took a failed chiplet's role

    def __post_init__(self):
        self.serving = self.serving or self.placement

    def start(self, t0: float, time_s: float, spec, placement: Placement, revive: set, keep: float = 1.0) -> None:
        """A move of ``time_s`` starts at ``t0``: a stall (serving stops until it lands; the new mapping
        serves after it) or in the background (the old mapping serves, at ``keep`` of its throughput, until
        it lands: dse.runtime.contention)."""
        self.stall = spec.mode == "stall"
        self.keep = 0.0 if self.stall else keep
        self.move_start = t0
        self.move_end = t0 + time_s
        self.placement = placement
        self.spares -= len(revive)
        self.pending_revive = revive
        if self.stall:
            self.settle(self.move_end)

    def settle(self, t: float) -> None:
        """At ``t``: a landed move's mapping serves and its spares stand in."""
        if t >= self.move_end:
            if self.serving is not self.placement:
                self.version += 1
            self.serving = self.placement
            self.replaced |= self.pending_revive
            self.pending_revive = set()
