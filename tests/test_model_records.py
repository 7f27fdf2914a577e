"""dse.model.records: the records of kernel arrays, built on arrays (one list per distinct placement)."""
from __future__ import annotations

import numpy as np

import dse
from dse.model.contract import DecodedDesigns
from dse.model.records import design_records


class _Tables:
    def __init__(self, units: int):
        self.unit_names = [f"u{u}" for u in range(units)]
        self.kind_names = ["a", "b"]


def test_records_equal_a_per_unit_reading_of_the_arrays():
    rng = np.random.default_rng(3)
    for copies, side in [(1, 2), (2, 8), (3, 5), (8, 16)]:         # (8, 16): codes past int64
        P, U, S = 6, 40, side * side
        ncopy = rng.integers(1, copies + 1, size=(P, U))
        slots = np.where(np.arange(copies) < ncopy[..., None], rng.integers(0, S, (P, U, copies)),
                         rng.integers(-1, S, (P, U, copies)))        # past ncopy: -1 or stale slots
        d = DecodedDesigns(np.full(P, side), np.full(P, side), rng.integers(0, 2, (P, S)),
                           rng.integers(0, 3, (P, S)), np.zeros(P, np.int64), slots, ncopy, np.zeros(P, np.int64))
        records = design_records(d, _Tables(U), "ucie-advanced", "many-to-many", "mesh")
        for p, r in enumerate(records):
            want = {f"u{u}": [int(s) for s in slots[p, u, : ncopy[p, u]]] for u in range(U)}
            assert r.placement == want
            assert all(type(s) is int for v in r.placement.values() for s in v)


def test_records_of_a_replicated_study_round_trip():
    p = dse.prepare(dse.load_study("tests/data/moe_small.yaml"))
    space = p.evaluator.space
    X = np.random.default_rng(0).integers(space.lower, space.upper + 1, size=(16, space.n_var))
    designs = p.evaluator.designs(X)
    assert any(len(s) > 1 for d in designs for s in d.placement.values())
    again = p.evaluator.designs(X)
    assert [d.to_dict() for d in designs] == [d.to_dict() for d in again]


def _arrays_unit_by_unit(designs, tables, max_slots, max_copies):
    """`design_arrays` as it was before it read the placements on arrays (issue 52, sixth round)."""
    P = len(designs)
    kind = np.zeros((P, max_slots), np.int64)
    stacks = np.zeros((P, max_slots), np.int64)
    copies = max([max_copies] + [len(s) for d in designs for s in d.placement.values()])
    slots = np.full((P, tables.n_units, copies), -1, np.int64)
    ncopy = np.ones((P, tables.n_units), np.int64)
    for p, d in enumerate(designs):
        kind[p, : len(d.chiplets)] = [tables.kind_names.index(k) for k in d.chiplets]
        stacks[p, : len(d.hbm_stacks)] = d.hbm_stacks
        for u, name in enumerate(tables.unit_names):
            where = d.placement[name]
            slots[p, u, : len(where)] = where
            ncopy[p, u] = len(where)
    return kind, stacks, slots, ncopy


def test_arrays_of_records_equal_a_unit_by_unit_reading():
    """design_arrays on arrays: the same kinds, stacks, slots (-1 past a unit's copies) and copy counts as
    writing each unit's slots in turn, for records of a replicated study and for hand-made placements with
    up to 3 copies and unit orders of their own."""
    from dse.model.records import design_arrays
    p = dse.prepare(dse.load_study("tests/data/moe_small.yaml"))
    ev, tables = p.package_evaluator, p.tables
    space = ev.space
    X = np.random.default_rng(1).integers(space.lower, space.upper + 1, size=(12, space.n_var))
    designs = ev.designs(X)
    rng = np.random.default_rng(2)
    for d in designs[:4]:               # hand-made: shuffled unit order, 0-3 copies
        names = list(d.placement)
        rng.shuffle(names)
        d.placement = {u: [int(s) for s in rng.integers(0, d.rows * d.cols, rng.integers(1, 4))] for u in names}
    for group in (designs, designs[:1], designs[4:]):
        got = design_arrays(group, tables, space.max_slots, ev.max_copies)
        kind, stacks, slots, ncopy = _arrays_unit_by_unit(group, tables, space.max_slots, ev.max_copies)
        assert np.array_equal(got.kind, kind) and np.array_equal(got.stacks, stacks)
        assert got.slots.shape == slots.shape and np.array_equal(got.slots, slots)
        assert np.array_equal(got.ncopy, ncopy)


def _slot_lists_by_sorting(slots, ncopy):
    """`dse.model.records._slot_lists` as it was before its table of codes (issue 52, eighth round)."""
    copies = slots.shape[1]
    kept = np.where(np.arange(copies)[None, :] < ncopy[:, None], slots, -1) + 1
    base = int(kept.max(initial=0)) + 1
    if copies * np.log2(base) < 62:
        distinct, of_unit = np.unique(kept @ (base ** np.arange(copies - 1, -1, -1, dtype=np.int64)),
                                      return_inverse=True)
    else:
        distinct, of_unit = np.unique(kept, axis=0, return_inverse=True)
    first = np.empty(len(distinct), np.int64)
    of_unit = of_unit.ravel()
    first[of_unit[::-1]] = np.arange(len(of_unit) - 1, -1, -1)
    return [s[:c] for s, c in zip(slots[first].tolist(), ncopy[first].tolist())], of_unit


def test_slot_lists_from_a_table_of_codes_equal_numpys_sort():
    """`_slot_lists` finds a package's distinct placements in a table indexed by code (one or two copies on
    64 slots) or by NumPy's sort (more copies): the same lists in the same order and the same index per
    unit as sorting gave; units on the same slots share one list in the records."""
    from dse.model.records import _slot_lists
    rng = np.random.default_rng(7)
    for copies, slots_n, units in [(1, 64, 15_000), (2, 64, 15_000), (2, 64, 300), (3, 36, 2_000), (8, 256, 50)]:
        ncopy = rng.integers(1, copies + 1, size=units)
        slots = np.where(np.arange(copies) < ncopy[:, None], rng.integers(0, slots_n, (units, copies)), -1)
        lists, of_unit = _slot_lists(slots, ncopy)
        want_lists, want_of = _slot_lists_by_sorting(slots, ncopy)
        assert lists.dtype == object and list(lists) == want_lists and np.array_equal(of_unit, want_of)
    d = DecodedDesigns(np.full(1, 8), np.full(1, 8), np.zeros((1, 64), np.int64), np.zeros((1, 64), np.int64),
                       np.zeros(1, np.int64), slots[None, :, :2], np.minimum(ncopy, 2)[None], np.zeros(1, np.int64))
    placement = design_records(d, _Tables(len(ncopy)), "ucie-advanced", "many-to-many", "mesh")[0].placement
    by_slots = {}
    for u, s in placement.items():
        assert by_slots.setdefault(tuple(s), s) is s
