"""Issue 35: one GH100 die, one physics. h100-like and h200-like share the energy per MAC (fitted on the
H200's power-limited prefill), the node's active and static power, and both reach their 700 W limit on
compute-bound work, as the measured H200 (688 W at 1,590 MHz) and the published H100 runs do."""
from __future__ import annotations

import pytest

import arch
from dse.validation import energy as energy_validation
from dse.validation import gpu


def test_gh100_presets_share_one_die_s_energy():
    h100, h200 = arch.preset("h100-like"), arch.preset("h200-like")
    assert h100.tech().mac_energy_pj == h200.tech().mac_energy_pj
    assert arch.active_power_w(h100) == arch.active_power_w(h200)
    assert arch.static_power_w(h100) == arch.static_power_w(h200)
    assert h100.power_limit_w == h200.power_limit_w == 700 and h100.idle_w == h200.idle_w


def _prefill(gpu_name: str) -> tuple[float, float]:
    """(latency s, power W) of Llama-2-7B's prefill of 8,192 tokens on one GPU (graphs stack, fused attention)."""
    from dse.system.prepare import prepare

    case = {"id": "prefill-8k", "model": "llama-2-7b", "gpu": gpu_name, "gpus": 1, "phase": "prefill", "batch": 1,
            "context": 8192, "precision": "bf16", "attention": "fused", "stack": "graphs"}
    prepared = prepare(gpu.case_study(case))
    m = prepared.evaluator.evaluate_designs([gpu.case_design(case, prepared)], with_faults=False).iloc[0]
    latency = float(m["latency_s"])
    return latency, float(m["energy_j_per_token"]) * prepared.tables.tokens_per_step / latency


@pytest.mark.parametrize("gpu_name", ["h100", "h200"])
def test_both_presets_run_a_long_prefill_at_their_power_limit(gpu_name, monkeypatch):
    """Measured on the H200 (shared/reference/h200/steps_llama2_7b.csv): 688 W of 700 at 1,590 of 1,980 MHz.
    The H100's die under the same limit does the same; without the limit both would run 15-25 % faster."""
    latency, power = _prefill(gpu_name)
    assert power == pytest.approx(700.0, rel=0.03)
    monkeypatch.setitem(gpu.STACKS["graphs"], gpu_name, {"power_limit_w": 0.0})
    free, free_power = _prefill(gpu_name)
    assert free < latency / 1.15 and free_power > 800.0


def test_published_h100_power_at_large_batch():
    """ML.ENERGY Leaderboard v3 (Llama-3.1-8B, one H100 SXM, vLLM 0.11.1, 256 sequences): 690 W measured, at the
    limit; the model drew 0.83 of it before the H100 shared the H200's switching energy, 0.88 after (its
    decode steps' memory-bound kernels stay below the limit at the full clock)."""
    case = next(c for c in energy_validation.load_cases() if c["id"] == "l31-8b-tp1-b256")
    modelled = energy_validation.served(case)["mean_power_w"]
    assert modelled == pytest.approx(case["mean_power_w"], rel=0.15)
    assert modelled > 0.85 * case["mean_power_w"]
    assert modelled <= 700.0 * 1.001


def test_h200_steps_held_out_within_five_percent():
    """The measured H200 Llama-2-7B steps (shared/reference/h200/steps_llama2_7b.csv). Fitted: the decode of
    one sequence at 1,024 tokens (the pytorch-graphs stack's time per kernel) and the prefill of 8,192 (the
    GH100 energy per MAC). Held out and within 5 %: the decodes of 16 x 1,024 and 64 x 512, the prefills of
    512 and 8 x 512; the other four within 10 % (the decode of 1 x 4,096 at 0.94 and the prefills of 128
    and 2,048 at 0.92-0.94 miss in the GEMM and attention kernels; the decode of 128 x 1,024 at 1.09 reads
    its KV cache slower than the measured 4.4 TB/s: docs/validation.md)."""
    from dse.validation import h200

    steps = {r["id"]: r["ratio"] for r in h200.table() if r["figure"] == "step"}
    held_out = ("step-decode-b16-c1024", "step-decode-b64-c512", "step-prefill-b1-c512", "step-prefill-b8-c512")
    assert all(abs(steps[i] - 1.0) <= 0.05 for i in held_out), steps
    assert all(abs(r - 1.0) <= 0.10 for r in steps.values()), steps
