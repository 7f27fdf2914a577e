"""Topologies: channel counts, technologies per link, networkx round trip, bad input."""
import networkx as nx
import numpy as np
import pytest

import noc


@pytest.mark.parametrize("rows,cols", [(1, 1), (1, 5), (3, 4), (4, 4)])
def test_mesh_and_torus_channel_counts(rows, cols):
    m = noc.mesh(rows, cols)
    assert m.n_links == 2 * (rows * (cols - 1) + cols * (rows - 1))
    t = noc.torus(rows, cols)
    wraps = (rows if cols >= 3 else 0) + (cols if rows >= 3 else 0)
    assert t.n_links == m.n_links + 2 * wraps
    g = m.to_networkx()
    assert nx.is_strongly_connected(g) or m.n == 1
    assert all(g.has_edge(b, a) for a, b in g.edges)


def test_technology_per_link_and_phy_area():
    t = noc.mesh(2, 2, "ucie-advanced", overrides={(0, 1): "serdes-long-reach"})
    slow = noc.link_tech("serdes-long-reach")
    fast = noc.link_tech("ucie-advanced")
    assert t.link_bw_Bps[t.link_id(0, 1)] == slow.bandwidth_Bps
    assert t.link_bw_Bps[t.link_id(1, 0)] == slow.bandwidth_Bps
    assert t.link_bw_Bps[t.link_id(0, 2)] == fast.bandwidth_Bps
    area = noc.phy_area_mm2(t)
    assert area[0] == pytest.approx(slow.phy_area_mm2 + fast.phy_area_mm2)
    assert area[3] == pytest.approx(2 * fast.phy_area_mm2)


def test_every_technology_has_sane_figures():
    for name in noc.link_kinds():
        tech = noc.link_tech(name)
        assert tech.bandwidth_Bps > 1e9 and 0 < tech.latency_s < 1e-6
        assert 0 < tech.energy_j_per_byte < 100e-12 and 0 < tech.bond_yield <= 1 and tech.phy_area_mm2 > 0
    assert noc.link_kinds()[0] == "ucie-advanced"


def test_graph_from_links_and_networkx():
    ring = nx.cycle_graph(5)
    ring.edges[0, 1]["tech"] = "organic-substrate"
    t = noc.from_networkx(ring)
    assert t.kind == "graph" and t.n == 5 and t.n_links == 10
    assert t.link_tech[t.link_id(1, 0)] == "organic-substrate"
    r = noc.route(t, "shortest")
    lengths = dict(nx.all_pairs_shortest_path_length(ring))
    assert all(r.hops[a, b] == lengths[a][b] for a in range(5) for b in range(5))


@pytest.mark.parametrize("call,message", [
    (lambda: noc.mesh(0, 3), "rows >= 1"),
    (lambda: noc.mesh(2, 2, "carrier-pigeon"), "allowed: ucie-advanced"),
    (lambda: noc.mesh(2, 2, overrides={(0, 3): "ucie-standard"}), "not neighbours"),
    (lambda: noc.from_links(3, [(0, 3)]), "links[0]: chiplet ids must be in 0..2"),
    (lambda: noc.from_links(3, [(0, 1), (1, 0)]), "links[1]: chiplets 1 and 0 are already linked"),
    (lambda: noc.from_links(3, [(1, 1)]), "two different chiplets"),
    (lambda: noc.from_links(3, [(0, 1, "warp-drive")]), "links[0] technology: unknown link technology"),
    (lambda: noc.build("ring", 2, 2), "allowed: mesh, torus, graph"),
    (lambda: noc.route(noc.from_links(2, [(0, 1)]), "xy"), "use 'shortest'"),
    (lambda: noc.route(noc.mesh(2, 2), "adaptive"), "allowed: xy, shortest"),
])
def test_bad_input_names_the_problem(call, message):
    with pytest.raises(noc.NocError, match=None) as info:
        call()
    assert message in str(info.value)


def test_disconnected_graph_reports_unreachable_pairs():
    r = noc.route(noc.from_links(4, [(0, 1), (2, 3)]), "shortest")
    assert not r.reachable[0, 2] and r.hops[0, 2] == -1
    assert (0, 2) in r.unserved()
    assert np.isinf(noc.zero_load_latency_s(r, 64)[0, 3])
