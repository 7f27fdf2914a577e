"""Mesh figures against Dally & Towles."""
import numpy as np
import pytest

import noc


@pytest.mark.parametrize("k", [2, 3, 4, 8])
def test_average_hops_uniform_matches_textbook(k):
    assert noc.average_hops_uniform(k, k) == pytest.approx(2 * (k * k - 1) / (3 * k))


def test_xy_loads_of_a_transpose_pair():
    traffic = np.zeros((4, 4))
    traffic[0, 3] = 10.0     # (0,0) -> (1,1) on a 2 x 2 mesh: east then south
    loads = noc.xy_link_loads(traffic, 2)
    assert loads.sum() == 20.0
    assert loads[0 * 4 + 0] == 10.0 and loads[1 * 4 + 2] == 10.0


def test_md1_wait():
    assert noc.md1_wait(0.5, 2.0) == pytest.approx(1.0)
    assert noc.md1_wait(1.0, 2.0) == np.inf
