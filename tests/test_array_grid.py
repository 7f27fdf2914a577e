"""Issue 55: a systolic chiplet's arrays as a 2D grid (arch.grid): the grid's rows split K (ws), its columns N,
each array holding a block of the weights; links between neighbouring arrays add their fill and bound the time
by their traffic. The WSE-3 preset is its core mesh: 948 x 949 cores of 1 x 8 MACs joined by one-word links."""
from __future__ import annotations

import pytest

import arch
from arch.systolic import double_buffered_cycles


def _sa(**changes):
    spec = {"name": "g", "kind": "systolic", "node": "7nm", "freq_ghz": 1.0, "array": [4, 4], "dataflow": "ws",
            "sram_mb": 64}
    return arch.build_chiplet({**spec, **changes})


def test_a_grid_of_arrays_splits_k_and_n_so_each_array_runs_its_block():
    # a 2 x 2 grid of 4 x 4 arrays on an 8 x 8 weight matrix: each array holds one 4 x 4 block and streams the
    # M tokens once (M + 2R + C - 2 cycles); arrays: 4 splitting N alone would fold K twice (old code's only form)
    m = 1000
    grid = _sa(arrays=[2, 2])
    assert grid.grid == (2, 2) and grid.arrays == 4 and grid.peak_flops() == _sa(arrays=4).peak_flops()
    t = arch.matrix_costs(grid, m, 8, 8).time_s[0] * 1e9
    assert t == pytest.approx(double_buffered_cycles(m, 4, 4, 4, 4, 1)[()]) == pytest.approx(m + 10)
    assert arch.matrix_costs(_sa(arrays=4), m, 8, 8).time_s[0] * 1e9 == pytest.approx(2 * m + 10)
    # its outputs are written once per grid column (the rows' partial sums are summed on the grid)
    mc = arch.matrix_costs(grid, m, 8, 8)
    assert mc.dram_c_bytes[0] == pytest.approx(m * 8 * 2)
    assert mc.dram_b_bytes[0] == pytest.approx(8 * 8 * 2)


def test_links_between_arrays_add_their_hops_and_bound_the_time_by_their_traffic():
    m = 1000
    fast = arch.matrix_costs(_sa(arrays=[2, 2], array_link_words=64), m, 8, 8).time_s[0] * 1e9
    assert fast == pytest.approx(m + 10 + 2)            # one hop across each grid dimension
    # a link of 1 word a cycle: each array forwards its M x 4 inputs east and M x 4 partial sums south
    slow = arch.matrix_costs(_sa(arrays=[2, 2], array_link_words=1), m, 8, 8).time_s[0] * 1e9
    assert slow == pytest.approx(4 * m + 2)
    # without links (0, the default) the arrays are fed from the shared SRAM: nothing added, as before
    assert arch.matrix_costs(_sa(arrays=4), m, 8, 8).time_s[0] == \
        arch.matrix_costs(_sa(arrays=4, array_link_words=0), m, 8, 8).time_s[0]


def test_the_wafer_is_its_core_mesh_and_a_4096_cube_gives_each_core_too_small_a_block():
    wse = arch.preset("cerebras-wse3-like")
    assert wse.grid == (948, 949) and (wse.rows, wse.cols) == (1, 8)
    assert wse.peak_flops() == pytest.approx(125e15 / 8, rel=0.01)
    # each core holds a 5 x 5 block of a 4096 x 4096 weight matrix (820 x 820 of the cores); 5 outputs fill 5
    # of its 8 SIMD lanes (5 folds of 4,096 tokens + the core's 2R + C - 2 = 8), and its one-word links carry
    # 5 words a token each way (20,480 cycles: as slow, within 8 cycles); then 947 + 948 hops across the mesh
    r = arch.gemm_report(wse, 4096, 4096, 4096)
    assert r["latency_s"] * wse.freq_hz == pytest.approx(4096 * 5 + 8 + 947 + 948, rel=1e-6)
    free = arch.preset("cerebras-wse3-like", array_link_words=0)       # no links: fed from the shared SRAM, no hops
    assert arch.gemm_report(free, 4096, 4096, 4096)["latency_s"] * wse.freq_hz == pytest.approx(4096 * 5 + 8)
    assert 0.40 < r["utilisation"] < 0.45              # 42.7 %: below the 50-95 % band (docs/arch.md)
    # the one-array stand-in it replaces folded 4096 over 2,400 x 3,000 PEs: 39.5 %
    stand_in = arch.preset("cerebras-wse3-like", array=[2400, 3000], arrays=1, array_link_words=0)
    assert arch.gemm_report(stand_in, 4096, 4096, 4096)["utilisation"] == pytest.approx(0.3947, abs=1e-3)
    # larger GEMMs give each core a larger block: 8192 fills 9 of 16 lanes, 16384 17 of 24
    assert arch.gemm_report(wse, 8192, 8192, 8192)["utilisation"] > r["utilisation"]


@pytest.mark.parametrize("changes, key", [({"arrays": [0, 2]}, "arrays"), ({"arrays": [2, 2, 2]}, "arrays"),
                                          ({"array_link_words": -1}, "array_link_words")])
def test_a_bad_grid_is_an_error_naming_the_key(changes, key):
    with pytest.raises(arch.ArchError, match=key):
        _sa(**changes)


def test_cerebras_own_gemm_mapping_misses_the_band_as_the_gemv_mapping_does():
    # Cerebras's SDK GEMM (csl-examples benchmarks/gemm-collectives_2d: SUMMA on P x P PEs) and WaferLLM's MeshGEMM
    # (MeshGEMM/WSE-3/src/meshgemm.csl) keep each PE's C tile stationary and issue @fmacs / @fmach over the tile's
    # Mt rows with one element of B as the scalar: dataflow os, the 8 lanes over M (array [8, 1]). On the 948 x 949
    # mesh a 4096 cube gives each PE a 5 x 5 tile: 5 of 8 lanes for each of the 4,096 K steps, and 5 x 4,096 words
    # of A and of B over its one-word links: the same 20,480 cycles as the GEMV-style mapping (ws, lanes over N)
    # and as lanes over M with K split (is), so no choice among the three legal mappings reaches the 50 % band
    wse = arch.preset("cerebras-wse3-like")
    gemv_style = arch.gemm_report(wse, 4096, 4096, 4096)["utilisation"]
    summa = arch.preset("cerebras-wse3-like", dataflow="os", array=[8, 1])
    r = arch.gemm_report(summa, 4096, 4096, 4096)
    assert r["latency_s"] * wse.freq_hz == pytest.approx(4096 * 5 + 947 + 948, abs=40)   # + the PE's own fill
    for ch in (summa, arch.preset("cerebras-wse3-like", dataflow="is")):
        assert arch.gemm_report(ch, 4096, 4096, 4096)["utilisation"] == pytest.approx(gemv_style, abs=0.002)
    # under os no partial sums cross the links, only BF16 operands: were two of them packed a 32-bit wavelet (not
    # sourced), the lanes would still bind at 5 of 8
    packed = arch.preset("cerebras-wse3-like", dataflow="os", array=[8, 1], array_link_words=2)
    assert arch.gemm_report(packed, 4096, 4096, 4096)["utilisation"] < 0.45
