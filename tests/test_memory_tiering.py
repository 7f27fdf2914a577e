"""Expert read rates, direct-from-DDR and on-demand fetch costs, worked out by hand."""
import numpy as np
import pytest

import memory

GB = 1e9
HBM_BW, DDR_BW = 800 * GB, 40 * GB
HBM_E, DDR_E = 4e-12 * 8, 12e-12 * 8


def test_selection_read_bytes_is_the_chance_any_token_picks_the_expert():
    w = np.array([1.0, 2.0, 3.0])
    q = np.array([0.5, 0.1, 0.0])
    assert memory.selection_read_bytes(w, q, 3).tolist() == pytest.approx([1 - 0.5**3, 2 * (1 - 0.9**3), 0.0])
    # one token: the expected read is weight x probability
    assert memory.selection_read_bytes(w, q, 1).tolist() == pytest.approx((w * q).tolist())


def test_direct_cost_serial_and_overlapped():
    t, e = memory.direct_cost(8 * GB, 2 * GB, HBM_BW, DDR_BW, HBM_E, DDR_E, False)
    assert t == pytest.approx(8 / 800 + 2 / 40)
    assert e == pytest.approx(8 * GB * HBM_E + 2 * GB * DDR_E)
    t, _ = memory.direct_cost(8 * GB, 2 * GB, HBM_BW, DDR_BW, HBM_E, DDR_E, True)
    assert t == pytest.approx(max(8 / 800, 2 / 40))


def test_perfect_prefetch_hidden_behind_compute_costs_only_hbm_time():
    t, e, staging = memory.on_demand_cost(8 * GB, 2 * GB, HBM_BW, DDR_BW, HBM_E, DDR_E, 1.0, 1.0, 32)
    assert t == pytest.approx(10 / 800)                       # 2 GB / 40 GB/s = 50 ms < 1 s window
    assert e == pytest.approx(2 * GB * (DDR_E + HBM_E) + 10 * GB * HBM_E)
    assert staging == pytest.approx(2 * 2 * GB / 32)
    direct_t, _ = memory.direct_cost(8 * GB, 2 * GB, HBM_BW, DDR_BW, HBM_E, DDR_E, False)
    assert t < direct_t


def test_bad_prediction_without_a_window_is_worse_than_reading_ddr_directly():
    t, e, _ = memory.on_demand_cost(8 * GB, 2 * GB, HBM_BW, DDR_BW, HBM_E, DDR_E, 0.0, 0.5, 32)
    # the whole prefetch is exposed (50 ms), half of it again on demand (25 ms), then HBM reads
    assert t == pytest.approx(2 / 40 + 0.5 * 2 / 40 + 10 / 800)
    assert e == pytest.approx(1.5 * 2 * GB * (DDR_E + HBM_E) + 10 * GB * HBM_E)
    direct_t, direct_e = memory.direct_cost(8 * GB, 2 * GB, HBM_BW, DDR_BW, HBM_E, DDR_E, False)
    assert t > direct_t and e > direct_e


def test_tiered_chiplets_combines_placement_and_costs():
    size = np.full(6, 1 * GB)
    read = memory.selection_read_bytes(size, np.array([0.9, 0.5, 0.3, 0.2, 0.1, 0.05]), 1)
    out = memory.tiered_chiplets(np.array([0, 3, 6]), size, read, np.array([2 * GB, 10 * GB]),
                                 np.array([HBM_BW, HBM_BW]), DDR_BW, HBM_E, DDR_E, np.array([0.0, 0.0]), 1.0, 1.0,
                                 False)
    # chiplet 0: experts 0 and 1 fit, expert 2 (0.3 GB read) is cold; chiplet 1 holds all of 3, 4, 5
    assert out[0, :3].tolist() == pytest.approx([1.4 * GB, 0.3 * GB, 1 * GB])
    assert out[1, :3].tolist() == pytest.approx([0.35 * GB, 0.0, 0.0])
    assert out[0, 3] == pytest.approx(1.4 / 800 + 0.3 / 40)
    assert out[1, 3] == pytest.approx(0.35 / 800)
    # on demand on chiplet 0: staging 2 x 0.3 GB leaves 1.4 GB for residents: expert 0 and 0.4 of expert 1
    hot, cold = 0.9 + 0.4 * 0.5, 0.6 * 0.5 + 0.3
    t, e, _ = memory.on_demand_cost(hot * GB, cold * GB, HBM_BW, DDR_BW, HBM_E, DDR_E, 0.0, 1.0, 1.0)
    assert out[0, 5] == pytest.approx(t) and out[0, 6] == pytest.approx(e)
