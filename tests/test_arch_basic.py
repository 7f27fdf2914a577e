"""Systolic model against hand calculations; chiplet and technology validation."""
import math

import numpy as np
import pytest

import arch
from arch import systolic as S


@pytest.mark.parametrize("dataflow,sr,sc,t", [("os", 100, 60, 30), ("ws", 30, 60, 100), ("is", 30, 100, 60)])
def test_gemm_cycles_by_hand(dataflow, sr, sc, t):
    # M=100, N=60, K=30 on 16 x 8: folds ceil(S_R/R) ceil(S_C/C); per fold R+C+T-2 (os), 2R+C+T-2 (ws, is)
    R, C = 16, 8
    per_fold = (R + C + t - 2) if dataflow == "os" else (2 * R + C + t - 2)
    expected = per_fold * math.ceil(sr / R) * math.ceil(sc / C)
    assert arch.gemm_cycles(100.0, 60.0, 30.0, R, C, S.DATAFLOW_CODE[dataflow]) == expected
    r = arch.simulate(100, 60, 30, R, C, dataflow)[0, 0]
    assert r[S.CYCLES] == expected
    assert r[S.UTIL] == pytest.approx(100 * 60 * 30 / (R * C * expected))
    assert r[S.MAP_EFF] == pytest.approx(sr * sc / (math.ceil(sr / R) * math.ceil(sc / C) * R * C))


def test_sram_and_dram_words_by_hand():
    # WS, M=64, N=32, K=48 on 16 x 16: row folds 3, col folds 2
    r = arch.simulate(64, 32, 48, 16, 16, "ws", sram_ifmap_words=1e9, sram_filter_words=1e9,
                      sram_ofmap_words=1e9, accumulate=False)[0, 0]
    assert r[S.SRAM_IF] == 2 * 64 * 48          # ifmap streamed once per column fold
    assert r[S.SRAM_FI] == 48 * 32              # each weight loaded once
    assert r[S.SRAM_OFW] == 3 * 64 * 32         # partial sums of each K fold
    assert (r[S.DRAM_IF], r[S.DRAM_FI], r[S.DRAM_OFW]) == (64 * 48, 48 * 32, 3 * 64 * 32)
    # ifmap 3072 words > half of a 4096-word buffer: re-streamed once per column fold
    small = arch.simulate(64, 32, 48, 16, 16, "ws", sram_ifmap_words=4096, accumulate=False)[0, 0]
    assert small[S.DRAM_IF] == 2 * 64 * 48
    # accumulating partial sums on chip: outputs written once, partial sums read back from SRAM
    acc = arch.simulate(64, 32, 48, 16, 16, "ws", sram_ofmap_words=1e9, accumulate=True)[0, 0]
    assert (acc[S.DRAM_OFW], acc[S.SRAM_OFR]) == (64 * 32, 2 * 64 * 32)


def test_input_stall_is_the_double_buffer_bound():
    # OS, ifmap 100 x 1000 re-read over 4 column folds, 20,000-word buffer, 4 words/cycle:
    # stall = (W - S/2)/bw - cycles (W - S/2)/W with W = 4 x 100,000
    M, N, K = 100, 64, 1000
    r = arch.simulate(M, N, K, 16, 16, "os", sram_ifmap_words=20000, bandwidth_words=4.0)[0, 0]
    W, cycles = 4 * M * K, r[S.CYCLES]
    assert r[S.DRAM_IF] == W
    assert r[S.STALL] == pytest.approx((W - 10000) / 4 - cycles * (W - 10000) / W)
    # before compute: the first half of the ifmap buffer and the whole filter (it fits its buffer)
    assert r[S.PREFETCH] == pytest.approx(max(10000, K * N) / 4)


def test_packing_narrow_operands_divides_the_reduction():
    one = arch.simulate(32, 32, 64, 8, 8, "os")[0, 0]
    two = arch.simulate(32, 32, 128, 8, 8, "os", pack=2)[0, 0]
    assert two[S.CYCLES] == one[S.CYCLES]
    ch = arch.SystolicChiplet(name="c", node="7nm", freq_hz=1e9, rows=8, cols=8, sram_bytes=1e6, pe_precision="bf16")
    assert ch.pack("int8") == 2 and ch.peak_flops("int8") == 2 * ch.peak_flops("bf16")
    with pytest.raises(arch.ArchError, match="fp32 operands are wider than its bf16 PEs"):
        ch.pack("fp32")


