"""Issue 53, item 3: a MoE layer run as plain PyTorch's batched experts (``moe_form: sum`` and
``index_add``): routing, gather, padding to a common count and the two combines, checked by hand on
OLMoE-1B-7B (hidden 2,048, 64 experts, top-8, expert width 1,024); the atomics of ``index_add_`` at the
L2's bandwidth; and the measured OLMoE steps on one H200 (dse/validation/data/h200_steps_olmoe_prefill.csv)."""
from __future__ import annotations

import numpy as np
import pytest

import arch
import workloads
from arch.costing import on_chip_Bps
from workloads.layers import expert_capacity

H, E, K, B = 2048, 64, 8, 2.0           # OLMoE-1B-7B, bf16


def _layer(form: str, tokens: int = 2048):
    wl = workloads.extract("olmoe-1b-7b", phase="prefill", batch=1, context=tokens, fused_attention=True,
                           unfused_elementwise=True, moe_form=form)
    return wl.ops


def test_sum_form_by_hand():
    """2,048 tokens: 16,384 assignments over 64 experts, 256 rows each, no padded row; the gather reads each
    token row once and writes its 8 copies, which are copied into the zeroed 64 x 256-row buffer and taken
    back out after the experts; the weights scale the 8 outputs, one reduction sums them."""
    T = 2048
    ops = _layer("sum", T)
    attn = ops[ops["unit"] == "L0-15.attn"].set_index("name")
    assert attn.loc["expert_gather", "act_in_bytes"] == T * H * B
    assert attn.loc["expert_gather", "act_out_bytes"] == T * K * H * B
    assert attn.loc["expert_pad", "act_out_bytes"] == 64 * 256 * H * B                 # the zeroed buffer
    assert attn.loc["expert_pad_copy", "act_out_bytes"] == attn.loc["expert_unpad", "act_out_bytes"] == T * K * H * B
    assert "router_renorm" not in attn.index                                         # olmoe: norm_topk_prob false
    assert attn.loc["router_softmax", "elements"] == T * E and attn.loc["router_topk", "elements"] == T * E
    assert attn.loc["moe_weight", "act_out_bytes"] == T * K * H * B
    assert attn.loc["moe_sum", "act_in_bytes"] == T * K * H * B and attn.loc["moe_sum", "act_out_bytes"] == T * H * B
    assert attn.loc["moe_residual", "act_in_bytes"] == 2 * T * H * B
    assert (attn["atomic_bytes"] == 0).all()
    experts = ops[ops["unit"].str.match(r"L0-15\.e\d+$")]
    gate_up = experts[experts["name"] == "gate_up_proj"]
    assert len(gate_up) == E and (gate_up["M"] == 256).all() and (gate_up["prob"] == 1).all()
    assert "expert_scale" not in set(experts["name"])          # the weights are applied in the combine


def test_one_layer_kernel_by_kernel_by_hand():
    """512 tokens, ``sum``: every kernel of one OLMoE layer as plain PyTorch launches it, its bytes read and
    written by hand (4,096 assignments, 64 experts of 64 rows, nothing padded). Routing in float32 as
    HuggingFace's block (softmax out 4 B, top-k reads them, writes 4 B weights and 8 B indices, one cast to
    bf16); the q and k norms are two RMSNorm modules, each its normalisation and its weight multiply (4
    kernels where the fused stack has 1). Launches a layer: 21 attention-side, 13 around the experts, 4
    grouped expert kernels."""
    from dse.model.tables import kernels_of

    T, I = 512, 1024
    rows, row = T * K, H * B                 # assignments; one activation row, bytes
    ops = _layer("sum", T)
    attn = ops[ops["unit"] == "L0-15.attn"]
    want = {                                  # name: (bytes read, bytes written), weights apart
        "q_norm": (T * H * B, T * H * B), "q_norm_scale": (T * H * B, T * H * B),
        "k_norm": (T * H * B, T * H * B), "k_norm_scale": (T * H * B, T * H * B),
        "router_softmax": (T * E * B, T * E * 4), "router_topk": (T * E * 4, T * K * (4 + 8)),
        "router_cast": (T * K * 4, T * K * B),
        "expert_gather": (T * row, rows * row), "expert_pad": (0, 64 * 64 * row),
        "expert_pad_copy": (rows * row + rows * 8, rows * row), "expert_unpad": (rows * row + rows * 8, rows * row),
        "moe_weight": (rows * row + rows * B, rows * row), "moe_sum": (rows * row, T * row),
        "moe_residual": (2 * T * row, T * row)}
    got = attn.set_index("name")
    for name, (read, written) in want.items():
        assert (got.loc[name, "act_in_bytes"], got.loc[name, "act_out_bytes"]) == pytest.approx((read, written)), name
    assert got.loc["q_norm", "weight_bytes"] == got.loc["k_norm", "weight_bytes"] == H * B
    assert "qk_norm" not in got.index
    e0 = ops[ops["unit"] == "L0-15.e0"].set_index("name")
    assert list(e0.index) == ["gate_up_proj", "activation_silu", "activation", "down_proj"]
    assert e0.loc["activation_silu", "act_in_bytes"] == 64 * I * B                       # the gate half
    assert e0.loc["activation", "act_in_bytes"] == 2 * 64 * I * B                        # silu(gate), up
    names, units = attn["name"].to_numpy(), np.zeros(len(attn), dtype=int)
    launches = kernels_of(names, units, True)[-1] + 1          # Q.K^T, softmax and P.V one flash kernel
    moe_side = list(names[list(names).index("ffn_norm"):])
    assert (launches - len(moe_side), len(moe_side)) == (21, 13)
    fused = workloads.extract("olmoe-1b-7b", phase="prefill", batch=1, context=T, fused_attention=True).ops
    assert (fused["name"] == "qk_norm").sum() == 1 and "router_cast" not in set(fused["name"])


