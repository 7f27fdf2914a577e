"""The failure pass's bookkeeping: the re-mapping after a failure (dse.model.failure_remap.remap) keeps each
chiplet's free capacity on an array while units move (local capacity - bytes stored after the failure, -inf
for a failed chiplet) and every moved unit goes to the survivor that was emptiest when it moved; the busiest
link of a load row (dse.model.hand_offs.busiest_link) has the bits of one pass in link order."""
import numpy as np
import pytest

import dse
from dse.model.hbm_placement import item_size, local_capacity


@pytest.mark.parametrize("name", ["tiny_moe", "moe_small"])
def test_free_capacity_array_and_emptiest_survivor(name):
    prepared = dse.prepare(dse.load_study(f"tests/data/{name}.yaml"))
    ev, space = prepared.package_evaluator, prepared.space
    T = ev.kernel
    X = np.random.default_rng(11).integers(space.lower, space.upper + 1, size=(8, space.n_var))
    checked = 0
    for x in X:
        d = ev.decode(x[None, :])
        n = int(d.rows[0] * d.cols[0])
        kind, stacks, slots, ncopy = d.kind[0], d.stacks[0], d.slots[0], d.ncopy[0]
        W = ev.workspace(d.slots.shape[2])
        cap = np.array([local_capacity(int(stacks[i]), T.hbm_cap, T.kind_sram_cap[kind[i]]) for i in range(n)])
        for dead in range(n):
            ok, new_slots, count = ev.remapped_arrays(d, [dead], workspace=W)
            if not ok:
                continue
            movers = [u for u in range(len(ncopy)) if dead in slots[u, :ncopy[u]]]
            arrivals = [(u, int(i)) for u in movers for i in new_slots[u, :count[u]]
                        if i not in slots[u, :ncopy[u]]]
            if not arrivals:
                continue
            free = W.free[:n]
            assert free[dead] == -np.inf
            alive = np.arange(n) != dead
            assert np.array_equal(free[alive], cap[alive] - W.stored2[:n][alive])
            # replay the moves: each arrival went to the emptiest survivor (lowest index on ties) at its turn
            stored = W.stored.copy()[:n]
            stored[dead] = 0.0
            for u in movers:
                kept = [int(i) for i in slots[u, :ncopy[u]] if i != dead]
                if not space.split:
                    for i in kept:
                        stored[i] += T.unit_kv[u] / len(kept) - T.unit_kv[u] / ncopy[u]
                size = item_size(T.unit_capacity[u], T.unit_kv[u], int(ncopy[u]) if space.split else 1,
                                 space.split)
                for i in new_slots[u, len(kept):count[u]]:
                    room = np.where(alive, cap - stored, -np.inf)
                    assert i == int(np.argmax(room))
                    stored[i] += size
            assert np.array_equal(stored[alive], W.stored2[:n][alive])
            checked += 1
    assert checked > 0


def test_busiest_link_equals_one_pass_in_link_order():
    """dse.model.hand_offs.busiest_link (a maximum over the products' bits) gives the bits of one pass in link order
    (ties, +-0, NaN and negative loads included), for every row length."""
    from dse.model.hand_offs import busiest_link
    rng = np.random.default_rng(5)
    for n_links in range(0, 11):
        for _ in range(20):
            row = rng.choice([0.0, -0.0, 1.5, 2.5, -1.0, np.nan, 2.5], size=n_links + 3)
            inv = rng.choice([1.0, 0.5, 2.0], size=n_links + 2)
            one_pass = 0.0
            for link in range(n_links):
                x = row[3 + link] * inv[2 + link]
                one_pass = x if x > one_pass else one_pass
            got = busiest_link(row, 3, inv, 2, n_links)
            assert np.array([got]).view(np.int64)[0] == np.array([one_pass]).view(np.int64)[0]


def test_padded_route_walk_equals_the_route_walk():
    """The kernels walk each route from its padded copy (dse.model.routes.padded_routes, four links a step:
    dse.model.hand_offs.add_route): the same links in the same order, the padding on spare lanes past the
    table's links, so every link's load has the bits of a walk of the route alone (old routes taken away
    and new ones added, as a failure re-routes); a chiplet's route to itself is empty and takes no time on
    the intact tables (the failure pass walks it without a test). Intact and fault tables alike."""
    from dse.model.hand_offs import add_route
    from dse.model.routes import ROUTE_LANES, build_route_tables
    prepared = dse.prepare(dse.load_study("tests/data/moe_small.yaml"))
    package = prepared.package_evaluator.package
    R = build_route_tables(package, links=True, routers_fail=True)
    rng = np.random.default_rng(3)
    for t in range(len(R.pair_base)):
        L, pb = int(R.n_links[t]), int(R.pair_base[t])
        n = int(round(((R.pair_base[t + 1] if t + 1 < len(R.pair_base) else len(R.pair_ptr) - 1) - pb) ** 0.5))
        row = rng.choice([0.0, 1.0, 3.0e5, 7.25e-3], size=L + ROUTE_LANES) * rng.random(L + ROUTE_LANES)
        walked = row.copy()
        for q in rng.integers(0, n * n, size=40):
            p = pb + int(q)
            links = R.route_links[R.pair_ptr[p]:R.pair_ptr[p + 1]]
            padded = R.pad_links[R.pad_ptr[p]:R.pad_ptr[p + 1]]
            assert len(padded) % ROUTE_LANES == 0 and len(padded) - len(links) < ROUTE_LANES
            assert np.array_equal(padded[:len(links)], links)
            assert ((padded[len(links):] > L) & (padded[len(links):] < L + ROUTE_LANES)).all()
            amount = float(rng.choice([-1.0, 1.0]) * rng.random() * 1e4)
            add_route(row, 0, R.pad_ptr, R.pad_links, p, amount)
            for link in links:
                walked[link] += amount
        assert row[:L].tobytes() == walked[:L].tobytes()
    for sh in range(len(R.shape_rows)):
        n, pb = int(R.shape_rows[sh] * R.shape_cols[sh]), int(R.pair_base[sh])
        for i in range(n):
            assert R.pair_latency[pb + i * n + i] == 0.0 and R.pad_ptr[pb + i * n + i + 1] == R.pad_ptr[pb + i * n + i]


def test_reciprocal_of_a_power_of_two_divides_to_the_bit():
    """dse.model.copy_cost.copy_roofline multiplies by 1 / c instead of dividing by c when the copy count c is
    a power of two: the same bits for every double (subnormals, infinities, NaN, signed zeros), and its
    figures equal those of c copies computed by division."""
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.standard_normal(2000) * 10.0 ** rng.integers(-310, 308, 2000),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
                         1.7976931348623157e308]])
    with np.errstate(all="ignore"):
        for c in (1, 2, 4, 8, 16, 64):
            assert (x * (1.0 / c)).tobytes() == (x / c).tobytes()
        assert (x * (1.0 / 3)).tobytes() != (x / 3).tobytes()      # not for other counts: those divide