def test_batch_kernel_covers_every_pair():
    M = np.array([10.0, 64.0, 300.0]); N = np.array([20.0, 64.0, 7.0]); K = np.array([5.0, 64.0, 1000.0])
    out = arch.simulate(M, N, K, [4, 8], [4, 16], ["os", "is"])
    assert out.shape == (3, 2, len(S.FIELDS))
    for i in range(3):
        assert out[i, 1, S.CYCLES] == arch.gemm_cycles(M[i], N[i], K[i], 8, 16, 2)
    assert np.allclose(arch.cycles_table(M, N, K, np.array([4, 8]), np.array([4, 16]), np.array([0, 2])),
                       out[:, :, S.CYCLES])


def test_chiplet_validation_names_the_field():
    with pytest.raises(arch.ArchError, match="unknown dataflow 'xx'"):
        arch.SystolicChiplet(name="c", node="7nm", freq_hz=1e9, rows=8, cols=8, dataflow="xx", sram_bytes=1e6)
    with pytest.raises(arch.ArchError, match="unknown technology node '1nm'"):
        arch.SystolicChiplet(name="c", node="1nm", freq_hz=1e9, rows=8, cols=8, sram_bytes=1e6)
    with pytest.raises(arch.ArchError, match="unknown field 'sms' for kind systolic"):
        arch.build_chiplet({"name": "c", "kind": "systolic", "node": "7nm", "freq_ghz": 1, "array": [8, 8],
                            "sram_mb": 1, "sms": 4})
    with pytest.raises(arch.ArchError, match="missing sram_mb"):
        arch.build_chiplet({"name": "c", "kind": "systolic", "node": "7nm", "freq_ghz": 1, "array": [8, 8]})
    with pytest.raises(arch.ArchError, match="modes\\[1\\] uses 32768 PEs, more than the 16384"):
        arch.build_chiplet({"name": "r", "kind": "reconfigurable", "node": "7nm", "freq_ghz": 1, "array": [128, 128],
                            "sram_mb": 8, "modes": [{"array": [128, 128], "dataflow": "ws"},
                                                    {"array": [128, 128], "dataflow": "os", "arrays": 2}]})
    with pytest.raises(arch.ArchError, match="unknown chiplet preset 'z900-like'; available: a100-like"):
        arch.preset("z900-like")


def test_technology_overrides_replace_figures_and_reject_unknown_keys():
    base = arch.node("7nm")
    nd = arch.node("7nm", {"wafer_cost_usd": 12000, "mac_energy_pj": {"bf16": 0.5}})
    assert nd.wafer_cost_usd == 12000 and nd.mac_energy_pj["bf16"] == 0.5
    assert nd.mac_energy_pj["int8"] == base.mac_energy_pj["int8"]
    with pytest.raises(arch.ArchError, match="unknown technology override 'wafer_price'; allowed: mac_energy_pj"):
        arch.node("7nm", {"wafer_price": 1})
    with pytest.raises(arch.ArchError, match="mac_energy_pj.bf32: unknown precision"):
        arch.node("7nm", {"mac_energy_pj": {"bf32": 1}})
    with pytest.raises(arch.ArchError, match="chiplet 'c': technology override static_w_per_mm2: expected a non-negative"):
        arch.SystolicChiplet(name="c", node="7nm", freq_hz=1e9, rows=8, cols=8, sram_bytes=1e6,
                             overrides={"static_w_per_mm2": -1})


def test_sram_energy_interpolates_in_log_bank_size():
    nd = arch.node("7nm")          # table: 32 KB 0.1, 256 KB 0.3, 1 MB 0.9 pJ/B
    assert nd.sram_pj(256) == pytest.approx(0.3)
    assert nd.sram_pj(512) == pytest.approx(0.6)       # halfway between 256 KB and 1 MB in log2
    assert nd.sram_pj(64) == pytest.approx(0.1 + 0.2 / 3)
