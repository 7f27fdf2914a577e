"""The runtime loop of one design through a scenario, before anything is costed: window by window, the
policy sees the state (dse.runtime.policies), its moves are priced (dse.runtime.migration), and each
window is cut where the failed chiplets change into segments, each with the mapping it serves, the
share of expert selections it can serve, and the time it serves (less migration stalls).

A failure takes effect at its time; policies act at window starts on what the last window observed,
once the last move has landed (a move stalls serving, or streams in the background while the old
mapping serves: dse.runtime.scenario.MigrationSpec).
Until one acts, a failed chiplet's units with a surviving copy are served by it, and units with none go
unserved: their selections are lost (a non-expert unit lost: nothing is served). The step of a
segment is the package evaluator's re-mapped design (`Evaluator.remapped`), which still costs the lost
units' work on a survivor: an upper bound on the degraded step. A repaired chiplet comes back with its
weights (the repair time includes reloading them); a spare returns to the pool when the chiplet it
stood in for is repaired."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..study.space import Design
from .failures import change_times, failed_at, outages
from .mapping import ExpertGroups, copy_arrays, imbalance, moved_copies, perm_key, relabelled, with_placement
from .migration import NO_MOVE, MigrationModel, MoveCost
from .policies import PolicyState
from .popularity import window_perms
from .scenario import Scenario


@dataclass
class Segment:
    """Part of a window with one mapping and one failed set: ``design`` the design to cost at the study's
    popularity (None: nothing survives), ``selected`` the share of expert selections it serves, ``serve_s``
    the serving time (the segment's length less migration stalls), ``offered_tps`` offered tokens/s,
    ``failed`` the chiplets down and not stood in for by a spare."""

    window: int
    length_s: float
    serve_s: float
    design: Design | None
    selected: float
    offered_tps: float | None
    failed: frozenset[int]
    down: frozenset[int]            # chiplets down, those a spare stands in for included
    key: tuple = ()                 # (mapping version, popularity, failed): equal keys, equal designs


@dataclass
class WindowPlan:
    t_s: float
    length_s: float
    move: MoveCost
    imbalance: float
    segments: list[Segment] = field(default_factory=list)


def lost_selections(placement: dict[str, list[int]], failed: frozenset[int], groups: ExpertGroups,
                    perm: list[np.ndarray], experts: set[str]) -> float:
    """Share of expert selections that land on units with no live copy (1 if a non-expert unit has none)."""
    orphans = {u for u, s in placement.items() if s and all(x in failed for x in s)}
    if orphans - experts:
        return 1.0
    lost = total = 0.0
    for names, q, p in zip(groups.names, groups.q, perm):
        qa = q[p]
        total += qa.sum()
        lost += sum(qa[i] for i, n in enumerate(names) if n in orphans)
    return lost / total if total else 0.0


class Planner:
    """Runs one design through a scenario under a policy (module docstring)."""

    def __init__(self, package_evaluator, tables, package_spec, max_copies: int, scenario: Scenario, policy):
        self.ev, self.tables, self.scenario, self.policy = package_evaluator, tables, scenario, policy
        self.package_spec, self.max_copies = package_spec, max_copies
        self.groups = ExpertGroups.from_tables(tables)
        self.experts = {n for g in self.groups.names for n in g}
        sc = scenario
        self.perms = window_perms(sc.popularity, [len(n) for n in self.groups.names], sc.starts(), sc.lengths())
        self.perm_keys = [perm_key(p) for p in self.perms]
        self.cache: dict = {}
        self.copies: dict = {}

    def offered(self, t: float) -> float | None:
        load = self.scenario.load
        if load.tokens_per_s is None:
            return None
        if load.kind == "diurnal":
            return load.tokens_per_s * (1 + load.amplitude * np.sin(2 * np.pi * t / load.period_s))
        return load.tokens_per_s

    def effective(self, design: Design, placement, failed: frozenset[int], w: int) -> tuple[Design | None, float]:
        """The design a segment costs (relabelled to window ``w``'s popularity) and its served selections."""
        if not any(s in failed for slots in placement.values() for s in slots):
            return relabelled(with_placement(design, placement), self.groups, self.perms[w]), 1.0
        lost = lost_selections(placement, failed, self.groups, self.perms[w], self.experts)
        remapped = self.ev.remapped(with_placement(design, placement), sorted(failed))
        if remapped is None:
            return None, 0.0
        return relabelled(remapped, self.groups, self.perms[w]), 1.0 - lost

    def plan(self, design: Design) -> list[WindowPlan]:
        """Every window of ``design`` through the scenario (module docstring)."""
        sc = self.scenario
        n = design.rows * design.cols
        outs = outages(sc.failures, n, sc.horizon_s)
        mig = MigrationModel(self.tables, self.package_spec, design, sc.migration.bandwidth_scale)
        run = RunState({u: list(s) for u, s in design.placement.items()}, sc.failures.spares)
        self.cache, self.copies = {}, {}
        out = []
        for w, (t0, length) in enumerate(zip(sc.starts(), sc.lengths())):
            down = failed_at(outs, t0)
            run.settle(t0)
            for slot in [s for s in run.replaced if s not in down]:      # repaired: its spare returns
                run.replaced.discard(slot)
                run.spares += 1
            move = NO_MOVE
            if t0 >= run.move_end:          # a policy acts once the last move has landed
                move = self.act(run, design, w, t0, frozenset(down - run.replaced), mig)
            plan = WindowPlan(t0, length, move, 1.0)
            edges = sorted({t0, t0 + length, *change_times(outs, t0, t0 + length)}
                           | ({run.move_end} if t0 < run.move_end < t0 + length else set()))
            for a, b in zip(edges[:-1], edges[1:]):
                run.settle(a)
                down_now = failed_at(outs, a)
                failed = frozenset(down_now - run.replaced)
                lost = max(0.0, min(b, run.move_end) - max(a, run.move_start)) if run.stall else 0.0
                key = (run.version, self.perm_keys[w], failed)
                if key not in self.cache:
                    self.cache[key] = self.effective(design, run.serving, failed, w)
                eff, selected = self.cache[key]
                plan.segments.append(Segment(w, b - a, b - a - lost, eff, selected, self.offered(0.5 * (a + b)),
                                             failed, down_now, key))
            live = plan.segments[-1].failed
            if live:
                plan.imbalance = imbalance({u: [x for x in s if x not in live] for u, s in run.serving.items()},
                                           self.groups, self.perms[w], n)
            else:
                if run.version not in self.copies:
                    self.copies = {run.version: copy_arrays(run.serving, self.groups)}
                plan.imbalance = imbalance(run.serving, self.groups, self.perms[w], n, self.copies[run.version])
            out.append(plan)
        return out

    def act(self, run: "RunState", design: Design, w: int, t0: float, failed: frozenset[int],
            mig: MigrationModel) -> MoveCost:
        """Ask the policy at window ``w``'s start; price and start the move it decides."""
        state = PolicyState(w, t0, design, run.placement, failed, self.perms[max(w - 1, 0)], self.groups,
                            run.spares, self.ev, self.max_copies, run.last_change)
        decision = self.policy.decide(state)
        if decision is None:
            return NO_MOVE
        moves = moved_copies(run.placement, decision.placement)
        for r in decision.revive:
            moves += [(u, r, [x for x in s if x != r]) for u, s in decision.placement.items() if r in s]
        move = mig.cost(moves, failed)
        run.start(t0, move.time_s, self.scenario.migration, {u: list(s) for u, s in decision.placement.items()},
                  set(decision.revive))
        if move.moves:
            run.last_change = t0
        return move


@dataclass
class RunState:
    """The runtime's mapping as it changes: ``placement`` the policy's latest, ``serving`` the one serving
    (the old one while a background move is in flight), spares in use (``replaced``: slots a spare stands
    in for) and left, and the move in flight (``move_start``..``move_end``; ``stall``: serving stops)."""

    placement: dict[str, list[int]]
    spares: int
    serving: dict[str, list[int]] | None = None
    replaced: set = field(default_factory=set)
    pending_revive: set = field(default_factory=set)
    move_start: float = 0.0
    move_end: float = 0.0
    stall: bool = False
    last_change: float = -np.inf
    version: int = 0                # counts the mappings that have served

    def __post_init__(self):
        self.serving = self.serving or self.placement

    def start(self, t0: float, time_s: float, spec, placement: dict, revive: set) -> None:
        """A move of ``time_s`` at full bandwidth starts at ``t0``: a stall (serving stops until it lands;
        the new mapping serves after it) or in the background at ``spec.share`` of the bandwidth (the old
        mapping serves until it lands)."""
        self.stall = spec.mode == "stall"
        self.move_start = t0
        self.move_end = t0 + (time_s if self.stall else time_s / spec.share)
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
