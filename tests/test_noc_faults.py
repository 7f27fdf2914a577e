"""Faults: connectivity after failures, detours, what XY alone loses, throughput retained, Monte Carlo."""
import networkx as nx
import numpy as np
import pytest

import noc


@pytest.fixture(scope="module")
def mesh44():
    return noc.route(noc.mesh(4, 4), "xy")


def test_mesh_stays_connected_after_any_single_link_failure(mesh44):
    t = mesh44.topology
    uniform = noc.traffic.uniform(t.n)
    for a, b in t.physical_links():
        rep = noc.analyse_faults(mesh44, uniform, failed_links=[(a, b)])
        assert rep.reachable_fraction == 1.0 and rep.lost_pairs == []
        g = t.to_networkx()
        g.remove_edges_from([(a, b), (b, a)])
        assert nx.is_strongly_connected(g)          # the graph agrees: node connectivity of a mesh is 2
        # every detour is a shortest path in the damaged graph
        for s, d in [(a, b), (b, a)]:
            assert len(rep.routes.path(s, d)) - 1 == nx.shortest_path_length(g, s, d)


def test_fault_aware_router_finds_the_detour(mesh44):
    # 4 x 4 mesh, link 5-6 (row 1, between columns 1 and 2) fails: 4 -> 7 must leave row 1 and come back
    rep = noc.analyse_faults(mesh44, noc.traffic.uniform(16), failed_links=[(5, 6)])
    path = rep.routes.path(4, 7)
    assert len(path) - 1 == 5 and path[0] == 4 and path[-1] == 7
    assert all((a, b) not in [(5, 6), (6, 5)] for a, b in zip(path, path[1:]))
    assert rep.routes.path(0, 3) == mesh44.path(0, 3)       # routes that avoid the failure stay XY
    assert rep.rerouted_pairs > 0 and 0 < rep.throughput_retained < 1


def test_xy_alone_reports_the_pairs_it_can_no_longer_serve(mesh44):
    t = mesh44.topology
    broken = {t.link_id(5, 6), t.link_id(6, 5)}
    expected = sorted((s, d) for s in range(16) for d in range(16)
                      if broken & set(mesh44.links(s, d).tolist()))
    rep = noc.analyse_faults(mesh44, noc.traffic.uniform(16), failed_links=[(5, 6)], detour=False)
    assert sorted(rep.lost_pairs) == expected and len(expected) > 0
    assert rep.reachable_fraction == pytest.approx(1 - len(expected) / (16 * 15))
    plain = noc.fault_routes(mesh44, failed_links=[(5, 6)], detour=False)
    assert sorted(plain.unserved()) == expected


def test_failed_chiplet_is_routed_around_and_its_traffic_moves():
    r = noc.route(noc.mesh(3, 3), "xy")
    rep = noc.analyse_faults(r, noc.traffic.uniform(9), failed_nodes=[4])      # the centre
    assert rep.reachable_fraction == 1.0
    assert 4 not in rep.routes.path(3, 5)
    assert len(rep.routes.path(3, 5)) - 1 == 4
    assert rep.routes.hops[4, 0] == -1
    corner = noc.analyse_faults(r, noc.traffic.uniform(9), failed_nodes=[0], detour=False)
    # XY turns at corner 0 going west then south: 1, 2 -> 3, 6 are lost, nothing else
    assert sorted(corner.lost_pairs) == [(1, 3), (1, 6), (2, 3), (2, 6)]
    assert noc.analyse_faults(r, noc.traffic.uniform(9), failed_nodes=[0]).lost_pairs == []


def test_cut_vertex_failure_splits_a_graph():
    chain = noc.route(noc.from_links(4, [(0, 1), (1, 2), (2, 3)]), "shortest")
    rep = noc.analyse_faults(chain, noc.traffic.uniform(4), failed_nodes=[1])
    assert (0, 2) in rep.lost_pairs and (2, 3) not in rep.lost_pairs
    assert rep.reachable_fraction == pytest.approx(2 / 6)


def test_monte_carlo_is_seeded_and_agrees_with_enumeration(mesh44):
    t = mesh44.topology
    uniform = noc.traffic.uniform(16)
    a = noc.monte_carlo_faults(mesh44, uniform, trials=300, seed=7, link_failures=1)
    b = noc.monte_carlo_faults(mesh44, uniform, trials=300, seed=7, link_failures=1)
    assert np.array_equal(a.throughput_retained, b.throughput_retained)
    assert (a.reachable_fraction == 1.0).all()
    exact = np.mean([noc.analyse_faults(mesh44, uniform, failed_links=[l]).throughput_retained
                     for l in t.physical_links()])
    assert a.throughput_retained.mean() == pytest.approx(exact, rel=0.05)
    plain = noc.monte_carlo_faults(mesh44, uniform, trials=200, seed=1, link_failures=2, detour=False)
    assert (plain.reachable_fraction < 1.0).all()
    nodes = noc.monte_carlo_faults(mesh44, uniform, trials=50, seed=3, chiplet_failures=2)
    assert (nodes.throughput_retained <= 1.0).all() and nodes.summary()["trials"] == 50


@pytest.mark.parametrize("kwargs,message", [
    ({"trials": 0}, "trials"), ({"link_failures": 99}, "link_failures"), ({"link_fail_prob": 2.0}, "link_fail_prob"),
])
def test_monte_carlo_rejects_bad_input(mesh44, kwargs, message):
    with pytest.raises(noc.NocError, match=message):
        noc.monte_carlo_faults(mesh44, noc.traffic.uniform(16), **kwargs)
    with pytest.raises(noc.NocError, match="no link"):
        noc.analyse_faults(mesh44, noc.traffic.uniform(16), failed_links=[(0, 5)])
