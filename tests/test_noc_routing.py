"""Route tables: XY agrees with the mesh kernels, shortest paths with networkx, loads with the sparse product."""
import networkx as nx
import numpy as np
import pytest

import noc


def legacy_slot(t: noc.Topology) -> np.ndarray:
    """Map each channel id to the ``node * 4 + direction`` slot of noc.mesh's kernels."""
    slot = np.empty(t.n_links, np.int64)
    for node in range(t.n):
        for d in range(4):
            if t.grid_link[node, d] >= 0:
                slot[t.grid_link[node, d]] = node * 4 + d
    return slot


@pytest.mark.parametrize("rows,cols", [(2, 2), (3, 5), (4, 4)])
def test_xy_table_matches_the_mesh_kernels(rows, cols):
    t = noc.mesh(rows, cols)
    r = noc.route(t, "xy")
    rng = np.random.default_rng(rows * cols)
    traffic = rng.random((t.n, t.n))
    np.fill_diagonal(traffic, 0)
    legacy = noc.xy_link_loads(traffic, cols)
    assert np.allclose(r.link_loads(traffic), legacy[legacy_slot(t)])
    for s in range(t.n):
        for d in range(t.n):
            assert r.hops[s, d] == noc.xy_hops(s, d, cols)
    # XY goes along the row first
    assert r.path(0, t.n - 1)[: cols] == list(range(cols))


def test_shortest_routes_are_minimal_on_a_random_graph():
    g = nx.connected_watts_strogatz_graph(14, 4, 0.3, seed=2)
    t = noc.from_networkx(g)
    r = noc.route(t, "shortest")
    lengths = dict(nx.all_pairs_shortest_path_length(g))
    for s in range(t.n):
        for d in range(t.n):
            path = r.path(s, d)
            assert len(path) - 1 == lengths[s][d]
            assert all(g.has_edge(a, b) for a, b in zip(path, path[1:]))


def test_sparse_product_numba_and_helpers_agree():
    t = noc.torus(4, 4)
    r = noc.route(t, "xy")
    rng = np.random.default_rng(0)
    batch = rng.random((5, t.n, t.n))
    sparse = r.link_loads(batch)
    for i in range(5):
        assert np.allclose(sparse[i], noc.route_link_loads(r.route_ptr, r.route_links, batch[i], t.n_links))
    loads = np.zeros(t.n_links)
    noc.add_route_load(r.route_ptr, r.route_links, 0, 10, t.n, 2.0, loads)
    assert loads.sum() == 2.0 * noc.route_hops(r.route_ptr, 0, 10, t.n) == 2.0 * r.hops[0, 10]
    # torus XY takes the wrap-around when shorter: 0 -> 3 is one hop west
    assert r.path(0, 3) == [0, 3]


def test_transpose_and_hotspot_patterns():
    p = noc.traffic.transpose(4, 4)
    assert p[1, 4] == 1 and p.sum() == 16
    h = noc.traffic.hotspot(16, hot=[5], fraction=0.5)
    assert np.allclose(h.sum(1), 1) and h[:, 5].sum() == pytest.approx(16 * (0.5 + 0.5 / 16))
    r = noc.route(noc.mesh(4, 4), "xy")
    # hotspot saturation is set by the hot node's ejection channel when terminals are modelled
    sat = noc.saturation(r, h, terminal_bw_Bps=1.0)
    assert sat.bottleneck_link == -1 and sat.injection_Bps == pytest.approx(1 / h[:, 5].sum())
