"""Sustained bandwidth, row-hit rate and latency against hand-computed cases and queueing theory."""
import math

import numpy as np
import pytest

import memory

HBM3 = memory.memory_preset("hbm3")
DDR4 = memory.memory_preset("ddr4")
HBM2 = memory.memory_preset("hbm2")
LPDDR5 = memory.memory_preset("lpddr5")

# HBM3 by hand (memory/data/memory.yaml): tBL 1.25 ns; activation interval per pseudo-channel
# max(tRC/banks, tRRD/ranks, tFAW/4) = max(45/32, 2.5/1, 15/4) = 3.75 ns; the row-command bus, shared by
# 2 pseudo-channels, needs 2 x 1.25 ns per miss (not binding); refresh blocks tRFC + tRP + tRCD =
# 350 + 16.25 + 19.375 ns of every 3900 ns.
HBM3_REFRESH = 1 - (350 + 16.25 + 19.375) / 3900


def test_all_row_hits_run_at_the_bus_rate_less_refresh():
    assert memory.efficiency(HBM3, 1.0) == pytest.approx(HBM3_REFRESH)
    assert memory.effective_bandwidth_Bps(HBM3, 4, 1.0) == pytest.approx(4 * 819.2e9 * HBM3_REFRESH)


def test_all_row_misses_are_limited_by_the_activation_window():
    # one activation per burst, at most one per tFAW/4 = 3.75 ns, bursts need 1.25 ns: 1/3 of the bus
    assert memory.efficiency(HBM3, 0.0) == pytest.approx(HBM3_REFRESH * 1.25 / 3.75)
    # DDR4, 2 ranks: max(46.25/32, 2.5/2, 21.25/8) = 2.65625 ns per activation, but every burst opens a
    # row in a random rank, half the time the other one: tBL + tCS/2 = 2.5 + 1.25/2 = 3.125 ns binds
    assert memory.efficiency(DDR4, 0.0) == pytest.approx((1 - (550 + 2 * 13.75) / 7800) * 2.5 / 3.125)
    # one rank: no switches, and the activation window alone (tFAW/4 = 5.3125 ns) binds
    one_rank = memory.memory_preset("ddr4", {"ranks": 1, "banks": 16})
    assert memory.efficiency(one_rank, 0.0) == pytest.approx((1 - (550 + 2 * 13.75) / 7800) * 2.5 / 5.3125)


def test_all_row_misses_limited_by_the_command_bus():
    # HBM2: ACT + PRE hold the row bus 2.5 ns per miss, and both pseudo-channels share it: 5 ns a burst,
    # more than the 4.165 ns activation interval (tRRD)
    refresh = 1 - (350 + 2 * 14.16) / 3900
    assert memory.efficiency(HBM2, 0.0) == pytest.approx(refresh * (4 / 2.4) / 5.0, rel=1e-3)   # tBL = BL4 at 2.4 Gb/s
    # LPDDR5: one CA bus for RD (1.25 ns) and ACT-1, ACT-2, PRE (3.75 ns); at h = 0.5 a burst needs
    # 1.25 + 0.5 x 3.75 = 3.125 ns of commands for 2.5 ns of data
    refresh = 1 - (280 + 2 * 18.75) / 3906
    assert memory.efficiency(LPDDR5, 0.5) == pytest.approx(refresh * 2.5 / 3.125)


def test_a_mix_of_hits_and_misses():
    # h = 0.5: 0.5 x 3.75 = 1.875 ns of activations per burst > 1.25 ns: 2/3 of the bus
    assert memory.efficiency(HBM3, 0.5) == pytest.approx(HBM3_REFRESH * 1.25 / 1.875)
    # the knee: activations hide behind the bus once (1 - h) 3.75 <= 1.25, i.e. h >= 2/3
    assert memory.efficiency(HBM3, 2 / 3) == pytest.approx(HBM3_REFRESH)
    assert memory.efficiency(HBM3, 0.75) == pytest.approx(HBM3_REFRESH)
    curve = [memory.efficiency(HBM3, h) for h in np.linspace(0, 1, 21)]
    assert all(b >= a for a, b in zip(curve, curve[1:]))      # never falls as hits rise


