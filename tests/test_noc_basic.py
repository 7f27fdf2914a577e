"""Mesh and torus figures against Dally & Towles ("Principles and Practices of Interconnection Networks")."""
import itertools

import numpy as np
import pytest

import noc


def mean_distance(k: int, wrap: bool) -> float:
    """Mean |x - y| over x, y uniform in 0..k-1 (ring distance when wrapping), by enumeration."""
    d = [min(abs(x - y), k - abs(x - y)) if wrap and k >= 3 else abs(x - y) for x in range(k) for y in range(k)]
    return sum(d) / k**2


@pytest.mark.parametrize("k", [2, 3, 4, 5, 8])
def test_average_hops_uniform_matches_textbook(k):
    assert noc.average_hops_uniform(k, k) == pytest.approx(2 * (k * k - 1) / (3 * k))


@pytest.mark.parametrize("rows,cols", [(2, 5), (3, 4), (1, 6)])
def test_average_hops_of_a_rectangle_is_the_sum_over_dimensions(rows, cols):
    per_dim = (rows**2 - 1) / (3 * rows) + (cols**2 - 1) / (3 * cols)     # (k^2 - 1) / (3k) per dimension
    assert noc.average_hops_uniform(rows, cols) == pytest.approx(per_dim)
    assert noc.average_hops_uniform(rows, cols, include_self=False) == pytest.approx(
        per_dim * rows * cols / (rows * cols - 1))


@pytest.mark.parametrize("k", [3, 4, 5, 6])
def test_torus_average_hops(k):
    # k/4 per dimension for even k, (k^2 - 1)/(4k) for odd k (Dally & Towles sec. 5.2.2)
    per_dim = k / 4 if k % 2 == 0 else (k * k - 1) / (4 * k)
    r = noc.route(noc.torus(k, k), "xy")
    assert r.average_hops() == pytest.approx(2 * per_dim)
    assert per_dim == pytest.approx(mean_distance(k, True))


@pytest.mark.parametrize("k", [2, 4, 6, 8])
def test_uniform_saturation_under_xy_is_4b_over_k(k):
    t = noc.mesh(k, k)
    b = t.link_bw_Bps[0]
    sat = noc.saturation(noc.route(t, "xy"), noc.traffic.uniform(k * k))
    assert sat.injection_Bps == pytest.approx(4 * b / k)
    assert sat.aggregate_Bps == pytest.approx(k * k * 4 * b / k)


@pytest.mark.parametrize("k", [4, 8, 12])
def test_torus_uniform_saturation_is_8b_over_k(k):
    t = noc.torus(k, k)
    sat = noc.saturation(noc.route(t, "xy"), noc.traffic.uniform(k * k))
    assert sat.injection_Bps == pytest.approx(8 * t.link_bw_Bps[0] / k)


def test_torus_with_k_2_mod_4_stays_below_the_split_bound():
    # one path per pair cannot split the k/2-apart ties evenly when k/2 is odd
    t = noc.torus(6, 6)
    sat = noc.saturation(noc.route(t, "xy"), noc.traffic.uniform(36))
    assert 0.8 * 8 / 6 < sat.injection_Bps / t.link_bw_Bps[0] < 8 / 6


@pytest.mark.parametrize("k", [2, 4])
def test_mesh_bisection_is_k_channels_per_direction(k):
    t = noc.mesh(k, k)
    bis = noc.bisection(t)
    assert bis.exact and bis.links == k
    assert bis.bandwidth_Bps == pytest.approx(k * t.link_bw_Bps[0])
    assert noc.bisection_links(k, k) == k


def test_bisection_of_rectangles_tori_and_big_meshes():
    assert noc.bisection(noc.mesh(2, 6)).links == 2
    assert noc.bisection(noc.mesh(3, 3)).links == 4           # odd k: a 4/5 split needs a jagged cut
    assert noc.bisection(noc.torus(4, 4)).links == 8          # 2k: the wrap-around doubles it
    assert noc.bisection(noc.torus(3, 6)).links == 6
    big = noc.bisection(noc.mesh(8, 8))                       # beyond enumeration: the closed form
    assert big.links == 8 and big.exact


def test_exact_bisection_against_brute_force_on_a_small_graph():
    links = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (3, 4), (4, 5), (5, 0)]
    t = noc.from_links(6, links)
    best = min(sum(1 for a, b in links if (a in side) != (b in side))
               for side in map(set, itertools.combinations(range(6), 3)))
    assert noc.bisection(t).links == best


def test_md1_wait():
    assert noc.md1_wait(0.5, 2.0) == pytest.approx(1.0)
    assert noc.md1_wait(1.0, 2.0) == np.inf


def test_xy_loads_of_a_transpose_pair():
    traffic = np.zeros((4, 4))
    traffic[0, 3] = 10.0     # (0,0) -> (1,1) on a 2 x 2 mesh: east then south
    loads = noc.xy_link_loads(traffic, 2)
    assert loads.sum() == 20.0
    assert loads[0 * 4 + 0] == 10.0 and loads[1 * 4 + 2] == 10.0
