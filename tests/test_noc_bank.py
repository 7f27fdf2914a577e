"""The flat route bank the evaluator indexes per design, read from Numba."""
import numba as nb
import numpy as np
import pytest

import noc
from noc.faults import reroute_table


@nb.njit
def bank_loads(bank, rows, cols, traffic):
    """What an evaluator kernel does: pick the design's table, add each pair's bytes, time the busiest channel."""
    c = bank.shape_index[rows, cols]
    n, ptr, links = noc.bank_routes(bank, c)
    bw, hop_lat, hop_e = noc.bank_links(bank, c)
    hops, path_lat, path_e = noc.bank_pairs(bank, c)
    loads = np.zeros(bank.n_links.max())
    worst_path = 0.0
    for i in range(n):
        for j in range(n):
            if traffic[i, j] > 0:
                noc.add_route_load(ptr, links, i, j, n, traffic[i, j], loads)
                worst_path = max(worst_path, path_lat[i * n + j])
    return loads[: bw.shape[0]], worst_path + noc.max_serialisation_s(loads, bw)


@nb.njit
def bank_reroute(bank, c, dead):
    n, ptr, links = noc.bank_routes(bank, c)
    adj_ptr, adj_link, src, dst = noc.bank_graph(bank, c)
    alive = np.ones(n, np.bool_)
    alive[dead] = False
    return reroute_table(n, ptr, links, adj_ptr, adj_link, src, dst, np.ones(src.shape[0], np.bool_), alive, True)


@pytest.mark.parametrize("kind", ["mesh", "torus"])
def test_bank_views_match_the_route_objects(kind):
    shapes = [(r, c) for r in range(1, 5) for c in range(2, 5)]
    tech = "ucie-standard"
    bank = noc.route_bank([noc.build(kind, r, c, tech) for r, c in shapes], "xy")
    assert bank.shape_index[1, 1] == -1 and bank.shape_index[3, 4] == shapes.index((3, 4))
    rng = np.random.default_rng(1)
    for rows, cols in [(1, 2), (3, 4), (4, 4)]:
        t = noc.build(kind, rows, cols, tech)
        r = noc.route(t, "xy")
        traffic = rng.random((t.n, t.n)) * 1e6
        loads, time_s = bank_loads(bank, rows, cols, traffic)
        assert np.allclose(loads, r.link_loads(traffic))
        assert time_s == pytest.approx(noc.phase_time_s(r, traffic))
        c = bank.shape_index[rows, cols]
        hops, _, energy = noc.bank_pairs(bank, c)
        assert np.array_equal(hops, r.hops.ravel())
        assert np.allclose(energy, (r.incidence @ t.link_hop_energy_j_per_byte))


def test_bank_reroutes_around_a_dead_chiplet_inside_numba():
    bank = noc.route_bank([noc.mesh(3, 3)], "xy")
    ptr, links, reach = bank_reroute(bank, 0, 4)
    r = noc.fault_routes(noc.route(noc.mesh(3, 3)), failed_nodes=[4])
    assert np.array_equal(ptr, r.route_ptr) and np.array_equal(links, r.route_links)
    assert reach.sum() == 8 * 8


def test_graph_bank_has_one_configuration():
    bank = noc.route_bank([noc.from_links(3, [(0, 1), (1, 2, "serdes-long-reach")])], "shortest")
    assert list(bank.n_nodes) == [3] and list(bank.n_links) == [4]
    assert bank.shape_index.shape == (1, 1)
