"""Issue 48, part 4 ("Cost, decided"), lever (b): a mapping that differs from the one costed before it in a
few experts is costed incrementally (dse.model.perf_model.base_passes, ``incremental``: only the stages
whose units, HBM fractions or hand-off ends differ are costed again), and the result equals a full
costing. Seeded random mappings of the runtime tests' study (tests/data/timeline_study.yaml: a 2 x 3
package whose weights spill to DDR, so a move changes other units' HBM fractions too)."""
from __future__ import annotations

import numpy as np

from dse.model.contract import DecodedDesigns
from dse.runtime.costing import distinct, near


def moved(rng, slots: np.ndarray, ncopy: np.ndarray, n: int, experts: np.ndarray, k: int):
    """``slots`` / ``ncopy`` with ``k`` random experts changed: a copy moved to another chiplet, a copy
    added or one dropped, or two experts of the mapping swapped (a relabelling)."""
    slots, ncopy = slots.copy(), ncopy.copy()
    for u in rng.choice(experts, size=k, replace=False):
        c = ncopy[u]
        free = [x for x in range(n) if x not in slots[u, :c]]
        what = rng.integers(4)
        if what == 0 and free:
            slots[u, rng.integers(c)] = rng.choice(free)
        elif what == 1 and free and c < slots.shape[1]:
            slots[u, c] = rng.choice(free)
            ncopy[u] = c + 1
        elif what == 2 and c > 1:
            slots[u, c - 1] = -1
            ncopy[u] = c - 1
        else:
            v = rng.choice(experts)
            slots[[u, v]], ncopy[[u, v]] = slots[[v, u]], ncopy[[v, u]]
    return slots, ncopy


def test_incremental_costing_equals_a_full_costing(timeline_prepared):
    """Chains of mappings, each a few experts from the one before (and now and then another package:
    another design, or one HBM stack less), costed incrementally and in full: equal to 1e-9 (in fact bit
    for bit: a stage whose inputs are equal gives equal figures). Fails on the code before lever (b):
    the kernel took no ``incremental``."""
    ev = timeline_prepared.package_evaluator
    space = timeline_prepared.space
    rng = np.random.default_rng(48)
    X = rng.integers(space.lower, np.asarray(space.upper) + 1, size=(6, space.n_var))
    X[:1] = space.seeds[:1]
    base = ev.decode(X)
    experts = np.flatnonzero(ev.kernel.unit_is_expert)
    rows = []
    for p in range(len(X)):
        n = int(base.rows[p] * base.cols[p])
        slots, ncopy, stacks = base.slots[p], base.ncopy[p], base.stacks[p]
        for step in range(8):
            rows.append((p, slots, ncopy, stacks))
            slots, ncopy = moved(rng, slots, ncopy, n, experts, int(rng.integers(1, 4)))
            if step == 4 and stacks[:n].max() > 0:          # one stack less: another package, costed in full
                stacks = stacks.copy()
                stacks[int(np.argmax(stacks[:n]))] -= 1
    pick = np.array([r[0] for r in rows])
    d = DecodedDesigns(base.rows[pick], base.cols[pick], base.kind[pick], np.stack([r[3] for r in rows]),
                       base.ddr[pick], np.stack([r[1] for r in rows]), np.stack([r[2] for r in rows]),
                       base.unplaced[pick])
    full = ev.decoded_metrics(d, with_faults=False, memory_path=False)
    fast = ev.decoded_metrics(d, with_faults=False, memory_path=False, incremental=True)
    assert np.isfinite(full[:, 0]).all() and len(np.unique(full[:, 0])) > len(X)      # the mappings differ
    np.testing.assert_allclose(fast, full, rtol=1e-9, atol=0.0, equal_nan=True)
    assert np.array_equal(fast, full, equal_nan=True)
    again = ev.decoded_metrics(d.take(np.arange(len(rows))[::-1]), with_faults=False, memory_path=False,
                               incremental=True)
    assert np.array_equal(again[::-1], full, equal_nan=True)        # in any order


