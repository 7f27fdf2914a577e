"""The failure pass's route walks (dse.model.routes.walk_routes, dse.model.hand_offs.add_route_once): each
route's links in the same order as the intact pass's padded walks, the padding on a spare-lane set of the
pair's own, and the same bits as walks that all pad onto one set of spare lanes (the path before)."""
import numpy as np
import pytest

import dse
from dse.model.routes import ROUTE_LANES, SPARE_SETS, padded_routes, walk_routes


def random_routes(rng, pairs, n_links):
    lengths = rng.integers(0, 10, pairs)
    ptr = np.zeros(pairs + 1, np.int64)
    np.cumsum(lengths, out=ptr[1:])
    return ptr, rng.integers(0, n_links, int(ptr[-1])).astype(np.int64)


def test_walks_keep_each_route_and_pad_onto_the_pairs_own_spare_lanes():
    rng = np.random.default_rng(5)
    L = 13
    ptr, links = random_routes(rng, 200, L)
    w_ptr, w_links = walk_routes(ptr, links, L)
    p_ptr, p_links = padded_routes(ptr, links, L)
    for q in range(200):
        route = links[ptr[q]:ptr[q + 1]]
        walk = w_links[w_ptr[q]:w_ptr[q + 1]]
        assert len(walk) % ROUTE_LANES == 0 and len(walk) >= ROUTE_LANES
        assert len(walk) - len(route) < ROUTE_LANES or (len(route) == 0 and len(walk) == ROUTE_LANES)
        assert list(walk[:len(route)]) == list(route)
        assert list(p_links[p_ptr[q]:p_ptr[q + 1]][:len(route)]) == list(route)
        pads = walk[len(route):]
        lanes = L + ROUTE_LANES * (q % SPARE_SETS) + np.arange(len(route), len(walk)) % ROUTE_LANES
        assert list(pads) == list(lanes)
        assert (pads < L + ROUTE_LANES * SPARE_SETS).all()


def one_spare_set(R):
    """R with every walk padding onto lanes L .. L + 3 of its table's L, as the walks did before."""
    x = np.arange(len(R.walk_links))
    pair = np.searchsorted(R.walk_ptr, x, side="right") - 1
    L = R.n_links[np.searchsorted(R.pair_base, pair, side="right") - 1]
    links = R.walk_links.astype(np.int64)
    pad = links >= L
    links[pad] = L[pad] + (links[pad] - L[pad]) % ROUTE_LANES
    return R._replace(walk_links=links.astype(R.walk_links.dtype))


@pytest.mark.parametrize("name", ["moe_small", "tiny_moe"])
def test_failure_pass_gives_the_bits_of_walks_on_one_spare_lane_set(name):
    prepared = dse.prepare(dse.load_study(f"tests/data/{name}.yaml"))
    ev, space = prepared.package_evaluator, prepared.space
    assert len(set(ev.routes.n_links.tolist())) > 1            # tables of different link counts share the rows
    X = np.random.default_rng(11).integers(space.lower, space.upper + 1, size=(60, space.n_var))
    d = ev.decode(X)
    rotated = ev._kernel(d, True, ev._workspaces(ev.max_copies))
    R = ev.routes
    try:
        ev.routes = one_spare_set(R)
        assert not np.array_equal(ev.routes.walk_links, R.walk_links)
        one = ev._kernel(d, True, ev._workspaces(ev.max_copies))
    finally:
        ev.routes = R
    assert np.isfinite(rotated[:, list(ev.columns).index("fault_tolerance_frac")]).all()
    assert np.array_equal(rotated, one, equal_nan=True)
