"""Issue 35, item 6: what surrounds a MoE layer's expert GEMMs (routing, permutation and combine, whole
tiles per expert at the token counts routing gives), checked by hand on one layer and on the H200's
measured batched expert GEMMs; dense models' operators unchanged."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

import arch
import workloads
from arch.calibrate import predict_us
from dse.model.expert_tiles import POINTS, count_points, expected_costs, expert_matrix_rows
from dse.validation import h200
from dse.validation.common import DATA

T, H, E, K = 2048, 4096, 8, 2          # Mixtral-8x7B prefill of 2,048 tokens: hidden 4,096, 8 experts, top-2


def _layer(unfused: bool) -> pd.DataFrame:
    wl = workloads.extract("mixtral-8x7b", phase="prefill", batch=1, context=T, fused_attention=True,
                           unfused_elementwise=unfused)
    return wl.ops


def test_fused_moe_surroundings_by_hand():
    """vLLM's fused_moe: router GEMM (T x h x E), one top-k softmax over T E logits, the offsets of the
    T k choices, and the combine reading each token's k outputs."""
    ops = _layer(False).set_index("name")
    attn = ops[ops["unit"] == "L0-31.attn"]
    router = attn.loc["router"]
    assert (router.M, router.K, router.N) == (T, H, E)
    assert attn.loc["router_topk", "elements"] == T * E
    assert attn.loc["moe_align", "elements"] == T * K
    assert attn.loc["moe_combine", "elements"] == T * K * H
    assert attn.loc["moe_combine", "act_in_bytes"] == T * K * H * 2          # bf16 rows read
    assert "expert_gather" not in ops.index                                   # gathered inside the GEMM


def test_unfused_moe_moves_every_token_row_once_per_copy():
    """HuggingFace's MoE block: each expert index_selects its n_e tokens (n_e h read and written) and
    index_adds its scaled output (n_e expert rows and n_e output rows read): summed over experts, with
    sum_e n_e = T k, the permutation moves T k h elements each way."""
    ops = _layer(True)
    expert = ops[ops["unit"].str.startswith("L0-31.e")]
    w = expert["prob"]
    gathered = (expert["elements"] * w)[expert["name"] == "expert_gather"].sum()
    assert gathered == pytest.approx(T * K * H, rel=1e-9)
    scatter = expert[expert["name"] == "expert_scatter_add"]
    assert (scatter["act_in_bytes"] * scatter["prob"]).sum() == pytest.approx(2 * T * K * H * 2, rel=1e-9)
    attn = ops[ops["unit"] == "L0-31.attn"].set_index("name")
    assert attn.loc["router_softmax", "elements"] == T * E and attn.loc["router_renorm", "elements"] == T * K


def test_dense_model_operators_and_costs_unchanged():
    """The fused (default) stack extracts a dense layer as before, and no expert rows are re-costed."""
    wl = workloads.extract("llama-2-7b", phase="prefill", batch=1, context=512, fused_attention=True)
    assert wl.ops[wl.ops["unit"] == "L0-31.attn"]["name"].tolist() == [
        "attn_norm", "qkv_proj", "rope", "attn_score", "softmax", "attn_context", "o_proj", "attn_residual"]
    assert wl.ops[wl.ops["unit"] == "L0-31.ffn"]["name"].tolist() == [
        "ffn_norm", "gate_up_proj", "activation", "down_proj", "ffn_residual"]
    ch = [arch.preset("h200-like")]
    before = arch.op_costs(wl.ops, ch)
    after = expected_costs(wl, ch, "bf16", arch.op_costs(wl.ops, ch))
    assert len(expert_matrix_rows(wl)[0]) == 0
    assert np.array_equal(before.time_s, after.time_s) and np.array_equal(before.energy_j, after.energy_j)


def test_count_points_match_the_binomial_given_the_expert_runs():
    """Textbook: E[n | n >= 1] = T q / (1 - (1 - q)^T), and E[ceil(n / 64)] from the binomial pmf."""
    for tokens, q in ((2048, 8 / 256), (64, 2 / 8), (4096, 4 / 60)):
        pts = count_points(tokens, q)
        exact = tokens * q / (1.0 - (1.0 - q) ** tokens)
        assert pts.mean() == pytest.approx(exact, rel=0.02)
        n = np.arange(1, tokens + 1)
        pmf = binom.pmf(n, tokens, q) / (1.0 - (1.0 - q) ** tokens)
        tiles = (np.ceil(n / 64.0) * pmf).sum()
        assert np.ceil(pts / 64.0).mean() == pytest.approx(tiles, rel=0.1)
    assert len(count_points(100, 0.5)) == POINTS


def test_whole_tiles_per_expert_slow_uneven_experts():
    """DeepSeek-V3-like routing (256 experts, top-8) at 2,048 tokens: 64 tokens an expert on average, but
    about half the experts get more than 64 and pay a second tile row; the expected GEMM time exceeds the
    time at the mean count, and never falls below it."""
    wl = workloads.extract("deepseek-v3", phase="prefill", batch=1, context=2048, fused_attention=True)
    ch = [arch.preset("h200-like")]
    rows = expert_matrix_rows(wl)[0]
    at_mean = arch.op_costs(wl.ops, ch).time_s[rows, 0]
    spread = expected_costs(wl, ch, "bf16", arch.op_costs(wl.ops, ch)).time_s[rows, 0]
    assert np.all(spread >= at_mean * (1 - 1e-9))
    assert spread.sum() > 1.05 * at_mean.sum()


def test_per_expert_gemms_against_the_measured_batched_expert_gemms():
    """The step model costs each expert's GEMM on its own and pays the kernel overhead once for the group
    (dse.model.grouped); measured on one H200 (dse/validation/data/h200_expert_gemm_bf16.csv: torch.bmm over
    the experts, m tokens each, Mixtral-8x7B, DeepSeek-V3, Qwen1.5-MoE): within 12 % geometric mean from
    m = 64 up (7.6 % over all 60 rows when this was written)."""
    d = pd.read_csv(DATA / "h200_expert_gemm_bf16.csv", comment="#")
    d = d[d["m_per_expert"] >= 64].reset_index(drop=True)
    ch = arch.preset("h200-like")
    rows = pd.DataFrame(dict(M=d.m_per_expert, N=d.N, K=d.K, batch=1, precision="bf16",
                             measured_us=d.measured_us))
    overhead = ch.kernel_overhead_s * 1e6
    modelled = d.experts * (predict_us(ch, rows, h200.BANDWIDTH_BPS) - overhead) + overhead
    error = math.exp(np.mean(np.abs(np.log(modelled / d.measured_us)))) - 1.0
    assert error < 0.12, error