def test_distinct_orders_a_failures_mapping_after_its_intact_one():
    """The table of distinct mappings goes to the kernel by design, version, popularity, then what is
    down: a failure's re-mapping right after the intact mapping it differs from in a few experts."""
    from types import SimpleNamespace

    from dse.runtime.mapping import SegmentKey, SegmentMapping
    from dse.runtime.popularity import Popularity

    p0, p1 = Popularity([np.array([0, 1])]), Popularity([np.array([1, 0])])
    keys = [SegmentKey(0, p0, frozenset(), frozenset(), frozenset()),
            SegmentKey(0, p1, frozenset(), frozenset(), frozenset()),
            SegmentKey(0, p1, frozenset({5}), frozenset(), frozenset()),
            SegmentKey(0, p0, frozenset({5}), frozenset(), frozenset())]
    maps = [SegmentMapping(np.full((2, 1), k), np.ones(2, np.int64), np.ones(6, np.int64), frozenset())
            for k in range(4)]
    base = DecodedDesigns(*(np.zeros((1, 2), np.int64) for _ in range(8)))
    planned = [SimpleNamespace(table=SimpleNamespace(keys=keys), base=base)]
    items = [(0, k, m) for k, m in enumerate(maps)]
    keep, index = distinct(items, planned)
    order = [k for _, k, _ in keep]
    assert sorted(order, key=lambda k: near((0, k, None), planned)) == order
    assert order.index(3) == order.index(0) + 1 and order.index(2) == order.index(1) + 1
    assert [keep[j][1] for j in index] == [0, 1, 2, 3]             # each item finds its own row


def test_a_relabelling_is_one_gather_equal_to_the_scatter():
    """A popularity relabels a mapping as one gather of its rows (`Relabel.source`, once per popularity),
    and every design's own mapping at many popularities at once (`DesignMappings.relabelled_all`): equal,
    bit for bit, to the definition (unit ``units[g][perm[i]]`` takes what ``units[g][i]`` holds). Fails on
    the code before: `Relabel` had no ``source``."""
    from dse.runtime.mapping import ExpertGroups, Relabel
    from dse.runtime.popularity import Popularity

    groups = ExpertGroups(names=[["L.e0", "L.e1", "L.e2"], ["M.e0", "M.e1"]],
                          q=[np.array([0.5, 0.3, 0.2]), np.array([0.6, 0.4])], weight_bytes=[np.ones(3), np.ones(2)],
                          units=[np.arange(1, 4), np.arange(5, 7)])
    relabel = Relabel(groups)
    rng = np.random.default_rng(4)
    slots, ncopy = rng.integers(0, 9, size=(8, 3)), rng.integers(1, 4, size=8)
    for perm in (Popularity([np.array([2, 0, 1]), np.array([1, 0])]), groups.identity()):
        want_s, want_n = slots.copy(), ncopy.copy()
        dst = np.concatenate([u[p] for u, p in zip(groups.units, perm)])
        want_s[dst], want_n[dst] = slots[groups.flat_units], ncopy[groups.flat_units]
        got_s, got_n = relabel(slots, ncopy, perm)
        assert np.array_equal(got_s, want_s) and np.array_equal(got_n, want_n)
        assert relabel.source(perm, 8) is relabel.source(Popularity(list(perm)), 8)       # once per value


def test_move_pricing_arrays_are_shared_by_value(timeline_prepared, timeline_design):
    """What moves are priced with (`MigrationModel.kernel_arrays`) depends on the design's mesh, HBM stacks
    and DDR only: two designs equal in those, sharing a memo, share the arrays (computed once), and they
    equal a lone model's; a design with other HBM stacks gets its own. Fails on the code before: each
    model computed its own."""
    import dataclasses

    from dse.runtime.migration import MigrationModel

    p, design = timeline_prepared, timeline_design
    memo: dict = {}
    other = dataclasses.replace(design, chiplets=list(reversed(design.chiplets)))
    a = MigrationModel(p.tables, p.study.hardware.package, design, 1.0, memo).kernel_arrays()
    b = MigrationModel(p.tables, p.study.hardware.package, other, 1.0, memo).kernel_arrays()
    alone = MigrationModel(p.tables, p.study.hardware.package, design).kernel_arrays()
    assert all(x is y for x, y in zip(a, b))
    for x, y in zip(a, alone):
        assert np.array_equal(x, y)
    stacks = list(design.hbm_stacks)
    stacks[int(np.argmax(stacks))] -= 1
    fewer = dataclasses.replace(design, hbm_stacks=stacks)
    c = MigrationModel(p.tables, p.study.hardware.package, fewer, 1.0, memo).kernel_arrays()
    assert c[1] is not a[1] and not np.array_equal(c[1], a[1])


