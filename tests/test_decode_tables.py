"""Decoding by a table of residues (issue 52, ninth round) gives the arrays of decoding by `modulo` per gene
and per copy (kept here as the reference), and the packages decoded alone are those decoded with the units."""
import numpy as np
import pytest

import dse
from dse.model.placement import decode_packages, decode_population, modulo


@pytest.fixture(scope="module")
def prepared():
    return dse.prepare(dse.load_study("tests/data/moe_small.yaml"))


def old_decode(X, o_rows, o_cols, o_kind, o_hbm, o_ddr, o_place, o_copies, max_slots, n_units, max_copies,
               unit_is_expert, exclusive_experts, kind_hbm_phy):
    """decode_population as it was (modulo per gene and per copy), in Python."""
    P = X.shape[0]
    rows, cols, ddr = X[:, o_rows].copy(), X[:, o_cols].copy(), X[:, o_ddr].copy()
    kind = X[:, o_kind:o_kind + max_slots].copy()
    stacks = np.zeros((P, max_slots), np.int64)
    slots = np.full((P, n_units, max_copies), -1, np.int64)
    ncopy = np.ones((P, n_units), np.int64)
    unplaced = np.zeros(P, np.int64)
    for p in range(P):
        n = int(rows[p] * cols[p])
        takes = [s for s in range(n) if kind_hbm_phy[kind[p, s]]]
        h = X[p, o_hbm]
        for j, s in enumerate(takes):
            stacks[p, s] = h // len(takes) + (1 if j < h % len(takes) else 0)
        taken = np.zeros(max_slots, bool)
        for u in range(n_units):
            first = X[p, o_place + u] % n
            c = min(X[p, o_copies + u], n, max_copies)
            if exclusive_experts and unit_is_expert[u]:
                c = 1
                probe = 0
                while probe < n and taken[(first + probe) % n]:
                    probe += 1
                if probe == n:
                    unplaced[p] += 1
                else:
                    first = (first + probe) % n
                    taken[first] = True
            ncopy[p, u] = c
            for r in range(c):
                slots[p, u, r] = (first + r * max(n // c, 1)) % n
    return rows, cols, kind, stacks, ddr, slots, ncopy, unplaced


@pytest.mark.parametrize("exclusive", [False, True])
def test_decoding_by_residue_table_is_the_modulo_decoding(prepared, exclusive):
    ev, space = prepared.package_evaluator, prepared.space
    rng = np.random.default_rng(5)
    X = rng.integers(space.lower, space.upper + 1, size=(60, space.n_var))
    sl = space.slices
    X[:20, sl["place"]] = rng.integers(-40, 90, size=(20, sl["place"].stop - sl["place"].start))   # past 2 x slots
    X[20:30, sl["copies"]] = rng.integers(0, 9, size=(10, sl["copies"].stop - sl["copies"].start))
    args = (X, sl["rows"].start, sl["cols"].start, sl["kind"].start, sl["hbm"].start, sl["ddr"].start,
            sl["place"].start, sl["copies"].start, space.max_slots, space.n_units, ev.max_copies,
            ev.kernel.unit_is_expert, exclusive, ev.tables.kind_hbm_phy)
    new, old = decode_population(*args), old_decode(*args)
    for a, b in zip(new, old):
        assert a.dtype == np.int64 and np.array_equal(a, b)
    packages = decode_packages(*args[:6], space.max_slots, ev.tables.kind_hbm_phy)
    for a, b in zip(packages, new[:5]):
        assert np.array_equal(a, b)
    assert all(np.array_equal(a, b) for a, b in zip(ev.decode_packages(X), ev.decode(X)[:5]))
    system = prepared.evaluator.decoded_package_arrays(X)
    d = ev.decode(X)
    assert np.array_equal(system.chiplets, d.chiplets) and np.array_equal(system.stacks, d.stacks)
    assert modulo(-3, 4) == 1
