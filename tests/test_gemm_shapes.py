"""GEMM and fused-attention kernels by shape (issue 35, item 3): waves by hand, each block's prologue and
epilogue, FlashAttention's steps and floor; each source's calibration and validation errors (dse.validation.gemm,
dse.validation.h200)."""
import math

import numpy as np
import pytest

import arch
from arch.gpu import N_GPU_FIELDS, gpu_attention, gpu_gemm
from dse.validation import gemm, h200


def _gemm(M, N, K, sms=132.0, flops=4096.0, eff=0.8, tile_cycles=0.0):
    out = np.zeros(N_GPU_FIELDS)
    gpu_gemm(float(M), float(N), float(K), 1.0, sms, flops, eff, 50 * 2.0 ** 20, 228 * 1024.0, 2.0, tile_cycles, out)
    return out


def test_wave_quantisation_by_hand():
    # NVIDIA, Matrix Multiplication Background User's Guide (DU-09799-001), section 3: tiles run in waves of
    # the SM count, so one tile more than a whole wave costs a whole extra wave. M = 2,048, N = 4,096 in
    # 128 x 256 tiles: 16 x 16 = 256 tiles, 2 waves of 132 SMs; each tile 2 x 128 x 256 x 4,096 / 4,096
    # FLOPs a cycle = 65,536 cycles at full rate; at 80 % and 1,000 cycles of prologue and epilogue a tile:
    r = _gemm(2048, 4096, 4096, tile_cycles=1000.0)
    assert (r[8] * r[9], r[11], r[10]) == (128 * 256, 2.0, 1.0)
    assert r[0] == pytest.approx(2 * (65536 / 0.8 + 1000.0))
    assert _gemm(2048, 4096, 4096)[0] == pytest.approx(2 * 65536 / 0.8)
    # 128 rows more: 17 x 16 = 272 such tiles need a third wave (3 x 81,920 cycles); as cuBLAS does, the
    # model takes the tile whose waves cost least: 64 x 64, 34 x 64 = 2,176 tiles in 17 waves of 8,192 / 0.8
    r = _gemm(2048 + 128, 4096, 4096)
    assert (r[8], r[9], r[11]) == (64.0, 64.0, 17.0)
    assert r[0] == pytest.approx(17 * 8192 / 0.8) and r[0] < 3 * 65536 / 0.8


def test_short_k_reaches_less_of_peak_with_a_block_overhead():
    # a block's prologue and epilogue do not shrink with K: Vidur's H100 kernels at M = 2,048, N = 4,096 take
    # 95.0 us at K = 4,096 (73 % of peak) and 215.5 us at K = 11,008 (87 %)
    # (arch/data/calibration/h100_gemm_vidur.csv); the source's fit gives both within 8 %
    import pandas as pd
    from arch import calibrate as C

    rows = pd.DataFrame({"M": [2048.0, 2048.0], "N": [4096.0, 4096.0], "K": [4096.0, 11008.0], "batch": [1.0, 1.0],
                         "precision": ["fp16", "fp16"], "measured_us": [95.0, 215.5]})
    h100 = C.with_values(arch.preset("h100-like"), gemm.FITS["vidur-h100"])
    modelled = C.predict_us(h100, rows, gemm.sustained_bandwidth_Bps("h100-like"))
    assert modelled == pytest.approx(rows["measured_us"].to_numpy(), rel=0.08)
    rate = 2 * 2048 * 4096 * rows["K"].to_numpy() / modelled
    assert rate[1] / rate[0] > 1.1


def test_flash_attention_steps_by_hand():
    # FlashAttention-3 (Shah et al. 2024), section 3: at head dim 128 an H100 SM's exponentials (16 a clock,
    # CUDA C Programming Guide throughput table) take half the time of its two GEMMs at full rate
    cycles, units, steps = gpu_attention(128.0, 128.0, 128.0, 1.0, 1.0, 132.0, 4096.0, 1.0, 16.0, 228 * 1024.0,
                                         2.0, 0.0)
    matmul = 4 * 128 * 128 * 128 / 4096
    assert (units, steps) == (1.0, 1.0)
    assert cycles == pytest.approx(1.5 * matmul)
    # causal prefill of 8,192 tokens, 32 heads (8 KV heads x 4): 2,048 blocks of 128 query rows, 64 key
    # blocks each at most; about half visited, spread over 132 SMs: more than the longest chain of 64
    _, units, steps = gpu_attention(4 * 8192.0, 8192.0, 128.0, 8.0, 0.5, 132.0, 4096.0, 0.8, 16.0, 228 * 1024.0,
                                    2.0, 0.0)
    assert units == 2048 and steps == pytest.approx(2048 * 64 * (0.5 + 0.5 / 64) / 132)
    # decode of one sequence over 1,024 keys: 8 blocks (one per KV head) split 8 ways (8 key blocks), one step
    _, units, steps = gpu_attention(4.0, 1024.0, 128.0, 8.0, 1.0, 132.0, 4096.0, 0.8, 16.0, 228 * 1024.0, 2.0, 0.0)
    assert (units, steps) == (64.0, 1.0)


@pytest.fixture(scope="module")
def h200_suite():
    return h200.errors()


def test_h200_attention_floor(h200_suite):
    # measured on one H200 (dse/validation/data/h200_attention_bf16.csv): batch-1 kernels take 11-14 us;
    # fitted on the four under 20 us, the other eight (prefill of 2,048-8,192 tokens, decode of 8-128
    # sequences) within 8 % geomean
    assert h200_suite["attention"]["calibration"] < 0.12
    assert h200_suite["attention"]["validation"] < 0.08
    assert h200.fit_attention_overhead_us() == pytest.approx(arch.preset("h200-like").attention_overhead_s * 1e6,
                                                             abs=0.1)


#: per source: (calibration, validation) geometric-mean error bounds (docs/validation.md has the figures)
BOUNDS = {"vidur-h100": (0.06, 0.085), "vidur-a100": (0.035, 0.075), "llmcompass-a100": (0.035, 0.045)}


def test_each_source_within_its_bounds():
    from dse.validation.common import errors_by_set

    cases = gemm.cases()
    for source, (cal, val) in BOUNDS.items():
        errors = errors_by_set([c for c in cases if c.metric == source])
        assert errors["calibration"] < cal and errors["validation"] < val, (source, errors)
    assert sum(c.set == "calibration" for c in cases) == 34 and len(cases) == 100


@pytest.mark.parametrize("source", sorted(gemm.SOURCES))
def test_fits_are_what_dse_calibrate_chooses(source):
    fitted = gemm.fit(source)
    for field, value in gemm.FITS[source].items():
        assert fitted[field] == pytest.approx(value, rel=0.02, abs=0.02), field
    assert all(math.isfinite(v) for v in fitted.values())
