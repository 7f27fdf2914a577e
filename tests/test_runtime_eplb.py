"""dse.runtime.policies.eplb on arrays (issue 36's cost per design): the assignment step against scipy's
linear_sum_assignment, a hand-worked EPLB packing, and the imbalance kernel against NumPy."""
from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from dse.runtime.imbalance import imbalance_arrays, pairwise_sum
from dse.runtime.mapping import ExpertGroups, Placement, placement_arrays
from dse.runtime.policies.assignment import assign_max
from dse.runtime.policies.eplb import rebalance, rebalance_placement


def test_assignment_is_scipys_ties_included():
    """Small integer gains (many ties): the same columns as scipy.optimize.linear_sum_assignment
    (Crouse 2016's method, the solver the Python rebalance called)."""
    rng = np.random.default_rng(3)
    for _ in range(400):
        n = int(rng.integers(1, 10))
        gain = rng.integers(0, int(rng.integers(1, 4)), size=(n, n))
        assert (assign_max(gain) == linear_sum_assignment(gain, maximize=True)[1]).all()
    # scipy's documented example (minimising [[4, 1, 3], [2, 0, 5], [3, 2, 2]]: columns 1, 0, 2, cost 5)
    assert assign_max(-np.array([[4, 1, 3], [2, 0, 5], [3, 2, 2]])).tolist() == [1, 0, 2]


def test_rebalance_packs_a_layer_by_load():
    """Loads 0.4, 0.3, 0.2, 0.1, six copies (at most two each) on three chiplets. By hand: the 0.4 and
    0.3 experts get a second copy (loads per copy 0.2, 0.15, 0.2, 0.1); packed heaviest first onto the
    least loaded chiplet with room (two each): {e0, e1}, {e0, e1}, {e2, e3}, loads 0.35, 0.35, 0.3."""
    names = [["L0.e0", "L0.e1", "L0.e2", "L0.e3"]]
    groups = ExpertGroups(names=names, q=[np.array([0.4, 0.3, 0.2, 0.1])], weight_bytes=[np.ones(4)],
                          units=[np.arange(4)])
    start = {"L0.e0": [0, 1], "L0.e1": [2], "L0.e2": [0], "L0.e3": [1, 2]}
    out = rebalance(start, groups, groups.identity(), frozenset(), 2)
    loads = np.zeros(3)
    for e, n in enumerate(names[0]):
        loads[out[n]] += groups.q[0][e] / len(out[n])
    assert sorted(len(out[n]) for n in names[0]) == [1, 1, 2, 2]
    assert np.allclose(sorted(loads), [0.3, 0.35, 0.35])
    assert out["L0.e0"][:1] == [0]          # copies in place stay first (no move)
    p = placement_arrays(start, names[0], 2)
    again = rebalance_placement(p, p, groups, groups.identity(), frozenset(), 2)
    assert again is not p and again.to_dict(names[0]) == out
    assert isinstance(again, Placement)


def test_imbalance_kernel_is_numpys_to_the_bit():
    """dse.runtime.mapping.imbalance_arrays (one Numba pass) against NumPy itself: np.bincount of each
    copy's share, then per layer max / mean of the chiplets holding the layer, and the mean over layers
    (NumPy's pairwise sums, reproduced by `pairwise_sum`): equal to the last bit. By hand: a layer of
    experts 0.6 and 0.4 on chiplets 0 and 1 is 0.6 / 0.5 = 1.2."""
    rng = np.random.default_rng(7)
    for n in list(range(0, 140)) + [255, 256, 257, 600, 1031]:
        a = rng.random(n + 3) * 10.0 ** rng.uniform(-3, 3, n + 3)
        assert pairwise_sum(a, 3, n) + 0.0 == a[3:].sum()
    for _ in range(60):
        G, m, chips = int(rng.integers(1, 70)), int(rng.integers(1, 9)), int(rng.integers(2, 140))
        ncopy = rng.integers(0, 3, G * m)
        slots = np.full((G * m, 2), -1)
        for u, c in enumerate(ncopy):
            slots[u, :c] = rng.choice(chips, c, replace=False)
        load = rng.random(G * m) * (rng.random(G * m) > 0.2)
        offsets = np.arange(0, G * m + 1, m)
        rows, cols = np.nonzero(np.arange(2)[None, :] < ncopy[:, None])
        flat = np.bincount(rows // m * chips + slots[rows, cols], weights=load[rows] * (1.0 / ncopy[rows]),
                           minlength=G * chips).reshape(G, chips)
        count = (flat > 0).sum(axis=1)
        keep = count > 0
        want = float((flat[keep].max(axis=1) / (flat[keep].sum(axis=1) / count[keep])).mean()) \
            if keep.any() else 1.0
        assert imbalance_arrays(slots, ncopy, np.arange(G * m), offsets, load, chips) == want
    hand = imbalance_arrays(np.array([[0], [1]]), np.array([1, 1]), np.arange(2), np.array([0, 2]),
                            np.array([0.6, 0.4]), 2)
    assert hand == 0.6 / 0.5


