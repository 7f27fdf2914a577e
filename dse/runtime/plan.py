"""The runtime loop of one design through a scenario, before anything is costed: the builder of its
segment table (dse.runtime.segments). Its events, in time order: a window's start (the policy sees the
state, dse.runtime.policies, and its move is priced, dse.runtime.migration), a failure or a repair
(chiplets, links, HBM stacks: dse.runtime.failures), and a move landing; each cuts a segment, with the
mapping it serves, the share of expert selections it can serve, and the time it serves (less migration
stalls).

A failure takes effect at its time; policies act at window starts on what the last window observed,
once the last move has landed (a move stalls serving, or streams in the background while the old
mapping serves: dse.runtime.scenario.MigrationSpec). Until one acts, a failed chiplet's units with a
surviving copy are served by it, and units with none go unserved (dse.runtime.derive). A repaired
chiplet comes back with its weights (the repair time includes reloading them); a spare returns to the
pool when the chiplet it stood in for is repaired. A failed link is priced in dse.runtime.costing.

`Planner` holds what a package variant's designs share, as values built once (the scenario per window,
each package shape's outages and template, the experts, scratch); `DesignRun` one design's run, every
value it needs given when it is made. For the search (``compact``), a policy that never acts takes its
shape's template segments, and a quiet one (base.Policy.quiet) takes them in every window that finds the
runtime at rest (no move in flight, every chiplet down stood in for by a spare, nothing to do), running
its loop only in the others."""
from __future__ import annotations

import numpy as np

from ..errors import StudyError
from ..model.contract import DecodedDesigns
from ..study.space import Design
from .contention import contended, serving_traffic
from .derive import DesignMappings, own_all
from .imbalance import placement_imbalance
from .mapping import ExpertGroups, Relabel, SegmentKey, live_copies
from .migration import NO_MOVE, MigrationModel, MoveCost, Priced
from .policies import PolicyState
from .policies.static import StaticPolicy
from .popularity import Popularity
from .run_state import RunState
from .scenario import Scenario
from .segments import SegmentBuilder, SegmentTable
from .shape import ScenarioView, Shape, chips_down, shape_key


