"""Yield, known-good-die cost, area, energy and power against the reference figures and hand calculations."""
import math

import numpy as np
import pandas as pd
import pytest

import arch


def test_known_good_die_cost_matches_chiplet_actuary_check_values():
    # shared/reference/hardware.md: 7 nm, 100 mm² -> yield 0.914, $17.9; 800 mm² -> 0.499, $318.6
    assert arch.die_yield(100, 0.09) == pytest.approx(0.914, abs=5e-4)
    assert arch.die_yield(800, 0.09) == pytest.approx(0.499, abs=5e-4)
    assert arch.known_good_die_cost_usd(100, "7nm") == pytest.approx(17.9, abs=0.05)
    assert arch.known_good_die_cost_usd(800, "7nm") == pytest.approx(318.6, abs=0.05)


def test_dies_per_wafer_with_scribe_lane_and_edge_loss_by_hand():
    # (sqrt(100) + 0.2)^2 = 104.04 mm² per die; usable diameter 290 mm
    a = 104.04
    expected = math.pi * 145 ** 2 / a - math.pi * 290 / math.sqrt(2 * a)
    assert arch.dies_per_wafer(100) == pytest.approx(expected)
    assert arch.dies_per_wafer(100) == pytest.approx(571.7, abs=0.05)
    assert arch.kgd_cost(1e6, 9346.0, 0.09, 10.0, 300.0) == math.inf       # nothing fits


def test_kgd_cost_keeps_its_numba_signature_for_the_evaluator():
    # dse/model/evaluator.py calls kgd_cost(area, wafer_cost, d0, alpha, wafer_diameter) from Numba code
    import numba as nb

    @nb.njit
    def call(area):
        return arch.kgd_cost(area, 9346.0, 0.09, 10.0, 300.0)
    assert call(100.0) == pytest.approx(17.88, abs=0.01)


def _sa(**kw):
    fields = dict(name="sa", node="7nm", freq_hz=1e9, rows=64, cols=32, dataflow="ws", sram_bytes=8 * 2**20)
    fields.update(kw)
    return arch.SystolicChiplet(**fields)


def test_systolic_area_by_hand():
    # 7 nm bf16: 64 x 32 PEs x 300 µm² + 32 vector lanes x 900 µm² + 8 MB x 1.2 mm²/MB + 4 PHYs x 0.5 mm², +10 %
    blocks = 64 * 32 * 300e-6 + 32 * 900e-6 + 8 * 1.2 + 4 * 0.5
    assert arch.chiplet_area_mm2(_sa(), "bf16") == pytest.approx(blocks * 1.10)
    assert arch.static_power_w(_sa(), "bf16") == pytest.approx(blocks * 1.10 * 0.02)
    br = arch.area_breakdown_mm2(_sa(), "bf16")
    assert br["pe"] == pytest.approx(64 * 32 * 300e-6) and br["sram"] == pytest.approx(9.6)
    assert arch.chiplet_area_mm2(_sa(), "int8") < arch.chiplet_area_mm2(_sa(), "bf16")   # smaller PEs


def test_cost_follows_area_and_overrides():
    ch = _sa()
    assert arch.chiplet_cost_usd(ch) == pytest.approx(arch.known_good_die_cost_usd(arch.chiplet_area_mm2(ch), "7nm"))
    dear = _sa(overrides={"wafer_cost_usd": 2 * 9346})
    assert arch.chiplet_cost_usd(dear) == pytest.approx(2 * arch.chiplet_cost_usd(ch))
    with pytest.raises(arch.ArchError, match="exceeds the 858 mm² reticle limit"):
        arch.chiplet_cost_usd(_sa(rows=2048, cols=2048))


def test_gemm_energy_by_hand():
    # WS 64 x 32 array, GEMM 128 x 256 x 64, everything fits: MACs x (e_mac + (2 + 4) B x e_reg) + SRAM bytes x e_sram,
    # e_mac the 7 nm arithmetic (0.6 pJ) x the systolic class's overhead (1.786: the GPU fit / TPU v4's perf/W)
    ch = _sa()
    M, N, K = 128, 256, 64
    mc = arch.matrix_costs(ch, M, N, K, 1, "bf16")
    row_folds, col_folds = 1, 8
    sram_words = col_folds * M * K + K * N + row_folds * M * N
    nd = arch.node("7nm")
    expected_pj = M * N * K * (0.6 * 1.786 + 6 * 0.02) + sram_words * 2 * nd.sram_pj(256)
    assert mc.sram_bytes[0] == sram_words * 2
    assert mc.energy_j[0] == pytest.approx(expected_pj * 1e-12)
    # double-buffered weights (the default): 2R + C - 2 + folds T + (folds - 1) max(0, R - T), T = M = 128 > R
    assert mc.time_s[0] == pytest.approx((2 * 64 + 32 - 2 + col_folds * M) / 1e9)
    # single-buffered, SCALE-Sim's fold after fold: folds (2R + C + T - 2)
    single = arch.matrix_costs(_sa(weight_buffering="single"), M, N, K, 1, "bf16")
    assert single.time_s[0] == pytest.approx(col_folds * (2 * 64 + 32 + M - 2) / 1e9)


def test_peak_dynamic_power_by_hand():
    ch = _sa()
    nd = arch.node("7nm")
    macs = 64 * 32 * 1e9
    edges = (64 + 2 * 32) * 2 * 1e9
    # the MAC and the vector unit's FP32 operation both at the systolic class's overhead (1.786)
    expected = (macs * (0.6 * 1.786 + 6 * 0.02) + edges * nd.sram_pj(256) + 32 * 1e9 * 2.4 / 2 * 1.786) * 1e-12
    assert arch.peak_dynamic_power_w(ch, "bf16") == pytest.approx(expected)


def test_op_costs_interface_and_dram_rules():
    ops = pd.DataFrame([
        dict(engine="matrix", M=16, N=4096, K=4096, batch=1, elements=0, flops=2 * 16 * 4096 * 4096,
             weight_bytes=4096 * 4096 * 2, act_in_bytes=16 * 4096 * 2, act_out_bytes=16 * 4096 * 2,
             kv_read_bytes=0, kv_write_bytes=0),
        dict(engine="vector", M=0, N=0, K=0, batch=1, elements=16 * 4096, flops=5 * 16 * 4096,
             weight_bytes=0, act_in_bytes=16 * 4096 * 2, act_out_bytes=16 * 4096 * 2, kv_read_bytes=0, kv_write_bytes=0),
    ])
    chips = [_sa(), arch.preset("h100-like"), arch.preset("zen4-ccd-like"), arch.preset("sa-fission-128")]
    t = arch.op_costs(ops, chips, "bf16")
    for field in ("time_s", "energy_j", "dram_bytes", "sram_bytes", "utilisation", "mode"):
        assert getattr(t, field).shape == (2, 4)
    assert (t.time_s > 0).all() and (t.energy_j > 0).all()
    # weights fit every chiplet's weight-side buffer stream once; activations fit on chip
    assert np.allclose(t.dram_bytes[0], 4096 * 4096 * 2)
    assert (t.dram_bytes[1] == 0).all()
    # vector op: 5 FLOPs per element on the elementwise unit (32 lanes at 1 GHz on the systolic chiplet)
    assert t.time_s[1, 0] == pytest.approx(5 * 16 * 4096 / 32e9)
    assert t.mode[0, 3] in (0, 1) and t.mode[0, 0] == -1
    assert (t.utilisation <= 1.0 + 1e-9).all()
