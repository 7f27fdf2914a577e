"""Density placement against an LP solver, hard capacity with shortfall, and hot-first vs naive spill."""
import numpy as np
import pytest
from scipy.optimize import linprog

import memory


def _lp_cost(size, read, capacity, cost):
    """Optimal sum_j sum_t cost_t (r_j/s_j) x_jt with sum_t x_jt = s_j and sum_j x_jt <= C_t (scipy HiGHS)."""
    n, T = len(size), len(cost)
    density = read / size
    c = np.array([cost[t] * density[j] for j in range(n) for t in range(T)])
    a_eq = np.zeros((n, n * T))
    for j in range(n):
        a_eq[j, j * T:(j + 1) * T] = 1
    a_ub = np.zeros((T - 1, n * T))            # the last tier is unbounded (it takes the overflow)
    for t in range(T - 1):
        a_ub[t, t::T] = 1
    res = linprog(c, A_ub=a_ub, b_ub=capacity, A_eq=a_eq, b_eq=size, bounds=(0, None), method="highs")
    assert res.status == 0
    return res.fun


@pytest.mark.parametrize("seed", range(5))
def test_greedy_by_density_is_the_lp_optimum(seed):
    rng = np.random.default_rng(seed)
    n = 12
    size = rng.uniform(1, 10, n)
    read = size * rng.pareto(1.5, n)
    capacity = np.array([0.1, 0.3]) * size.sum()            # SRAM, HBM; the rest overflows to DDR
    cost = np.array([0.1, 1.0, 20.0])                        # per byte read: SRAM < HBM < DDR
    frac = memory.place_by_density(size, read, capacity)
    assert np.allclose(frac.sum(axis=1), 1.0)
    stored = memory.tier_bytes(frac, size)
    assert (stored[:2] <= capacity * (1 + 1e-12)).all()
    greedy = memory.tier_bytes(frac, read) @ cost
    assert greedy == pytest.approx(_lp_cost(size, read, capacity, cost), rel=1e-9)


def test_shared_tier_is_shared_and_the_rest_is_short():
    # two chiplets, HBM 2 and 3 bytes, shared DDR 4 bytes, four 4-byte items
    size = np.full(4, 4.0)
    read = np.array([1.0, 4.0, 2.0, 0.5])
    frac, short = memory.place_design(np.array([0, 2, 4]), size, read, np.array([[2.0], [3.0]]), 4.0)
    expected = [[0, 0.25, 0.75],       # chiplet 0: item 1 is denser, takes the HBM; item 0 gets DDR left-overs
                [0.5, 0.5, 0],
                [0.75, 0.25, 0],       # chiplet 1: item 2 in HBM, its overflow is denser than item 0's
                [0, 0, 1]]             # the coldest item finds no room at all
    assert np.allclose(frac, expected)
    assert short == pytest.approx(7.0)
    assert memory.tier_bytes(frac, size)[1] == pytest.approx(4.0)


def test_population_is_designs_one_by_one():
    rng = np.random.default_rng(3)
    designs = []
    for _ in range(6):
        chips = rng.integers(1, 4)
        counts = rng.integers(0, 5, chips)
        seg = np.concatenate([[0], np.cumsum(counts)])
        n = seg[-1]
        designs.append((seg, rng.uniform(1, 5, n), rng.uniform(0, 5, n), rng.uniform(0, 6, (chips, 2)),
                        rng.uniform(0, 8)))
    design_start = np.concatenate([[0], np.cumsum([len(d[0]) - 1 for d in designs])])
    item_offsets = np.cumsum([0] + [d[0][-1] for d in designs])
    seg_start = np.concatenate([d[0][:-1] + off for d, off in zip(designs, item_offsets)] + [[item_offsets[-1]]])
    frac, short = memory.place_population(design_start, seg_start, np.concatenate([d[1] for d in designs]),
                                          np.concatenate([d[2] for d in designs]),
                                          np.concatenate([d[3] for d in designs]), np.array([d[4] for d in designs]))
    for p, d in enumerate(designs):
        f, s = memory.place_design(*d)
        assert np.allclose(frac[item_offsets[p]:item_offsets[p + 1]], f)
        assert short[p] == pytest.approx(s)


def _zipf_experts(n=64, s=1.0, weight=1e9, tokens=4):
    q = 1 / np.arange(1, n + 1) ** s
    q = np.minimum(2 * q / q.sum(), 1.0)               # top-2 routing: probabilities sum to 2
    size = np.full(n, weight)
    return size, memory.selection_read_bytes(size, q, tokens)