class Planner:
    """What the designs of one package variant share through a scenario under a policy (module
    docstring): ``plan(design)`` gives a design's `SegmentTable`."""

    def __init__(self, package_evaluator, tables, package_spec, max_copies: int, scenario: Scenario, policy,
                 phase: str = "prefill", reconfig_kinds: dict[str, float] | None = None, strict: bool = True,
                 detail: bool = True, compact: bool = False):
        self.ev, self.tables, self.scenario, self.policy = package_evaluator, tables, scenario, policy
        self.package_spec, self.max_copies = package_spec, max_copies
        self.reconfig_kinds = reconfig_kinds or {}      # chiplet kind -> its reconfiguration time, s
        self.strict = strict            # components a scenario names and a design lacks: an error (or none)
        self.detail = detail            # each window's imbalance (the search's totals do without it)
        self.compact = compact          # the template's segments where the runtime rests (module docstring)
        self.never_acts = isinstance(policy, StaticPolicy)
        self.quiet = policy.quiet       # (placement, home) -> nothing to do while all are up (base.Policy)
        self.groups = ExpertGroups.from_tables(tables)
        self.relabel = Relabel(self.groups)
        self.is_expert = np.zeros(tables.n_units, bool)
        self.is_expert[self.relabel.src] = True
        self.view = ScenarioView(scenario, self.groups, phase)
        self.shapes: dict[tuple, Shape] = {}            # shape_key -> its outages and template
        self.routes: dict = {}                          # per mesh shape: hops, routes (dse.runtime.migration)
        self.workspaces: dict[int, tuple] = {}          # the evaluator's re-mapping scratch, per copy width
        self.q_units: dict[Popularity, np.ndarray] = {}
        self.rests: dict[tuple, tuple] = {}             # a policy that never acts: `resting`, per shape

    def plan(self, design: Design, base: DecodedDesigns | None = None) -> tuple[SegmentTable, DecodedDesigns]:
        """``design``'s segment table and kernel arrays (``base``: given when the caller has them, else
        built from the record: dse.model.records)."""
        return self.plan_all([design], [base])[0]

    def plan_all(self, designs: list[Design], bases: list) -> list[tuple[SegmentTable, DecodedDesigns]]:
        """`plan` of each design of ``designs`` (``bases``: their kernel arrays or None): each one's run, then
        the designs' own mappings of the windows at rest derived for all at once (dse.runtime.derive.
        own_all), then each table."""
        runs = [DesignRun(self, d, DesignMappings(self, d, b)) for d, b in zip(designs, bases)]
        shells = [run.loop() for run in runs]
        owns = own_all([run.maps for run in runs], [[at for _, at in pending] for _, pending in shells])
        return [(run.finish(*shell, *own), run.maps.base) for run, shell, own in zip(runs, shells, owns)]

    def shape(self, design: Design) -> Shape:
        key = shape_key(self.scenario, design)
        if key not in self.shapes:
            self.shapes[key] = Shape(self.view, self.package_spec, design, self.strict)
        return self.shapes[key]

    def resting(self, shape: Shape, design: Design) -> tuple[SegmentTable, list]:
        """The segment table of a policy that never acts for the designs of ``shape`` (its template's rows,
        dse.runtime.segments.SegmentBuilder.rest) before their own mappings are derived, and the keys to
        derive them for (the builder's ``pending``): the same for every design of the shape and DDR or
        none (what the template is kept by), built once; its arrays are shared, read only."""
        key = (shape_key(self.scenario, design), bool(design.ddr_channels))
        if key not in self.rests:
            t = shape.template(self.view, design)
            out = SegmentBuilder(self.view.starts, self.view.lengths)
            out.rest(t, 0, len(t.window), frozenset(), range(len(t.start_down)), NO_MOVE)
            self.rests[key] = (out.build(), list(out.pending))
        return self.rests[key]

    def q_unit(self, perm: Popularity) -> np.ndarray:
        """Each unit's expert selections per token at popularity ``perm`` (0: not an expert)."""
        if perm not in self.q_units:
            q = np.zeros(self.tables.n_units)
            q[self.relabel.src] = np.concatenate([g[p] for g, p in zip(self.groups.q, perm)]) if perm else np.zeros(0)
            self.q_units[perm] = q
        return self.q_units[perm]

    def workspace(self, width: int):
        """The evaluator's scratch arrays for re-mapping at a copy width, reused (one thread)."""
        if width not in self.workspaces:
            self.workspaces[width] = self.ev.workspace(width)
        return self.workspaces[width]