@pytest.mark.parametrize("run,expected", [
    (math.inf, 1 - 32 / 1024),                  # a stream opens one row per 32 bursts
    (32, 0.0),                                  # one burst: always a miss
    (64, 1 - (1 + 1 / 32) / 2),                 # two bursts: the second hits unless it crosses a row
    (4096, 1 - (1 + 127 / 32) / 128),
])
def test_row_hit_rate_of_runs(run, expected):
    assert memory.row_hit_rate_of_run(run, 32, 1024) == pytest.approx(expected)
    # on the device, refresh closes the 32 open rows of a pseudo-channel every 3900 / 1.25 = 3120 bursts
    assert memory.row_hit_rate(HBM3, run) == pytest.approx(expected * (1 - 32 / 3120))


def test_row_hit_rate_matches_random_placement_of_runs():
    """Monte Carlo: runs of n bursts starting at a random burst of a 32-burst row."""
    rng = np.random.default_rng(0)
    for n in (2, 5, 40, 100):
        start = rng.integers(0, 32, size=200_000)
        rows_opened = (start + n - 1) // 32 + 1
        simulated = 1 - rows_opened.mean() / n
        assert memory.row_hit_rate_of_run(n * 32, 32, 1024) == pytest.approx(simulated, abs=0.003)


def test_unloaded_latency_by_hand():
    assert memory.access_latency_s(HBM3, 1.0) == pytest.approx((12.5 + 1.25) * 1e-9)
    assert memory.access_latency_s(HBM3, 0.0) == pytest.approx((12.5 + 1.25 + 16.25 + 19.375) * 1e-9)


def _md1_simulated_wait(rho: float, service: float, n: int = 200_000) -> float:
    """Lindley's recursion W_{k+1} = max(0, W_k + S - A_{k+1}) with Poisson arrivals."""
    gaps = np.random.default_rng(1).exponential(service / rho, size=n)
    w, total = 0.0, 0.0
    for a in gaps:
        w = max(0.0, w + service - a)
        total += w
    return total / n


@pytest.mark.parametrize("rho", [0.3, 0.6, 0.8])
def test_queueing_is_md1(rho):
    service = 2e-9
    formula = rho * service / (2 * (1 - rho))            # Pollaczek-Khinchine, deterministic service
    assert memory.md1_wait_s(rho, service) == pytest.approx(formula)
    assert memory.md1_wait_s(rho, service) == pytest.approx(_md1_simulated_wait(rho, service), rel=0.06)


def test_loaded_latency_adds_the_channel_queue():
    h = memory.row_hit_rate(HBM3)
    service = HBM3.tBL_s / memory.efficiency(HBM3, h)
    for rho in (0.0, 0.5, 0.9):
        assert memory.access_latency_s(HBM3, h, rho) == pytest.approx(
            memory.access_latency_s(HBM3, h) + rho * service / (2 * (1 - rho)))
    assert memory.access_latency_s(HBM3, h, 1.0) == math.inf


def test_array_kernels_match_the_scalar_api():
    dev = memory.device(HBM3)
    runs = np.array([32.0, 64.0, 4096.0, np.inf])
    hits = memory.row_hit_rate_array(runs, dev)
    units = np.array([1.0, 2.0, 3.0, 8.0])
    rho = np.array([0.0, 0.5, 0.8, 0.95])
    bw = memory.effective_bandwidth_array_Bps(hits, units, dev)
    lat = memory.loaded_latency_array_s(hits, rho, dev)
    for i in range(4):
        assert hits[i] == pytest.approx(memory.row_hit_rate(HBM3, runs[i]))
        assert bw[i] == pytest.approx(memory.effective_bandwidth_Bps(HBM3, units[i], hits[i]))
        assert lat[i] == pytest.approx(memory.access_latency_s(HBM3, hits[i], rho[i]))


def test_streaming_beats_scattered_on_every_preset():
    for kind in memory.memory_kinds():
        spec = memory.memory_preset(kind)
        stream = memory.efficiency(spec)
        scattered = memory.efficiency(spec, memory.row_hit_rate(spec, memory.SCATTERED_BYTES))
        assert 0.8 < stream < 1.0, kind
        assert scattered <= stream, kind
