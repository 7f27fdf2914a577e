"""Every preset against published sizes (shared/reference/workloads.md) and the operator lists."""
import pytest

import workloads

# model: (total params, active params per token, KV-cache KiB per token in BF16, all layers)
# source: shared/reference/workloads.md "Check values" (model cards / papers); GPT-2 small: 124.44 M
# (OpenAI model card), KV 2 x 12 layers x 768 x 2 bytes.
PUBLISHED = {
    "llama-3-8b": (8.03e9, 8.03e9, 128),
    "llama-3-70b": (70.55e9, 70.55e9, 320),
    "mixtral-8x7b": (46.70e9, 12.88e9, 128),
    "mixtral-8x22b": (140.62e9, 39.15e9, 224),
    "deepseek-v2-lite": (15.71e9, 2.66e9, 30.4),
    "deepseek-v3": (671.0e9, 37.55e9, 68.6),
    "qwen1.5-moe-a2.7b": (14.32e9, 2.69e9, 192),
    "qwen3-30b-a3b": (30.53e9, 3.35e9, 96),
    "olmoe-1b-7b": (6.92e9, 1.28e9, 128),
    "phi-3-mini": (3.82e9, 3.82e9, 384),
    "gpt2": (124.44e6, 124.44e6, 36),
    # Llama-2 model cards (6.74 B / 68.98 B parameters as HuggingFace counts them); KV 2 x layers x KV heads
    # x 128 x 2 bytes. GPT-3 175B: Brown et al. 2020, Table 2.1 (175.0 B); KV 2 x 96 x 12288 x 2 bytes.
    "llama-2-7b": (6.738e9, 6.738e9, 512),
    "llama-2-70b": (68.98e9, 68.98e9, 320),
    "gpt3-175b": (175.0e9, 175.0e9, 4608),
    # CodeLlama-34B: 33,743,970,304 parameters (the checkpoint's safetensors index, HuggingFace's count);
    # KV 2 x 48 layers x 8 KV heads x 128 x 2 bytes
    "codellama-34b": (33.744e9, 33.744e9, 192),
}
#: presets of models without a public checkpoint: their source names the paper of their dimensions
NO_CHECKPOINT = {"gpt3-175b": "Brown et al."}


def test_every_preset_has_a_reference_and_a_source():
    assert sorted(PUBLISHED) == workloads.list_presets()
    for name in workloads.list_presets():
        cfg, _, _ = workloads.read_config(name)
        if name in NO_CHECKPOINT:
            assert NO_CHECKPOINT[name] in cfg["_source"]
            continue
        assert cfg["_source"].startswith("https://huggingface.co/") and cfg["_source"].endswith("config.json")


@pytest.mark.parametrize("model", sorted(PUBLISHED))
@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_parameters_and_kv_cache_match_published(model, phase):
    total, active, kv_kib = PUBLISHED[model]
    s = workloads.extract(model, phase=phase, batch=1, context=64).summary
    assert s["total_params"] == pytest.approx(total, rel=5e-3)
    assert s["active_params_per_token"] == pytest.approx(active, rel=5e-3)
    assert s["kv_cache_bytes_per_token"] / 1024 == pytest.approx(kv_kib, rel=5e-3)


@pytest.mark.parametrize("model", sorted(PUBLISHED))
def test_decode_flops_are_twice_active_params_plus_attention(model):
    # per decoded token: 2 FLOPs per active weight (the embedding lookup and learned positions do no
    # GEMM work) plus the Q.K^T and P.V terms; vector ops (norms, softmax, activations) stay under 2 %.
    wl = workloads.extract(model, batch=1, context=16)
    cfg = workloads.load_model(model)
    ops = wl.ops
    attention = ops[ops["name"].isin(["attn_score", "attn_context"])]
    attn = (attention["flops"] * attention["layers"]).sum()
    lookup_only = cfg.learned_positions * cfg.hidden + (0 if cfg.tied_embeddings else cfg.vocab * cfg.hidden)
    expected = 2 * (wl.summary["active_params_per_token"] - lookup_only) + attn
    assert wl.summary["flops_per_step"] == pytest.approx(expected, rel=0.02)