def test_hot_first_beats_naive_spill():
    size, read = _zipf_experts()
    hbm_capacity = 0.5 * size.sum()
    hot = memory.place_by_density(size, read, np.array([hbm_capacity]))
    naive = memory.proportional_spill(size, hbm_capacity)
    assert memory.tier_bytes(hot, size)[0] == pytest.approx(hbm_capacity)       # same bytes in HBM
    hot_ddr = memory.tier_bytes(hot, read)[1]
    naive_ddr = memory.tier_bytes(naive, read)[1]
    assert naive_ddr == pytest.approx(0.5 * read.sum())
    # the 32 hottest experts are in HBM: only the tail's reads go to DDR
    assert hot_ddr == pytest.approx(np.sort(read)[:32].sum())
    assert hot_ddr < 0.5 * naive_ddr
    hbm, ddr = memory.memory_preset("hbm3"), memory.memory_preset("ddr5")
    args = (memory.effective_bandwidth_Bps(hbm, 1), memory.effective_bandwidth_Bps(ddr, 2),
            hbm.energy_j_per_byte, ddr.energy_j_per_byte, False)
    t_hot, e_hot = memory.direct_cost(memory.tier_bytes(hot, read)[0], hot_ddr, *args)
    t_naive, e_naive = memory.direct_cost(memory.tier_bytes(naive, read)[0], naive_ddr, *args)
    assert t_hot < 0.6 * t_naive and e_hot < e_naive


def test_uniform_visits_gain_nothing_from_tiering():
    size = np.full(16, 1e9)
    read = memory.selection_read_bytes(size, np.full(16, 2 / 16), 4)
    hot = memory.place_by_density(size, read, np.array([5e9]))
    naive = memory.proportional_spill(size, 5e9)
    assert memory.tier_bytes(hot, read)[1] == pytest.approx(memory.tier_bytes(naive, read)[1])


def test_everything_fits_means_no_spill():
    size, read = _zipf_experts(n=8)
    frac = memory.place_by_density(size, read, np.array([size.sum() * 2]))
    assert (frac[:, 0] == 1).all()
    assert (memory.proportional_spill(size, size.sum())[:, 1] == 0).all()


def test_spill_by_density_equals_place_by_density_with_one_tier():
    import numpy as np
    from memory import place_by_density, spill_by_density
    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(1, 40))
        size = rng.uniform(0, 10, n) * (rng.random(n) > 0.1)
        read = rng.uniform(0, 5, n)
        read[rng.random(n) < 0.3] = read[0]            # ties in density
        size[rng.random(n) < 0.3] = size[0]
        capacity = float(rng.uniform(0, size.sum() * 1.2))
        spill = np.zeros(n)
        overflow = spill_by_density(size, read, capacity, np.zeros(n), np.zeros(n, np.int64), spill)
        expected = place_by_density(size, read, np.array([capacity]))
        assert np.allclose(spill[size > 0], expected[size > 0, 1])
        assert overflow == pytest.approx((expected[:, 1] * size).sum())


@pytest.mark.parametrize("n", [1, 2, 31, 33, 100, 517])
def test_spill_order_is_the_stable_densest_first_order(n):
    """Above MERGE_MIN items the order comes from a merge sort (issue 52: the failure pass re-places
    chiplets of hundreds of copies); it must be the insertion sort's: falling density, ties in index
    order, so the spill (and every figure after it) is bit for bit the same."""
    from memory.placement import merge_order, spill_first_n
    rng = np.random.default_rng(n)
    size = rng.choice([0.0, 1.0, 2.0, 4.0], n)          # zero sizes: infinite density
    read = rng.choice([0.0, 1.0, 2.0, 8.0], n)          # few values: many ties
    density = np.where(size > 0, read / np.where(size > 0, size, 1.0), np.inf)
    order = np.zeros(n, np.int64)
    merge_order(n, density.copy(), order)
    expected = np.lexsort((np.arange(n), -density))
    assert order.tolist() == expected.tolist()
    capacity = 0.4 * size.sum()
    spill = np.zeros(n)
    overflow = spill_first_n(n, size, read, capacity, np.zeros(n), np.zeros(n, np.int64), spill)
    left, free, want = size.copy(), capacity, np.zeros(n)
    for j in expected:                                    # the fill, in the reference order
        if size[j] > 0.0:
            take = min(free, size[j])
            want[j] = (size[j] - take) / size[j]
            free -= take
    assert spill.tolist() == want.tolist()
    assert overflow == pytest.approx(float((want * size).sum()), rel=1e-12)


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 16, 17, 65, 300, 1001])
def test_merge_runs_keeps_the_given_order_of_ties(n):
    """`merge_runs` (insertion-sorted runs of RUN items, then (density, index) pairs merged) from any given
    order: falling density, equal densities in the order given (what the failure pass's re-placement
    relies on: its moved copies come in (unit, copy) order); the same order the stable sort of NumPy gives."""
    from memory.placement import merge_runs
    rng = np.random.default_rng(1000 + n)
    density = rng.choice([0.0, 0.5, 1.0, 2.0, np.inf], 2 * n) * rng.choice([1.0, 1.0, 3.0], 2 * n)
    density[rng.random(2 * n) < 0.5] = rng.random()     # and distinct values
    order = rng.permutation(2 * n)[:n].astype(np.int64)  # indices into density, a subset, shuffled
    expected = order[np.argsort(-density[order], kind="stable")]
    merge_runs(n, density, order)
    assert order.tolist() == expected.tolist()