def test_a_calm_threshold_decides_alike_without_being_asked(timeline_prepared, timeline_design):
    """``threshold`` with nothing down and its counters within the bound (`calm`, the imbalance once per
    placement and popularity) is not asked: its segment table equals, field for field, the one built
    asking it every window (`calm` off), under a random walk with a failure and its repair, while it is
    asked fewer times. Fails on the code before: the planner asked it every window."""
    from dse.runtime.plan import Planner
    from dse.runtime.policies.threshold import ThresholdPolicy
    from dse.runtime.scenario import scenario_from_dict

    class Counted(ThresholdPolicy):
        asked = 0

        def decide(self, state):
            type(self).asked += 1
            return super().decide(state)

    class Plain(Counted):
        calm = None
        asked = 0

    p, design = timeline_prepared, timeline_design
    sc = scenario_from_dict({"horizon_s": 1800, "window_s": 60, "popularity": {"drift": "random_walk",
                             "rate_per_s": 0.01, "seed": 3},
                             "failures": {"events": [{"t_s": 610, "chiplet": 1, "repair_s": 300}]}})
    tables = []
    for policy in (Counted(bound=1.1), Plain(bound=1.1)):
        planner = Planner(p.package_evaluator, p.tables, p.study.hardware.package, p.study.mapping.max_replicas,
                          sc, policy, p.study.workload.phase, compact=True, detail=False)
        tables.append(planner.plan(design)[0])
    fast, plain = tables
    assert Counted.asked < Plain.asked and sum(m.moves for m in plain.moves) > 0
    assert fast.keys == plain.keys
    for name in ("selected", "window", "length_s", "serve_s", "offered_tps", "key", "down", "move_bytes",
                 "move_energy_j"):
        assert np.array_equal(getattr(fast, name), getattr(plain, name), equal_nan=True), name
    assert fast.moves == plain.moves


def test_a_failure_remapping_runs_the_memory_step_only(timeline_prepared):
    """`Evaluator.remapped_arrays` re-maps a failed chiplet's units from the intact design's HBM placement
    alone (dse.model.hbm_placement.place_design), not from a whole intact pass: the workspace's per-stage
    figures stay as they were (poisoned here), and the re-mapping equals the one after a full pass. Fails
    on the code before: the re-mapping ran the intact pass (dse.model.perf_model.base_pass) first."""
    ev = timeline_prepared.package_evaluator
    d = ev.decode(timeline_prepared.space.seeds[:1])
    full = ev.remapped_arrays(d, [1])                       # a fresh workspace
    w = ev.workspace(d.slots.shape[2])
    w.ct[:] = np.nan
    w.stage_t[:] = np.nan
    ok, slots, ncopy = ev.remapped_arrays(d, [1], w)
    assert np.isnan(w.ct).all() and np.isnan(w.stage_t).all()
    assert ok == full[0] and np.array_equal(slots, full[1]) and np.array_equal(ncopy, full[2])
    assert not np.array_equal(slots, d.slots[0])            # chiplet 1 held something


def test_a_static_table_and_its_costing_equal_the_per_key_derivation(timeline_prepared):
    """The search's `static` table (`Planner.resting`: the shape's template rows built once, each design's
    own mappings derived per failed set with every popularity at once, `DesignMappings.effective_all`)
    equals, field for field, the one the builder makes with each key's mapping derived alone
    (`effective`); and the costing of several designs at once (`cost_segments`: the mappings stacked
    once, `distinct_rows`) equals each design's costed alone, bit for bit. A rotating hot set with a
    failure and its repair. Fails on the code before: the planner had no ``resting``."""
    from dse.runtime.costing import Planned, cost_segments
    from dse.runtime.derive import DesignMappings
    from dse.runtime.migration import NO_MOVE
    from dse.runtime.plan import Planner
    from dse.runtime.policies.static import StaticPolicy
    from dse.runtime.scenario import scenario_from_dict
    from dse.runtime.segments import SegmentBuilder

    p = timeline_prepared
    sc = scenario_from_dict({"horizon_s": 1800, "window_s": 60, "popularity": {"drift": "rotate", "rate_per_s": 0.01},
                             "failures": {"events": [{"t_s": 610, "chiplet": 1, "repair_s": 300}]}})
    rng = np.random.default_rng(7)
    X = rng.integers(p.space.lower, np.asarray(p.space.upper) + 1, size=(4, p.space.n_var))
    X[:1] = p.space.seeds[:1]
    designs = p.evaluator.designs(X)
    planner = Planner(p.package_evaluator, p.tables, p.study.hardware.package, p.study.mapping.max_replicas, sc,
                      StaticPolicy(), p.study.workload.phase, compact=True, detail=False)
    planned, alone = [], []
    for design in designs:
        table, base = planner.plan(design)
        maps = DesignMappings(planner, design, base)
        t = planner.shape(design).template(planner.view, design)
        out = SegmentBuilder(sc.starts(), sc.lengths())
        out.rest(t, 0, len(t.window), frozenset(), range(len(t.start_down)), NO_MOVE)
        for k, (tail, _, now) in out.pending:
            out.mappings[k], out.selected[k] = maps.effective(0, maps.home, tail[1], tail[0], now)
        want = out.build()
        assert table.keys == want.keys and any(k.failed for k in want.keys)
        assert table.window is planner.resting(planner.shape(design), design)[0].window     # once per shape
        failed = next(k for k in want.keys if k.failed)
        perms = [k.popularity for k in want.keys]
        many, shares = maps.effective_all(0, maps.home, failed.failed, perms, planner.shape(design).downs(610.0))
        for perm, m, share in zip(perms, many, shares):
            one, alone_share = maps.effective(0, maps.home, failed.failed, perm, planner.shape(design).downs(610.0))
            assert share == alone_share and (m is None) == (one is None)
            assert m is None or (np.array_equal(m.slots, one.slots) and np.array_equal(m.ncopy, one.ncopy))
        for name in ("selected", "window", "length_s", "serve_s", "offered_tps", "key", "down", "t_s", "window_s",
                     "move_bytes", "move_energy_j"):
            assert np.array_equal(getattr(table, name), getattr(want, name), equal_nan=True), name
        for m, w in zip(table.mappings, want.mappings):
            assert (m is None) == (w is None)
            if m is not None:
                assert np.array_equal(m.slots, w.slots) and np.array_equal(m.ncopy, w.ncopy)
                assert np.array_equal(m.stacks, w.stacks) and m.links == w.links
        planned.append(Planned(table, 0, base))
        alone += cost_segments([Planned(want, 0, base)], {0: planner})
    together = cost_segments(planned, {0: planner})
    for a, b in zip(together, alone):
        for name in ("latency_s", "latency_p99_s", "energy_j_per_token"):
            assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
        assert np.isfinite(a.latency_s).any()


