"""Issue 48, part 6: the quiet policies' per-design Python (docs/runtime.md). The costing stacks the
distinct mappings once, in the kernel's order, and hands them to the kernel as they are; the design's own
mapping's copies on a failed chiplet and its orphans are found for every design at once; move pricing's
mesh terms are shared by value. Each equals the path it replaces, bit for bit."""
from __future__ import annotations

import numpy as np

from dse.model.contract import DecodedDesigns


def rows_and_planned(n_designs: int = 3):
    """Items (design, key, `SegmentMapping`) of ``n_designs`` designs of one package, with equal rows
    inside a design and across two designs, and a stand-in of their planned tables."""
    from types import SimpleNamespace

    from dse.runtime.mapping import SegmentKey, SegmentMapping
    from dse.runtime.popularity import Popularity

    rng = np.random.default_rng(3)
    pops = [Popularity([rng.permutation(4)]) for _ in range(4)]
    keys = [SegmentKey(0, p, f, frozenset(), frozenset()) for p in pops for f in (frozenset(), frozenset({2}))]
    base = DecodedDesigns(*(np.zeros((1, 6), np.int64) for _ in range(8)))
    planned = [SimpleNamespace(table=SimpleNamespace(keys=keys), base=base) for _ in range(n_designs)]
    pool = [SegmentMapping(rng.integers(-1, 6, size=(7, 2)), rng.integers(0, 3, size=7), rng.integers(0, 4, size=6),
                           frozenset()) for _ in range(5)]
    items = []
    for i in range(n_designs):
        for k in range(len(keys)):
            m = pool[(k * 3 + (i % 2)) % len(pool)]          # designs 0 and 2 alike; rows repeat
            items.append((i, k, SegmentMapping(m.slots.copy(), m.ncopy.copy(), m.stacks.copy(), m.links)))
    return items, planned


def test_distinct_rows_find_equal_rows_exactly_and_keep_the_kernel_order():
    """Each item finds a row with its own arrays; equal arrays share one row, distinct ones never do
    (whatever the fingerprints); the rows go in `near`'s order. Fails on the code before: there was no
    ``ordered``."""
    from dse.runtime.costing import distinct, near, ordered

    items, planned = rows_and_planned()
    keep, index = distinct(items, planned)
    for (i, k, m), j in zip(items, index):
        r = keep[j][2]
        assert np.array_equal(r.slots, m.slots) and np.array_equal(r.ncopy, m.ncopy)
        assert np.array_equal(r.stacks, m.stacks)
    for a in range(len(keep)):
        for b in range(a):
            assert not (np.array_equal(keep[a][2].slots, keep[b][2].slots) and
                        np.array_equal(keep[a][2].ncopy, keep[b][2].ncopy))
    assert len(keep) < len(items)
    order = [near(items[j], planned) for j in ordered(items, planned)]
    assert order == sorted(order)


def test_the_kernel_takes_the_stacked_rows_as_they_are():
    """With every row distinct, the kernel's arrays are the stacked arrays themselves (no gather), equal
    to the rows stacked one by one. Fails on the code before: the rows were gathered again (a copy)."""
    from dse.runtime.costing import distinct_rows, population, stacked

    items, planned = rows_and_planned(1)
    items = [items[0], items[1], items[2]]
    arrays = stacked(items)
    first, index = distinct_rows(items, planned, arrays)
    assert first == index == [0, 1, 2]
    d = population(items, planned, arrays, first)
    assert np.shares_memory(d.slots, arrays.slots) and np.shares_memory(d.ncopy, arrays.ncopy)
    assert np.array_equal(d.slots, np.stack([m.slots for _, _, m in items]))
    assert np.array_equal(d.stacks, np.stack([m.stacks for _, _, m in items]))


def test_lost_copies_found_together_equal_each_alone(timeline_prepared):
    """`lost_all`: whether each design's own mapping has a copy on the failed chiplets, and its orphans,
    for five designs at once, equal `DesignMappings.holds` and `orphans` of each alone. Fails on the code
    before: there was no ``lost_all``."""
    from dse.runtime.derive import DesignMappings, lost_all, orphans
    from dse.runtime.failures import Down
    from dse.runtime.plan import Planner
    from dse.runtime.policies.static import StaticPolicy
    from dse.runtime.scenario import scenario_from_dict

    p = timeline_prepared
    sc = scenario_from_dict({"horizon_s": 600, "window_s": 60})
    rng = np.random.default_rng(5)
    X = rng.integers(p.space.lower, np.asarray(p.space.upper) + 1, size=(5, p.space.n_var))
    designs = p.evaluator.designs(X)
    planner = Planner(p.package_evaluator, p.tables, p.study.hardware.package, p.study.mapping.max_replicas, sc,
                      StaticPolicy(), p.study.workload.phase, compact=True, detail=False)
    maps = [DesignMappings(planner, d) for d in designs]
    sets = [frozenset({1}), frozenset({0, 3}), frozenset(range(6))]
    lost_all(maps, [(i, f, Down(frozenset(), frozenset(), ()), []) for i in range(len(maps)) for f in sets])
    seen = 0
    for m, d in zip(maps, designs):
        alone = DesignMappings(planner, d)
        for f in sets:
            assert m.memo["holds", 0, f] == alone.holds(0, alone.home, f)
            if m.memo["holds", 0, f]:
                want = orphans(alone.home.slots, alone.home.ncopy, f, planner.is_expert)
                got = m.memo["orphans", 0, f]
                assert (got is None) == (want is None)
                seen += got is not None and bool(got.any())
                if want is not None:
                    assert np.array_equal(got, want)
    assert seen


def test_move_pricing_mesh_terms_are_shared_and_equal_the_formula(timeline_prepared, timeline_design):
    """`MigrationModel.tables_of` takes the mesh's terms (hops, the links' bandwidth and the hops' energy)
    from the shared memo, once per mesh: two designs with other HBM stacks share them, and each one's
    tables equal the formula computed whole. Fails on the code before: there was no ``mesh_terms``."""
    import dataclasses

    from dse.runtime.migration import MigrationModel

    p, design = timeline_prepared, timeline_design
    memo: dict = {}
    stacks = list(design.hbm_stacks)
    stacks[int(np.argmax(stacks))] -= 1
    for d in (design, dataclasses.replace(design, hbm_stacks=stacks)):
        mig = MigrationModel(p.tables, p.study.hardware.package, d, 0.5, memo)
        t, e, hops = mig.tables_of()
        n = len(d.hbm_stacks)
        st = np.asarray(d.hbm_stacks)
        ddr_bw, ddr_e = mig.ddr()
        hbm = st > 0 if p.tables.hbm is not None else np.zeros(n, bool)
        bw = np.where(hbm, st * p.tables.hbm_bw_Bps, ddr_bw)
        energy = np.where(hbm, p.tables.hbm.energy_j_per_byte if p.tables.hbm else 0.0, ddr_e)
        h = np.hstack([hops.T, np.ones((n, 1), np.int64)])
        link = np.where(h > 0, mig.link.bandwidth_Bps, np.inf)
        want_t = 1.0 / (np.minimum(np.minimum(np.append(bw, ddr_bw)[None, :], bw[:, None]), link) * 0.5)
        want_e = np.append(energy, ddr_e)[None, :] + h * mig.link.hop_energy_j_per_byte + energy[:, None]
        assert np.array_equal(t, want_t) and np.array_equal(e, want_e)
    assert sum(k[0] == "mesh-terms" for k in memo) == 1
