"""Workload extraction against published model sizes (shared/reference/workloads.md)."""
import numpy as np
import pytest

import workloads

# model: (total params, active params per token, KV-cache bytes per token in BF16), published figures
PUBLISHED = {
    "llama-3-8b": (8.03e9, 8.03e9, 128 * 1024),
    "mixtral-8x7b": (46.70e9, 12.88e9, 128 * 1024),
    "gpt2": (124.44e6, 124.44e6, 2 * 12 * 768 * 2),   # GPT-2 small, 124M (OpenAI model card)
}


@pytest.mark.parametrize("model", sorted(PUBLISHED))
def test_parameter_counts_match_published(model):
    total, active, kv = PUBLISHED[model]
    s = workloads.extract(model, batch=1, context=128).summary
    assert s["total_params"] == pytest.approx(total, rel=5e-3)
    assert s["active_params_per_token"] == pytest.approx(active, rel=5e-3)
    assert s["kv_cache_bytes_per_token"] == pytest.approx(kv, rel=5e-3)


@pytest.mark.parametrize("batch,expected", [(1, 2.0), (4, 5.47)])
def test_mixtral_distinct_experts_uniform(batch, expected):
    # E (1 - (1 - k/E)^B) with E = 8, k = 2: B = 4 gives 5.5 (shared/reference/workloads.md)
    s = workloads.extract("mixtral-8x7b", batch=batch, context=128).summary
    assert s["expected_distinct_experts_per_layer"] == pytest.approx(8 * (1 - (1 - 2 / 8) ** batch))
    assert s["expected_distinct_experts_per_layer"] == pytest.approx(expected, abs=0.01)


def test_decode_flops_are_twice_active_params_plus_attention():
    # dense llama-3-8b, batch 1, short context: FLOPs per token ~ 2 x params (lookup excluded)
    wl = workloads.extract("llama-3-8b", batch=1, context=16)
    s = wl.summary
    attention = wl.ops[wl.ops["name"].isin(["attn_score", "attn_context"])]
    attn_flops = (attention["flops"] * attention["layers"]).sum()
    embed = 128256 * 4096
    assert s["flops_per_step"] - attn_flops == pytest.approx(2 * (s["active_params_per_token"] - embed), rel=0.02)


def test_zipf_routing_is_skewed_and_sums_to_k():
    q = workloads.selection_probabilities(64, 8, "zipf", s=1.0, seed=1)
    assert q.sum() == pytest.approx(8)
    assert q.max() <= 1.0
    assert q.max() / q.mean() > 3


def test_bad_inputs_name_the_problem():
    with pytest.raises(workloads.WorkloadError, match="unknown phase 'train'"):
        workloads.extract("gpt2", phase="train")
    with pytest.raises(workloads.WorkloadError, match="unknown model 'nope'"):
        workloads.extract("nope")
    with pytest.raises(workloads.WorkloadError, match="unknown precision 'fp64'"):
        workloads.extract("gpt2", precision="fp64")
