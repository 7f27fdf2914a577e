"""Issue 52, ninth round: the results' placements read from the decoded arrays, not from the records'
dicts (dse.model.records.placement_arrays, the evaluators' `designs_and_placements`), the records' dicts
copied from one sized for every unit, and the digest's sorted names hashed once per name order; every
result the same as the per-record reading kept here as the reference."""
from __future__ import annotations

import hashlib

import numpy as np

import dse
from dse.model.contract import DecodedDesigns
from dse.model.records import design_records, placement_arrays
from dse.results import placement_store
from dse.results.placement_store import flat_placement, placement_cell, placement_digest
from dse.results.result import build_result


class _Tables:
    def __init__(self, units: int):
        self.unit_names = [f"u{u}" for u in range(units)]
        self.kind_names = ["a", "b"]


def _same_flat(got, want) -> bool:
    return all(g.dtype == w.dtype == np.dtype("<i4") and np.array_equal(g, w) for g, w in zip(got, want))


def test_placement_arrays_equal_the_records_flat_placements():
    rng = np.random.default_rng(5)
    for copies, side in [(1, 2), (2, 8), (3, 5)]:
        P, U, S = 5, 30, side * side
        ncopy = rng.integers(0, copies + 1, size=(P, U))             # 0: a unit without copies
        slots = np.where(np.arange(copies) < ncopy[..., None], rng.integers(0, S, (P, U, copies)),
                         rng.integers(-1, S, (P, U, copies)))        # past ncopy: -1 or stale slots
        d = DecodedDesigns(np.full(P, side), np.full(P, side), rng.integers(0, 2, (P, S)),
                           rng.integers(0, 3, (P, S)), np.zeros(P, np.int64), slots, ncopy, np.zeros(P, np.int64))
        records = design_records(d, _Tables(U), "ucie-advanced", "many-to-many", "mesh")
        for r, flat in zip(records, placement_arrays(d)):
            assert _same_flat(flat, flat_placement(r.placement))
            assert list(r.placement) == [f"u{u}" for u in range(U)]
        assert _same_flat(placement_arrays(d, [3])[0], flat_placement(records[3].placement))


def test_evaluators_give_the_placements_of_their_records_and_the_same_result():
    p = dse.prepare(dse.load_study("tests/data/moe_small.yaml"))
    space = p.evaluator.space
    X = np.random.default_rng(0).integers(space.lower, space.upper + 1, size=(12, space.n_var))
    designs, placements = p.evaluator.designs_and_placements(X)
    assert placements is not None and len(placements) == len(designs) == 12
    assert [d.to_dict() for d in designs] == [d.to_dict() for d in p.evaluator.designs(X)]
    for d, flat in zip(designs, placements):
        assert _same_flat(flat, flat_placement(d.placement))
    metrics = p.evaluator(X, with_faults=False)
    args = (p.study, X, metrics, np.zeros(12, np.int64), np.array([0, 4, 7]), designs, p.tables.kind_names)
    old, new = build_result(*args), build_result(*args, flats=placements)
    assert old.evaluations.equals(new.evaluations) and old.pareto.equals(new.pareto)
    assert old.placements.equals(new.placements)


def _digest_before(placement: dict) -> str:
    """`placement_digest` as it was: one SHA-256 over the sorted names, the counts and the slots."""
    names = sorted(placement)
    counts = np.array([len(placement[u]) for u in names], "<i4")
    slots = np.array([s for u in names for s in placement[u]], "<i4")
    blob = "".join(u + "\n" for u in names).encode()
    return hashlib.sha256(blob + counts.tobytes() + slots.tobytes()).hexdigest()[:16]


def test_digest_and_cell_equal_the_one_pass_forms():
    rng = np.random.default_rng(7)
    names = [f"L{i // 40}.e{i % 40}" for i in range(4_000)]     # past the cell's cap
    for order in (names, list(rng.permutation(names))):
        for _ in range(3):
            placement = {u: [int(s) for s in rng.integers(0, 64, int(rng.integers(0, 3)))] for u in order}
            assert placement_digest(placement) == _digest_before(placement)
            assert placement_digest(placement, flat_placement(placement)) == _digest_before(placement)
            assert hasattr(placement_store._SORTED[tuple(placement)][1], "copy")     # a hash, not the names
            cell = placement_cell(placement, 64, "f")
            assert cell.endswith("whole in f") and _digest_before(placement) in cell
    small = {"a": [1], "b": [2, 3]}
    assert placement_cell(small, 4, "f") == "a=1;b=2+3"
    long_names = {("x" * 40) + str(i): [0] for i in range(800)}        # the names alone pass the cell's cap
    assert placement_cell(long_names, 4, "f").startswith("800 units in 800 copies")