def test_rebalance_leaves_a_layer_within_the_bound():
    """Issue 48's lever (a): with a ``bound``, a layer whose imbalance (max / mean chiplet load, as
    dse.runtime.imbalance counts it) stays within it keeps its copies; one beyond it, or with a copy on
    a failed chiplet, is re-packed. Layer 0: loads 0.4, 0.3, 0.2, 0.1 on chiplets {0, 1}, {2}, {0},
    {1, 2}: chiplet loads 0.4, 0.25, 0.35, imbalance 0.4 / (1 / 3) = 1.2. Layer 1: all on chiplet 0
    with chiplet 1 at home: imbalance 1 (one chiplet holds it), re-packed unless within the bound."""
    names = [["L0.e0", "L0.e1", "L0.e2", "L0.e3"], ["L1.e0", "L1.e1"]]
    q = [np.array([0.4, 0.3, 0.2, 0.1]), np.array([0.5, 0.5])]
    groups = ExpertGroups(names=names, q=q, weight_bytes=[np.ones(4), np.ones(2)],
                          units=[np.arange(4), np.arange(4, 6)])
    start = {"L0.e0": [0, 1], "L0.e1": [2], "L0.e2": [0], "L0.e3": [1, 2], "L1.e0": [0], "L1.e1": [0]}
    flat = [n for g in names for n in g]
    p = placement_arrays(start, flat, 2)
    home = placement_arrays({**start, "L1.e1": [1]}, flat, 2)
    every = rebalance_placement(p, home, groups, groups.identity(), frozenset(), 2).to_dict(flat)
    assert every["L0.e0"] != [0, 1] or every["L0.e2"] != [0]            # bound 0: every layer re-packed
    kept = rebalance_placement(p, home, groups, groups.identity(), frozenset(), 2, bound=1.25).to_dict(flat)
    assert kept == start                                                # both layers within 1.25
    tight = rebalance_placement(p, home, groups, groups.identity(), frozenset(), 2, bound=1.1).to_dict(flat)
    assert {n: tight[n] for n in names[0]} == {n: every[n] for n in names[0]}      # 1.2 > 1.1: re-packed
    assert {n: tight[n] for n in names[1]} == {n: start[n] for n in names[1]}      # 1.0: kept
    dead = rebalance_placement(p, home, groups, groups.identity(), frozenset({2}), 2, bound=1.25).to_dict(flat)
    assert all(2 not in dead[n] for n in names[0])                      # a copy on a failed chiplet: moved


def test_a_waiting_policy_is_not_asked():
    """`Policy.waits` (the planner builds no state then) says what `decide` would answer: `periodic`
    waits at the first window and until ``every_s`` has passed since its last change, `threshold` at
    the first window only, the others never."""
    from dse.runtime.policies import make_policy
    periodic, threshold = make_policy("periodic", 300.0), make_policy("threshold")
    assert periodic.waits(0, 600.0, -np.inf) and periodic.waits(3, 500.0, 240.0)
    assert not periodic.waits(3, 540.0, 240.0) and not periodic.waits(1, 60.0, -np.inf)
    assert threshold.waits(0, 0.0, -np.inf) and not threshold.waits(1, 60.0, 0.0)
    assert not make_policy("on-failure").waits(0, 0.0, -np.inf)