class DesignRun:
    """One design's run through the scenario (module docstring): its planner, its mappings
    (dse.runtime.derive.DesignMappings), its shape and the table it builds."""

    def __init__(self, planner: Planner, design: Design, mappings: DesignMappings):
        self.p, self.design, self.maps = planner, design, mappings
        self.shape = planner.shape(design)
        self.out: SegmentBuilder | None = None          # made by `loop` (a policy that never acts needs none)
        self.segments: dict[SegmentKey, tuple] = {}     # key -> (its mapping, share served)
        self.balance: dict[SegmentKey, float] = {}      # key (its version: the mapping serving) -> imbalance
        self.seen_at: dict[tuple, float] = {}           # (placement count, popularity) -> imbalance seen

    def down(self, now) -> frozenset[int]:
        return chips_down(now, self.design.ddr_channels, self.design.hbm_stacks)

    def finish(self, table: SegmentTable | None, pending: list, own: list, share: list) -> SegmentTable:
        """The table of `loop` (``table``; None: the builder's) with the design's own mappings ``own`` and
        the shares they serve ``share`` of the ``pending`` keys filled in."""
        mappings, selected = (self.out.mappings, self.out.selected) if table is None else \
            (list(table.mappings), table.selected.copy())
        for (k, _), m, sel in zip(pending, own, share):
            mappings[k], selected[k] = m, sel
        return self.out.build() if table is None else table._replace(mappings=mappings, selected=selected)

    def loop(self) -> tuple[SegmentTable | None, list]:
        """The run, the own mappings of windows at rest not yet derived: the shape's table for a policy that
        never acts (the search's), else None (``out`` has it), and the keys pending (index, (tail, w, down))."""
        p = self.p
        if p.compact and p.never_acts:          # the search's: its shape's segments, its own mappings
            return p.resting(self.shape, self.design)
        out = self.out = SegmentBuilder(p.view.starts, p.view.lengths)
        sc, view, shape = p.scenario, p.view, self.shape
        mig = MigrationModel(p.tables, p.package_spec, self.design, sc.migration.bandwidth_scale, p.routes)
        run = RunState(self.maps.home, sc.failures.spares)      # placements are replaced, never changed
        roles = self.roles()
        resting = 0
        for w, (t0, length, now0, pieces) in enumerate(shape.frames):
            if w < resting:             # taken by `rest`
                continue
            down = self.down(now0)
            run.settle(t0)
            if run.replaced:
                for slot in [s for s in run.replaced if s not in down]:      # repaired: its spare returns
                    run.replaced.discard(slot)
                    run.spares += 1
            if p.compact and self.at_rest(run, t0, down):
                resting = self.rest(run, w)
                continue
            move = NO_MOVE
            if t0 >= run.move_end and not p.never_acts:         # a policy acts once the last move has landed
                move = self.act(run, w, t0, frozenset(down - run.replaced), mig, roles)
            if t0 < run.move_end < t0 + length:                 # the move lands within the window
                edges = sorted({*shape.cuts(w, t0, length), run.move_end})
                pieces = [(a, b, shape.downs(a), view.offered_at(a, b)) for a, b in zip(edges[:-1], edges[1:])]
            perm = view.perms[w]
            for a, b, now, offered in pieces:
                run.settle(a)
                failed = self.down(now)
                if run.replaced:
                    failed = frozenset(failed - run.replaced)
                lost = max(0.0, min(b, run.move_end) - max(a, run.move_start)) * (1.0 - run.keep)
                key = SegmentKey(run.version, perm, failed, now.links, now.stacks)
                index = out.index(key)          # a key seen before keeps its mapping: none derived
                if index is None:
                    index = out.key(key, *self.segment(key, run, w, now))
                out.segment(w, b - a, b - a - lost, offered, index, now)
            out.window(w, move, self.imbalance(run, key, w) if p.detail else np.nan)
        return None, out.pending

    def segment(self, key: SegmentKey, run: RunState, w: int, now) -> tuple:
        """The mapping a segment of ``key`` costs and the share it serves, once per key."""
        if key not in self.segments:
            self.segments[key] = self.maps.effective(run.version, run.serving, key.failed, key.popularity, now)
        return self.segments[key]

    def roles(self) -> dict[int, float]:
        """Reconfigurable chiplet slots (the scenario's, and chiplets of a reconfigurable kind) -> the time
        they take to take another role, s."""
        f, design = self.p.scenario.failures, self.design
        n = design.rows * design.cols
        bad = [s for s in f.reconfigurable if s >= n]
        if bad and self.p.strict:
            raise StudyError(f"chiplet {bad[0]} is not in the design (slots 0..{n - 1})", key="failures.reconfigurable")
        return {s: f.reconfigure_s + self.p.reconfig_kinds.get(k, 0.0) for s, k in enumerate(design.chiplets)
                if s in f.reconfigurable or k in self.p.reconfig_kinds}

    def at_rest(self, run: RunState, t0: float, down: frozenset[int]) -> bool:
        """Whether a window starting at ``t0`` finds the runtime at rest: no move in flight, every chiplet
        down stood in for by a spare, and a quiet policy (base.Policy.quiet) with nothing to do. Such a
        window serves the design's own mapping with the spares' slots up, as the shape's template has it,
        and the policy would decide nothing."""
        p = self.p
        return (p.quiet is not None and t0 >= run.move_end and not run.pending_revive
                and run.serving is run.placement and down <= run.replaced and p.quiet(run.placement, self.maps.home))

    def rest(self, run: RunState, w: int) -> int:
        """Windows ``w`` on while the runtime stays at rest (`at_rest` at ``w``), as the template's
        segments with the chiplets spares stand in for up, a repaired one's spare returning at a window's
        start as in `table`; the rest ends at the first window that starts with a chiplet down and no
        spare in for it (returned)."""
        t = self.shape.template(self.p.view, self.design)
        bounds = np.searchsorted(t.window, np.arange(len(t.start_down) + 1))
        run.rerolled = set()            # as `act` does when the policy is quiet
        spared, first, end = frozenset(run.replaced), w, len(t.start_down)
        for k in range(w + 1, len(t.start_down)):
            if not t.start_down[k] <= run.replaced:
                end = k
                break
            back = run.replaced - t.start_down[k]
            run.replaced -= back
            run.spares += len(back)
            if frozenset(run.replaced) != spared:
                self.out.rest(t, bounds[first], bounds[k], spared, range(first, k), NO_MOVE)
                spared, first = frozenset(run.replaced), k
        self.out.rest(t, bounds[first], bounds[end], spared, range(first, end), NO_MOVE)
        return end

    def seen(self, run: RunState, w: int) -> float:
        """The imbalance the counters show at window ``w``'s start for the placement in force (observed
        over the last window), once per placement and popularity."""
        perm = self.p.view.perms[max(w - 1, 0)]
        if (run.placements, perm) not in self.seen_at:
            self.seen_at[run.placements, perm] = placement_imbalance(run.placement, self.p.groups, perm,
                                                                     self.design.rows * self.design.cols)
        return self.seen_at[run.placements, perm]

    def imbalance(self, run: RunState, key: SegmentKey, w: int) -> float:
        """The imbalance the window's last segment (``key``) shows (dse.runtime.imbalance), once per key."""
        if key not in self.balance:
            serving = live_copies(run.serving, key.failed)
            self.balance[key] = placement_imbalance(serving, self.p.groups, self.p.view.perms[w],
                                                    self.design.rows * self.design.cols)
        return self.balance[key]

    def act(self, run: RunState, w: int, t0: float, failed: frozenset[int], mig: MigrationModel,
            roles: dict[int, float]) -> MoveCost:
        """Ask the policy at window ``w``'s start; price and start the move it decides (a re-roled
        reconfigurable chiplet adds its reconfiguration time to the move)."""
        p, home = self.p, self.maps.home
        if not failed and p.quiet is not None and p.quiet(run.placement, home):
            run.rerolled = set()        # nothing down, nothing to undo: the policy would decide nothing
            return NO_MOVE
        if p.policy.waits(w, t0, run.last_change):
            if not failed:
                run.rerolled = set()
            return NO_MOVE
        if not failed and p.policy.calm is not None and p.policy.calm(self.seen(run, w), t0, run.last_change):
            run.rerolled = set()        # nothing down and the counters calm: the policy would decide nothing
            return NO_MOVE
        free = {s: t for s, t in roles.items() if s not in failed and s not in run.rerolled}
        state = PolicyState(w, t0, self.design, run.placement, home, failed, p.view.perms[max(w - 1, 0)],
                            p.groups, run.spares, self.maps.remap, p.max_copies, run.last_change, free)
        decision = p.policy.decide(state)
        if not failed:
            run.rerolled = set()
        if decision is None:
            return NO_MOVE
        new = decision.placement
        links = self.shape.downs(t0).links          # moves take the routes around links down
        if p.scenario.migration.mode == "background":
            move = self.contended(run, w, t0, mig.priced_change(run.placement, new, decision.revive, failed, links),
                                  failed, mig)
        else:
            move = mig.change_cost(run.placement, new, decision.revive, failed, links)
        if decision.rerole:
            run.rerolled |= set(decision.rerole.values())
            move = move._replace(time_s=move.time_s + max(roles[r] for r in decision.rerole.values()))
        run.start(t0, move.time_s, p.scenario.migration, new, set(decision.revive), move.throughput)
        if move.moves:
            run.last_change = t0
        return move

    def contended(self, run: RunState, w: int, t0: float, moves: Priced, failed: frozenset[int],
                  mig: MigrationModel) -> MoveCost:
        """A background move priced against the serving mapping's link traffic (dse.runtime.contention)."""
        now = self.shape.downs(t0)
        key = SegmentKey(run.version, self.p.view.perms[w], failed, now.links, now.stacks)
        seg = self.segment(key, run, w, now)[0]
        if seg is None or not moves.cost.moves:
            return moves.cost
        one = self.maps.base._replace(slots=seg.slots[None], ncopy=seg.ncopy[None], stacks=seg.stacks[None])
        traffic = serving_traffic(self.p.ev, self.p.package_spec, one)
        if now.links:           # the moves' routes around the links down (serving's rates stay the intact routes')
            traffic = traffic._replace(routes=mig.routes_after(now.links))
        return contended(mig, moves, traffic, self.p.scenario.migration.share)