def test_attention_flops_textbook_values():
    # Llama-3-8B decode, context L: Q.K^T = 2 x heads x head_dim x L per layer (GQA does not change FLOPs)
    wl = workloads.extract("llama-3-8b", batch=3, context=1000)
    score = wl.ops[wl.ops["name"] == "attn_score"].iloc[0]
    assert score["flops"] == pytest.approx(3 * 2 * 32 * 128 * 1000)
    assert (score["M"], score["K"], score["N"], score["batch"]) == (4, 128, 1000, 3 * 8)   # 4 q heads per KV head
    assert score["kv_read_bytes"] == pytest.approx(3 * 1000 * 8 * 128 * 2)


def test_prefill_attention_counts_causal_pairs_but_keeps_full_tiles():
    L = 512
    wl = workloads.extract("llama-3-8b", phase="prefill", batch=1, context=L)
    score = wl.ops[wl.ops["name"] == "attn_score"].iloc[0]
    assert (score["M"], score["N"]) == (L * 4, L)
    pairs = L * (L + 1) / 2
    assert score["flops"] == pytest.approx(2 * 32 * 128 * pairs)


def test_mla_is_expanded_in_prefill_and_absorbed_in_decode():
    pre = workloads.extract("deepseek-v3", phase="prefill", batch=1, context=128).ops
    dec = workloads.extract("deepseek-v3", phase="decode", batch=2, context=1000).ops
    assert "kv_b_proj" in set(pre["name"]) and "q_absorb" not in set(pre["name"])
    assert {"q_absorb", "v_absorb"} <= set(dec["name"]) and "kv_b_proj" not in set(dec["name"])
    score = dec[dec["name"] == "attn_score"].iloc[0]
    # absorbed: all 128 heads share the 512 + 64 latent of each cached token (MQA-like)
    assert (score["M"], score["K"], score["N"], score["batch"]) == (128, 576, 1000, 2)
    assert score["kv_read_bytes"] == 2 * 1000 * 576 * 2
    pre_score = pre[pre["name"] == "attn_score"].iloc[0]
    assert (pre_score["K"], pre_score["batch"]) == (192, 128)      # nope 128 + rope 64, per head


def test_dense_first_layers_and_shared_experts():
    s = workloads.extract("deepseek-v3", batch=1, context=64)
    stages = list(s.stages["name"])
    assert stages[1:5] == ["L0-2.attention", "L0-2.ffn", "L3-60.attention", "L3-60.moe"]
    kinds = {d["kind"] for _, d in s.graph.nodes(data=True)}
    assert "shared_expert" in kinds
    lite = workloads.extract("deepseek-v2-lite", batch=1, context=64)
    assert list(lite.stages["name"])[1:3] == ["L0.attention", "L0.ffn"]
    shared = lite.ops[lite.ops["unit"] == "L1-26.shared"]
    assert shared[shared["name"] == "down_proj"]["K"].iloc[0] == 2 * 1408      # n_shared_experts x width
    qwen = workloads.extract("qwen1.5-moe-a2.7b", batch=1, context=64).ops
    assert {"shared_gate", "shared_gate_sigmoid"} <= set(qwen["name"])


def test_qwen_decoder_sparse_step_and_mlp_only_layers(tmp_path):
    cfg, _, _ = workloads.read_config("qwen3-30b-a3b")
    cfg = dict(cfg, num_hidden_layers=6, decoder_sparse_step=2, mlp_only_layers=[3])
    path = tmp_path / "config.json"
    import json
    path.write_text(json.dumps(cfg))
    m = workloads.load_model(str(path))
    assert m.moe_layers == (False, True, False, False, False, True)