def reference_packing(load, slots, ncopy, home, nhome, failed, max_copies):
    """One layer rebalanced as the module docstring describes it, in plain Python with scipy's
    linear_sum_assignment: the reference the compiled packing must equal, bit for bit."""
    m = len(load)
    held = {int(c) for e in range(m) for c in slots[e, : ncopy[e]]}
    chips = sorted(c for c in held | {int(c) for e in range(m) for c in home[e, : nhome[e]]} if not failed[c])
    bins = len(chips)
    if not bins:
        return [list(slots[e, : ncopy[e]]) for e in range(m)]
    cap, r = min(max_copies, bins), [1] * m
    for _ in range(max(0, min(int(ncopy[:m].sum()), cap * m) - m)):
        per = [load[e] / r[e] if r[e] < cap else -np.inf for e in range(m)]
        r[int(np.argmax(per))] += 1
    room = -(-sum(r) // bins)
    content, weight = [[] for _ in range(bins)], [0.0] * bins
    for e in np.argsort([-(load[e] / r[e]) for e in range(m)], kind="mergesort"):
        for _ in range(r[e]):
            free = [b for b in range(bins) if len(content[b]) < room]
            b = min(free, key=lambda b: (e in content[b], weight[b], len(content[b]), b))
            content[b].append(int(e))
            weight[b] += load[e] / r[e]
    gain = np.array([[sum(1 for e in set(content[b]) if chips[j] in slots[e, : ncopy[e]]) for j in range(bins)]
                     for b in range(bins)])
    col = linear_sum_assignment(gain, maximize=True)[1]
    new = [[] for _ in range(m)]
    for b in range(bins):
        for e in content[b]:
            new[e].append(chips[col[b]])
    out = []
    for e in range(m):
        kept = [int(c) for c in slots[e, : ncopy[e]] if c in new[e]]
        out.append(kept + [c for c in new[e] if c not in kept])
    return out


def test_compiled_packing_is_the_reference_ties_included():
    """`rebalance_arrays` (experts kept as bits in a layer of up to `MASK_BITS`, as lists in a larger
    one, the assignment scanning listed rows and columns) against `reference_packing` on random layers:
    equal loads (ties in the replication, the pack and the assignment), failed chiplets, homes elsewhere,
    layers of 4 to 70 experts; and `pack`'s bits are the experts each bin holds."""
    from dse.runtime.policies.eplb import rebalance_arrays
    from dse.runtime.policies.packing import MASK_BITS, pack, popcount
    rng = np.random.default_rng(48)
    for trial in range(120):
        m = int(rng.choice([4, 8, 13, MASK_BITS, 70]))
        layers, c, w = int(rng.integers(1, 3)), int(rng.integers(2, 14)), 3
        n = m * layers
        load = rng.integers(0, 3, n).astype(float) / 4          # many equal loads
        ncopy, nhome = rng.integers(1, w + 1, n), rng.integers(0, w + 1, n)
        slots, home = np.full((n, w), -1), np.full((n, w), -1)
        for e in range(n):
            ncopy[e], nhome[e] = min(ncopy[e], c), min(nhome[e], c)
            slots[e, : ncopy[e]] = rng.choice(c, ncopy[e], replace=False)
            home[e, : nhome[e]] = rng.choice(c, nhome[e], replace=False)
        failed = rng.random(c) < 0.2
        max_copies = int(rng.integers(1, 4))
        out, count = rebalance_arrays(np.arange(0, n + 1, m).astype(np.int64), load, slots, ncopy, home, nhome,
                                      failed, max_copies)
        for g in range(layers):
            rows = slice(g * m, (g + 1) * m)
            ref = reference_packing(load[rows], slots[rows], ncopy[rows], home[rows], nhome[rows], failed,
                                    max_copies)
            got = [list(out[g * m + e, : count[g * m + e]]) for e in range(m)]
            assert got == ref, (trial, g)
    load, r = np.array([0.5, 0.25, 0.25, 0.125]), np.array([2, 1, 1, 1])
    content, count, weight = np.full((3, 8), -1), np.zeros(3, np.int64), np.zeros(3)
    mask = np.zeros(3, np.int64)
    pack(load, r, 3, content, count, weight, np.zeros(4, np.int64), np.zeros(4), mask)
    for b in range(3):
        assert mask[b] == sum(1 << int(e) for e in set(content[b, : count[b]]))
        assert popcount(mask[b]) == len(set(content[b, : count[b]]))


def test_one_call_packing_equals_gather_pack_scatter():
    """`rebalance_units` (issue 48 part 5: a placement's expert rows gathered, packed and scattered back in
    one compiled call, not remembered) equals the steps it replaces: the rows gathered by NumPy, the
    failed flags over every chiplet named, `rebalance_arrays`, and the rows written back (-1 padded,
    as wide as the widest), on random placements with non-expert rows between the experts, equal loads
    (ties), failed chiplets (one beyond every slot named) and homes elsewhere, with and without a bound."""
    from dse.runtime.policies.eplb import rebalance_arrays, rebalance_units
    rng = np.random.default_rng(485)
    for trial in range(60):
        m, layers, c, w, v = int(rng.choice([4, 8, 13])), int(rng.integers(1, 4)), int(rng.integers(2, 12)), 3, 2
        n_units = m * layers + int(rng.integers(0, 6))
        units = np.sort(rng.choice(n_units, m * layers, replace=False)).astype(np.int64)
        ncopy, nhome = rng.integers(1, w + 1, n_units), rng.integers(0, v + 1, n_units)
        slots, home = np.full((n_units, w), -1), np.full((n_units, v), -1)
        for u in range(n_units):
            ncopy[u], nhome[u] = min(ncopy[u], c), min(nhome[u], c)
            slots[u, : ncopy[u]] = rng.choice(c, ncopy[u], replace=False)
            home[u, : nhome[u]] = rng.choice(c, nhome[u], replace=False)
        failed = sorted({int(x) for x in np.flatnonzero(rng.random(c) < 0.25)} | ({c + 1} if trial % 3 == 0 else set()))
        load = rng.integers(0, 3, len(units)).astype(float) / 4
        offsets = np.arange(0, len(units) + 1, m).astype(np.int64)
        max_copies, bound = int(rng.integers(1, 4)), float(rng.choice([0.0, 1.2]))
        dead = np.zeros(1 + max(int(slots[units].max()), int(home[units].max()), max(failed, default=-1)), bool)
        dead[failed] = True
        new, count = rebalance_arrays(offsets, load, slots[units], ncopy[units], home[units], nhome[units], dead,
                                      max_copies, bound)
        want = np.full((n_units, max(w, count.max())), -1)
        want[:, :w], want_n = slots, ncopy.copy()
        for i, u in enumerate(units):
            want[u] = -1
            want[u, : count[i]], want_n[u] = new[i, : count[i]], count[i]
        got, got_n = rebalance_units(offsets, load, slots, ncopy, home, nhome, units, np.array(failed, np.int64),
                                     max_copies, bound)
        assert np.array_equal(got, want) and np.array_equal(got_n, want_n), trial
