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