def test_designs_own_mappings_derived_together_equal_each_alone(timeline_prepared):
    """The search's designs of a package variant derive their own mappings together (dse.runtime.derive.
    own_all: the failure re-mappings in one compiled call, `remap_all.remapped_designs`, and the
    relabellings to one set of popularities in one gather): each design's mappings and shares equal,
    field for field, those derived key by key for it alone (`DesignMappings.effective`, one re-mapping
    call per design), and each re-mapping equals `Evaluator.remapped_arrays`'. A rotating hot set with a
    failure and its repair. Fails on the code before: there was no ``own_all`` or ``remap_all``."""
    from dse.runtime.derive import DesignMappings, own_all
    from dse.runtime.plan import Planner
    from dse.runtime.policies.static import StaticPolicy
    from dse.runtime.remap_all import Request, remap_many
    from dse.runtime.scenario import scenario_from_dict

    p = timeline_prepared
    sc = scenario_from_dict({"horizon_s": 1800, "window_s": 60, "popularity": {"drift": "rotate", "rate_per_s": 0.01},
                             "failures": {"events": [{"t_s": 610, "chiplet": 1, "repair_s": 300}]}})
    rng = np.random.default_rng(11)
    X = rng.integers(p.space.lower, np.asarray(p.space.upper) + 1, size=(5, p.space.n_var))
    X[:1] = p.space.seeds[:1]
    designs = p.evaluator.designs(X)
    planner = Planner(p.package_evaluator, p.tables, p.study.hardware.package, p.study.mapping.max_replicas, sc,
                      StaticPolicy(), p.study.workload.phase, compact=True, detail=False)
    maps = [DesignMappings(planner, d) for d in designs]
    items = [[at for _, at in planner.resting(planner.shape(d), d)[1]] for d in designs]
    together = own_all(maps, items)
    requests = []
    for d, its, (mappings, shares) in zip(designs, items, together):
        alone = DesignMappings(planner, d)
        for (tail, _, now), m, share in zip(its, mappings, shares):
            one, one_share = alone.effective(0, alone.home, tail[1], tail[0], now)
            assert share == one_share and (m is None) == (one is None)
            if m is not None:
                assert np.array_equal(m.slots, one.slots) and np.array_equal(m.ncopy, one.ncopy)
                assert np.array_equal(m.stacks, one.stacks) and m.links == one.links
        if alone.holds(0, alone.home, frozenset({1})):
            b = alone.base
            requests.append(Request(b, b.slots[0], b.ncopy[0], b.stacks[0], frozenset({1})))
    assert len(requests) > 1
    ev = p.package_evaluator
    for q, got in zip(requests, remap_many(ev, requests, planner.workspace(requests[0].slots.shape[1]))):
        want = ev.remapped_arrays(q.base, [1])
        assert got[0] == want[0] and np.array_equal(got[1], want[1]) and np.array_equal(got[2], want[2])
