"""Collectives as traffic, against the alpha-beta textbook costs; energy and latency of traffic."""
import math

import numpy as np
import pytest

import noc


def test_ring_allreduce_on_a_ring_is_2_p_minus_1_alpha_plus_d_over_pb():
    p, D = 8, 64e6
    t = noc.torus(1, p)                       # a bidirectional ring of 8 chiplets
    r = noc.route(t, "xy")
    alpha, b = t.link_hop_latency_s[0], t.link_bw_Bps[0]
    c = noc.ring_allreduce(range(p), D, p)
    assert noc.collective_time_s(r, c) == pytest.approx(2 * (p - 1) * (alpha + D / (p * b)))
    assert c.total_bytes == pytest.approx(2 * (p - 1) * D)
    e = t.link_hop_energy_j_per_byte[0]
    assert noc.collective_energy_j(r, c) == pytest.approx(2 * (p - 1) * D * e)


def test_ring_allreduce_mapped_badly_pays_for_contention():
    t = noc.mesh(1, 4)
    r = noc.route(t, "xy")
    good = noc.collective_time_s(r, noc.ring_allreduce([0, 1, 2, 3], 1e6, 4))
    bad = noc.collective_time_s(r, noc.ring_allreduce([0, 2, 1, 3], 1e6, 4))
    assert bad > good


def test_tree_and_broadcast_phase_counts():
    for p in (2, 5, 8, 13):
        tree = noc.tree_allreduce(range(p), 1.0, 16)
        assert len(tree.phases) == 2 * int(math.floor(math.log2(p)))
        bc = noc.broadcast(range(p), 1.0, 16)
        assert len(bc.phases) == math.ceil(math.log2(p))
        assert bc.total_bytes == p - 1
    assert noc.gather(range(4), 2.0, 4).total_bytes == 6.0


def test_broadcast_on_a_line_of_neighbours():
    t = noc.mesh(1, 4)
    r = noc.route(t, "xy")
    alpha, b = t.link_hop_latency_s[0], t.link_bw_Bps[0]
    D = 1e6
    # binomial: 0 -> 1 (1 hop), then 0 -> 2 (2 hops, shares channel 0->1) and 1 -> 3 (2 hops): both cross 1 -> 2
    assert noc.collective_time_s(r, noc.broadcast(range(4), D, 4)) == pytest.approx(
        (alpha + D / b) + (2 * alpha + 2 * D / b))


def test_all_to_all_is_bisection_bound_on_a_mesh():
    k, D = 4, 1e6
    t = noc.mesh(k, k)
    r = noc.route(t, "xy")
    c = noc.all_to_all(range(k * k), D, k * k)
    serial = r.link_loads(c.phases[0].traffic).max() / t.link_bw_Bps[0]
    # XY loads the middle row channels with (k/2)(k/2) k pairs' worth: (k/2 sources) x (k/2 columns) x k rows
    assert serial == pytest.approx(k // 2 * k // 2 * k * D / t.link_bw_Bps[0])
    hops = np.where(r.reachable, r.hops, 0)
    assert noc.traffic_energy_j(r, c.phases[0].traffic) == pytest.approx(
        D * hops.sum() * t.link_hop_energy_j_per_byte[0])


def test_energy_per_bit_follows_the_technology():
    t = noc.mesh(1, 3, "ucie-advanced", overrides={(1, 2): "serdes-long-reach"})
    r = noc.route(t, "xy")
    e = noc.energy_per_bit_j(r)
    adv, lr = noc.link_tech("ucie-advanced"), noc.link_tech("serdes-long-reach")
    assert e[0, 2] == pytest.approx((adv.hop_energy_j_per_byte + lr.hop_energy_j_per_byte) / 8)


def test_latency_under_load_grows_as_md1():
    t = noc.mesh(1, 2)
    r = noc.route(t, "xy")
    b = t.link_bw_Bps[0]
    traffic = np.array([[0.0, 0.5 * b], [0.0, 0.0]])
    lat = noc.loaded_latency(r, traffic, packet_bytes=64)
    service = 64 / b
    assert lat.pair_latency_s[0, 1] == pytest.approx(t.link_hop_latency_s[0] + service + 0.5 * service / (2 * 0.5))
    assert lat.max_utilisation == pytest.approx(0.5)
    over = noc.loaded_latency(r, 2 * traffic, packet_bytes=64)
    assert over.saturated and np.isinf(over.average_latency_s)


def test_collective_participants_are_checked():
    with pytest.raises(noc.NocError, match="distinct"):
        noc.all_to_all([0, 0, 1], 1.0, 4)
    with pytest.raises(noc.NocError, match="chiplets 0..3"):
        noc.ring_allreduce([0, 7], 1.0, 4)