def test_two_local_tiers_are_two_cuts_of_one_density_order():
    """The premise of the three-tier design (docs/arch.md, "Three tiers"): filling an SRAM of S
    bytes, then an HBM of H, then DDR, densest first, gives each item SRAM fraction 1 - spill(S) and DDR
    fraction spill(S + H), two one-tier spills of the same stable order (so the step model's one-tier
    `spill_first_n` suffices, called twice), and HBM the rest."""
    from memory import place_by_density, spill_by_density
    rng = np.random.default_rng(55)
    for _ in range(50):
        n = int(rng.integers(1, 80))                    # both sorts: insertion and merge (MERGE_MIN)
        size = rng.uniform(0, 10, n) * (rng.random(n) > 0.1)
        read = rng.uniform(0, 5, n)
        read[rng.random(n) < 0.3] = read[0]            # ties in density
        size[rng.random(n) < 0.3] = size[0]
        sram, hbm = (float(x) for x in rng.uniform(0, size.sum() * 0.6, 2))
        expected = place_by_density(size, read, np.array([sram, hbm]))
        cut = {}
        for cap in (sram, sram + hbm):
            spill = np.zeros(n)
            spill_by_density(size, read, cap, np.zeros(n), np.zeros(n, np.int64), spill)
            cut[cap] = spill
        held = size > 0
        assert np.allclose(1.0 - cut[sram][held], expected[held, 0], atol=1e-12)
        assert np.allclose(cut[sram + hbm][held], expected[held, 2], atol=1e-12)
        assert np.allclose((cut[sram] - cut[sram + hbm])[held], expected[held, 1], atol=1e-12)


@pytest.mark.parametrize("n, moved_frac, fill", [(20, 0.3, 0.5), (300, 0.2, 0.4), (300, 0.5, 0.9), (40, 0.2, 2.0)])
def test_replacing_a_survivor_from_its_intact_order_is_the_full_sort(n, moved_frac, fill):
    """Issue 52: after a failure a surviving chiplet's copies are re-placed from its intact density order
    (dse.model.hbm_placement.place_merged: the moved units' copies sorted, then merged in); bit for bit the
    full stable sort's spill (ties many: few distinct sizes and reads; a moved unit with two copies here)."""
    from dse.model.hbm_placement import place_merged
    from memory.placement import spill_first_n
    rng = np.random.default_rng(n)
    U = 2 * n
    cap_u, kv_u = rng.choice([0.0, 1.0, 2.0, 4.0], U), rng.choice([0.0, 1.0], U)
    w_copy, other = rng.choice([0.0, 1.0, 2.0, 8.0], (U, 3)), rng.choice([0.0, 2.0], (U, 1))
    scale = rng.choice([1.0, 2.0], U)
    size = lambda u, c: cap_u[u] / c + kv_u[u] / c  # noqa: E731  (hbm_placement.item_size, split)
    read = lambda u, c: (w_copy[u, c] + other[u, 0] / c) * scale[u]  # noqa: E731
    mine = np.sort(rng.choice(U, n, replace=False))              # the chiplet's units, one copy each
    moved = rng.random(U) < moved_frac
    count2 = np.where(moved, 2, 1).astype(np.int64)
    a, b = 0, n
    isize = np.array([size(u, 1) for u in mine])
    iread = np.array([read(u, 1) for u in mine])
    order = np.zeros(n, np.int64)
    spill_first_n(n, isize, iread, 1e-3, np.zeros(n), order, np.zeros(n))   # the intact pass's sort
    buf_u, buf_r, buf_pos = [], [], np.zeros(n, np.int64)
    here = set(mine.tolist())
    for u in range(U):                                           # (u, r) order, as gather_chiplet
        if not moved[u] and u in here:
            buf_pos[int(np.searchsorted(mine, u))] = len(buf_u)
            buf_u.append(u), buf_r.append(0)
        elif moved[u] and rng.random() < 0.5:
            for r in ([0, 1] if u % 3 == 0 else [1]):
                buf_u.append(u), buf_r.append(r)
    m = len(buf_u)
    buf_u, buf_r = np.array(buf_u, np.int64), np.array(buf_r, np.int64)
    sizes = np.array([size(u, count2[u]) for u in buf_u])
    reads = np.array([read(u, count2[u]) for u in buf_u])
    capacity = fill * sizes.sum()
    want = np.zeros(m)
    over = spill_first_n(m, sizes, reads, capacity, np.zeros(m), np.zeros(m, np.int64), want)
    frac = np.full((U, 2), -1.0)
    scratch = lambda: np.zeros(m)  # noqa: E731
    got = place_merged(capacity, 0, a, b, mine.astype(np.int64), order, moved, buf_pos, buf_u, buf_r, m, count2,
                       True, cap_u, kv_u, w_copy, other, scale, scratch(), scratch(), scratch(),
                       np.zeros(m, np.int64), scratch(), np.zeros(m, np.int64), frac)
    assert got == over
    assert frac[buf_u, buf_r].tolist() == want.tolist()