def test_padding_to_a_common_count():
    """100 tokens: 800 assignments over 64 experts -> 13 rows each, a buffer of 64 x 13 rows zeroed (32
    of them padding) and computed;
    5 tokens: 40 assignments -> 40 experts of one row, the other 24 do not run."""
    assert expert_capacity(100, E, K) == (64, 13)
    assert expert_capacity(5, E, K) == (40, 1)
    ops = _layer("sum", 100)
    attn = ops[ops["unit"] == "L0-15.attn"].set_index("name")
    assert attn.loc["expert_pad", "act_out_bytes"] == 64 * 13 * H * B
    assert (ops[ops["name"] == "down_proj"]["M"].iloc[0]) == 13
    five = _layer("sum", 5)
    run = five[(five["name"] == "gate_up_proj") & five["unit"].str.contains(r"\.e\d+$")]["prob"].to_numpy()
    assert run.sum() == 40 and set(run) == {0.0, 1.0}


def test_index_add_form_scatters_with_atomics():
    """index_add_: the T k scaled rows (and their int64 indices) read, one bf16 atomic add per element, each a
    32-byte sector read and written at the L2: its time is at least T k h x 64 B over the L2 bandwidth."""
    T = 2048
    ops = _layer("index_add", T)
    row = ops[(ops["unit"] == "L0-15.attn") & (ops["name"] == "moe_index_add")]
    assert row["atomic_bytes"].iloc[0] == T * K * H * 64
    assert row["act_in_bytes"].iloc[0] == T * K * H * B + T * K * 8
    ch = arch.preset("h200-like")
    cost = arch.op_costs(row, [ch], "bf16", vector_from_dram=True)
    moved = row["act_in_bytes"].iloc[0] + row["act_out_bytes"].iloc[0]
    assert cost.time_s[0, 0] == pytest.approx((moved + T * K * H * 64) / on_chip_Bps(ch))
    assert cost.dram_bytes[0, 0] == pytest.approx(moved)          # the sectors stay in the L2
    names = set(ops[ops["unit"] == "L0-15.attn"]["name"])
    assert {"moe_zero", "moe_index_add"} <= names and "moe_sum" not in names


def test_default_forms_unchanged_and_renorm_by_config():
    """Without moe_form the fused stack runs vLLM's fused_moe and plain PyTorch HuggingFace's loop, as before;
    Mixtral renormalises its top-k weights (HF code), OLMoE does not (config.json norm_topk_prob false)."""
    fused = workloads.extract("olmoe-1b-7b", phase="prefill", batch=1, context=512, fused_attention=True)
    assert "moe_combine" in set(fused.ops["name"]) and (fused.ops["atomic_bytes"] == 0).all()
    loop = workloads.extract("olmoe-1b-7b", phase="prefill", batch=1, context=512, fused_attention=True,
                             unfused_elementwise=True)
    assert {"expert_gather", "expert_scatter_add", "router_renorm"} <= set(loop.ops["name"])
    assert workloads.load_model("mixtral-8x7b").norm_topk_prob
    assert not workloads.load_model("olmoe-1b-7b").norm_topk_prob
    mixtral = workloads.extract("mixtral-8x7b", phase="prefill", batch=1, context=64, fused_attention=True,
                                unfused_elementwise=True, moe_form="sum")
    assert "router_renorm" in set(mixtral.ops["name"])
    with pytest.raises(workloads.WorkloadError, match="moe_form"):
        workloads.extract("olmoe-1b-7b", moe_form="scatter")


def test_olmoe_steps_against_the_measured_h200():
    """The whole measured OLMoE-1B-7B prefill steps on one H200, both forms, 512 and 2,048 tokens, with
    nothing fitted on them (dse.validation.h200's moe-step rows): each within 5 % (issue 53's done-when;
    the sum steps were 5.0 and 6.7 % fast before the float32 routing and the unfused q/k norms), geometric
    mean within 3 %, and index_add_'s atomics cost what the measured steps show over the sum (0.82 and
    3.28 ms) within 20 %."""
    import pandas as pd

    from dse.validation import h200
    from dse.validation.common import DATA

    rows = {}
    for r in pd.read_csv(DATA / "h200_steps_olmoe_prefill.csv", comment="#").itertuples():
        case = h200.moe_step_case(r)
        modelled = h200.step_figures(case)[0] * 1e3
        rows[case["id"]] = dict(measured=r.step_ms, modelled=modelled, ratio=modelled / r.step_ms)
    assert len(rows) == 4
    logs = [abs(np.log(r["ratio"])) for r in rows.values()]
    assert np.exp(np.mean(logs)) - 1 < 0.03, rows
    assert all(0.95 < r["ratio"] < 1.05 for r in rows.values()), rows
    for c in (512, 2048):
        add, plain = rows[f"olmoe-c{c}-index_add"], rows[f"olmoe-c{c}-sum"]
        extra = (add["modelled"] - plain["modelled"]) / (add["measured"] - plain["measured"])
        assert 0.8 < extra < 1.2, (c, extra)


def test_the_docs_kernel_table_is_what_the_tool_prints():
    """docs/workloads.md's per-kernel cost of the OLMoE steps is tools/moe_step_kernels.py's output today."""
    import importlib.util
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("moe_step_kernels", root / "tools" / "moe_step_kernels.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    doc = (root / "docs" / "workloads.md").read_text().splitlines()
    table = tool.table_lines()
    start = doc.index(table[0])
    assert doc[start:start + len(table)] == table