def _ops_chunk_by_chunk(builder):
    """`workloads.builder.Builder.ops` as it was: each chunk's numbers filled into rows, then concatenated."""
    from workloads.builder import _rows
    from workloads.workload import OP_COLUMNS
    data = {c: np.concatenate([np.asarray(_rows(ch[c])) for ch in builder.chunks]) for c in OP_COLUMNS}
    return data


def test_workload_rows_equal_the_chunk_by_chunk_columns(monkeypatch):
    """The operator rows of a study's workload (numbers kept whole per chunk, repeated at once) are the
    rows filled chunk by chunk, to the bit: a sharded per-layer MoE and the quickstart's model."""
    from dse.model.tables import build_workload
    from workloads import builder as module
    seen = []
    ops = module.Builder.ops

    def spy(self):
        frame = ops(self)
        seen.append((frame, _ops_chunk_by_chunk(self), self))
        return frame
    monkeypatch.setattr(module.Builder, "ops", spy)
    for path in ("tests/data/tiny_moe.yaml", "studies/quickstart.yaml"):
        build_workload(dse.load_study(path))
    assert len(seen) >= 2
    for frame, want, b in seen:
        assert any(isinstance(ch["flops"], module._Filled) for ch in b.chunks)
        for c, column in want.items():
            got = frame[c].to_numpy()
            if got.dtype == object:
                assert got.tolist() == column.tolist()
            else:
                assert got.dtype == np.float64 and np.array_equal(got.view(np.int64), column.astype(float).view(np.int64))


def test_package_decoding_equals_the_full_decoding():
    """The packages decoded without their units (dse.model.evaluator.Evaluator.decode_packages: a system's
    package arrays, the package figures) are the full decoding's, and so are the package figures."""
    from dse.model.package_figures import package_arrays
    for path in ("tests/data/moe_small.yaml", "studies/quickstart.yaml"):
        p = dse.prepare(dse.load_study(path))
        space = p.evaluator.space
        X = np.random.default_rng(1).integers(space.lower, space.upper + 1, size=(40, space.n_var))
        full, packages = p.evaluator.decode(X), p.evaluator.decode_packages(X)
        for field in ("rows", "cols", "kind", "stacks", "ddr"):
            assert np.array_equal(getattr(full, field), getattr(packages, field))
        assert not hasattr(packages, "slots") and full.slots.shape[1] == space.n_units
        package = p.evaluator.package_evaluators()[0]
        want = package_arrays(package.kernel, full.chiplets, full.kind, full.stacks, full.ddr)
        assert np.array_equal(package.package_figures(X), want, equal_nan=True)


def test_whole_duplicates_equal_pymoos_distances():
    """dse.search.variables.WholeDuplicates marks the rows pymoo's default elimination marks (kept as the
    reference), within a population and against another, for whole-number genes; other genes go to pymoo's."""
    from pymoo.core.duplicate import DefaultDuplicateElimination
    from pymoo.core.population import Population
    from dse.search.variables import WholeDuplicates
    rng = np.random.default_rng(11)
    for n_var, high in [(3, 2), (40, 3), (3_000, 60)]:
        X = rng.integers(0, high, (30, n_var))
        X[rng.integers(0, 30, 8)] = X[rng.integers(0, 30, 8)]          # some equal rows
        Y = np.vstack([X[rng.integers(0, 30, 5)], rng.integers(0, high, (6, n_var))])
        pop, other = Population.new(X=X), Population.new(X=Y)
        for args in [(), (other,)]:
            want = DefaultDuplicateElimination().do(pop, *args, return_indices=True)
            got = WholeDuplicates().do(pop, *args, return_indices=True)
            assert want[1] == got[1] and want[2] == got[2]
    floats = Population.new(X=np.array([[0.5, 1.0], [0.5, 1.0 + 1e-17], [0.25, 1.0]]))
    assert WholeDuplicates().do(floats, return_indices=True)[2] == [1]