def test_gated_and_tied():
    gpt2 = workloads.extract("gpt2", batch=1, context=8)
    names = set(gpt2.ops["name"])
    assert "up_proj" in names and "gate_up_proj" not in names
    assert gpt2.graph.nodes["lm_head"]["params"] == pytest.approx(2 * 768)      # tied: only the final LayerNorm
    assert gpt2.graph.nodes["lm_head"]["weight_bytes"] >= 50257 * 768 * 2         # but holds a copy to read
    llama = workloads.extract("llama-3-8b", batch=1, context=8)
    assert llama.graph.nodes["lm_head"]["params"] == pytest.approx(128256 * 4096 + 4096)


def test_precision_scales_weight_bytes():
    b16 = workloads.extract("mixtral-8x7b", batch=1, context=64, precision="bf16").summary
    i4 = workloads.extract("mixtral-8x7b", batch=1, context=64, precision="int4").summary
    assert i4["weight_bytes_per_step"] == pytest.approx(b16["weight_bytes_per_step"] / 4)
    assert i4["total_params"] == b16["total_params"]


def test_tensor_parallel_splits_units_and_keeps_parameters():
    one = workloads.extract("llama-3-8b", batch=2, context=64)
    four = workloads.extract("llama-3-8b", batch=2, context=64, tp=4)
    assert four.summary["total_params"] == pytest.approx(one.summary["total_params"], rel=1e-4)
    shards = [u for u in four.graph if u.startswith("L0-31.attn.tp")]
    assert len(shards) == 4
    qkv = four.ops[(four.ops["unit"] == "L0-31.attn.tp0") & (four.ops["name"] == "qkv_proj")].iloc[0]
    assert qkv["N"] == (32 + 16) * 128 / 4
    # shard i of attention hands 2 X / t to every FFN shard (ring all-reduce volume when co-located)
    X = 2 * 4096 * 2
    assert four.graph.edges["L0-31.attn.tp0", "L0-31.ffn.tp1"]["bytes"] == pytest.approx(2 * X / 4)
    assert four.summary["flops_per_step"] == pytest.approx(one.summary["flops_per_step"], rel=0.01)


def test_edges_follow_the_evaluator_repeat_rule():
    for model, per_layer in (("deepseek-v3", False), ("mixtral-8x7b", True), ("llama-3-8b", False)):
        wl = workloads.extract(model, batch=4, context=64, per_layer=per_layer, tp=1)
        repeat = wl.stages.set_index("stage")["repeat"]
        for a, b, d in wl.graph.edges(data=True):
            r = repeat[wl.graph.nodes[b]["stage"]]
            assert d["repeat"] in (r, 1, r - 1)
        stages = [wl.graph.nodes[u]["stage"] for u in wl.units]
        assert stages == sorted(stages)


def test_config_errors_name_the_key(tmp_path):
    import json
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"model_type": "bert", "hidden_size": 8}))
    with pytest.raises(workloads.WorkloadError, match="unsupported model_type 'bert'"):
        workloads.load_model(str(bad))
    cfg, _, _ = workloads.read_config("deepseek-v3")
    del cfg["kv_lora_rank"]
    bad.write_text(json.dumps(cfg))
    with pytest.raises(workloads.WorkloadError, match="missing key 'kv_lora_rank'"):
        workloads.load_model(str(bad))
    with pytest.raises(workloads.WorkloadError, match="unknown phase 'serve'"):
        workloads.extract("gpt2", phase="serve")
    with pytest.raises(workloads.WorkloadError, match="unknown model 'nope'"):
        workloads.extract("nope")
    with pytest.raises(workloads.WorkloadError, match="unknown precision 'fp64'"):
        workloads.extract("gpt2", precision="fp64")
    with pytest.raises(workloads.WorkloadError, match="does not divide num_attention_heads"):
        workloads.extract("gpt2", tp=5)
