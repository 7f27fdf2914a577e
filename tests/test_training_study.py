"""`workload.phase: train` in a study (dse.training.package): packages and systems searched for training."""
import math

import numpy as np
import pytest
import yaml

import dse
import memory
import workloads
from dse.system.collectives import ring_allreduce_s
from dse.system.prepare import prepare_step
from dse.training import Strategy, iteration, load_system
from dse.training.iteration import layer_costs
from dse.training.stacks import STACKS
from dse.training.systems import stack_chiplet_changes
from workloads.training import model_flops

A100_STUDY = {
    "name": "train_a100",
    "workload": {"model": "llama-2-7b", "phase": "train", "batch": 1, "context": 2048, "precision": "bf16"},
    "training": {"global_batch": 64, "recompute": "none", "zero": 1},
    # the GPU of dse train's dgx-a100-80gb: a100-like at the megatron-core stack's GEMM efficiency, 5 HBM2e stacks.
    # That efficiency was fitted on runs measured at the 400 W limit, so dse train's time holds the limit's clock
    # in it (docs/training.md); the package runs at the full clock (power_limit_w 0), not throttled a second time
    "hardware": {"chiplets": [{"name": "gpu", "preset": "a100-like", "power_limit_w": 0.0,
                               "max_efficiency": stack_chiplet_changes(
        "a100-like", STACKS["megatron-core"])["max_efficiency"]}],
                 "memory": [{"kind": "hbm2e", "stacks": [5, 5]}],
                 "package": {"mesh": {"rows": [1, 1], "cols": [1, 1]}, "link": "ucie-advanced"}},
    "system": {"preset": "dgx-a100-80gb", "parallel": {"replicas": [8]}},
    "mapping": {"kind": "many-to-one"},
    "search": {"objectives": ["latency", "cost"], "population": 8, "generations": 1},
}


def _train_dict(tiny_dict, **training):
    d = dict(tiny_dict)
    d["workload"] = {**tiny_dict["workload"], "phase": "train"}
    d["training"] = {"global_batch": 16, **training}
    return d


@pytest.mark.parametrize("model, recompute", [("llama-2-7b", "none"), ("llama-2-7b", "full"),
                                               ("olmoe-1b-7b", "none")])
def test_a_gpu_package_trains_as_dse_trains_gpu(model, recompute):
    """A package of one A100-like chiplet in a DGX A100, 8 data-parallel replicas, against dse train's device
    model of the same GPU (validated on Megatron-LM's Table 1): the package evaluator's forward pass and the
    kernel-by-kernel device model agree within 3 %, the iteration within 5 % (the gradient all-reduce differs:
    the system fabric's pair bandwidth against dse train's NCCL bus bandwidth, 93 against 120 ms with the
    optimizer for OLMoE, whose forward is 37 ms), memory exactly."""
    d = {**A100_STUDY, "workload": {**A100_STUDY["workload"], "model": model},
         "training": {**A100_STUDY["training"], "recompute": recompute}}
    p = dse.prepare(dse.Study.from_dict(d))
    m = p.evaluator(p.space.seeds[:1]).iloc[0]
    cfg, system = workloads.load_model(model), load_system("dgx-a100-80gb")
    strategy = Strategy(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64, seq=2048, zero=1, recompute=recompute,
                        precision="bf16")
    it = iteration(cfg, system, strategy)
    c = layer_costs(cfg, system, strategy)
    forward = p.system_evaluator.metrics_array(p.space.seeds[:1], False)[0, 0]
    assert forward == pytest.approx(cfg.layers * c.layer_fwd_s + c.ends_fwd_s, rel=0.03)
    assert m["iteration_s"] == pytest.approx(it.iteration_s, rel=0.05)
    assert m["memory_per_device_bytes"] == pytest.approx(it.memory_per_device_bytes, rel=1e-9)
    assert m["latency_s"] == m["iteration_s"] and m["throughput_tok_s"] == pytest.approx(64 * 2048 / m["iteration_s"])


def test_iteration_composes_the_forward_pipeline_by_hand(tiny_dict):
    """2 pipeline stages x 2 replicas: (m + P - 1)(3 + 1) stage periods (full recomputation), a ring
    all-reduce of 16-bit gradients over the replicas on the node's fabric, Adam's 28 bytes per parameter
    over the package's HBM (ZeRO-1: a replica's share)."""
    d = _train_dict(tiny_dict, recompute="full", zero=1)
    d["workload"]["tokens"] = 1e9
    d["workload"]["attention"] = "unfused"            # fused adds half the attention core's share (below)
    d["system"] = {"preset": "dgx-a100-80gb", "parallel": {"pipeline": [2], "replicas": [2]}}
    study = dse.Study.from_dict(d)
    p = dse.prepare(study)
    X = np.random.default_rng(1).integers(p.space.lower, p.space.upper + 1, size=(6, p.space.n_var))
    got = p.evaluator(X)
    forward = prepare_step(study).evaluator(X)
    wl = p.tables.workload
    params = wl.summary["total_params"] / 2                  # dense model over 2 stages
    fabric = p.system_evaluator.hardware.fabric_level()
    for i, x in enumerate(X):
        tokens = 4 * 512
        period = tokens * 2 / forward["throughput_tok_s"].iloc[i]
        m = 16 // (4 * 2)
        stacks = sum(p.evaluator.designs(x[None])[0].hbm_stacks)
        bw = memory.effective_bandwidth_Bps(p.tables.hbm, stacks) if stacks else \
            memory.effective_bandwidth_Bps(p.tables.ddr, p.evaluator.designs(x[None])[0].ddr_channels)
        expected = (m + 1) * 4 * period + ring_allreduce_s(2, params * 2, fabric) + params / 2 * 28 / bw
        assert got["iteration_s"].iloc[i] == pytest.approx(expected, rel=1e-9)
        assert got["time_to_train_s"].iloc[i] == pytest.approx(math.ceil(1e9 / (16 * 512)) * expected, rel=1e-9)
        assert got["bubble_s"].iloc[i] == pytest.approx(4 * period, rel=1e-9)


def test_train_phase_trace_has_every_positions_logits_and_megatrons_flops():
    """Training's forward pass: no KV cache, the LM head on every position; its FLOPs are Megatron-LM's
    closed form over 3 (Narayanan et al. SC'21, 5.1) but for the masked half of attention scores it skips."""
    cfg = workloads.parse_config({"model_type": "gpt2", "n_embd": 1024, "n_layer": 8, "n_head": 16,
                                  "vocab_size": 51200, "n_positions": 2048}, name="gpt-1024")
    B, s = 2, 1024
    train = workloads.extract_transformer(cfg, phase="train", batch=B, context=s)
    prefill = workloads.extract_transformer(cfg, phase="prefill", batch=B, context=s)
    assert train.summary["kv_bytes_per_step"] == 0 and prefill.summary["kv_bytes_per_step"] > 0
    head = train.ops[train.ops["name"] == "lm_head"]
    assert float(head["M"].iloc[0]) == B * s
    causal = 2 * 2 * B * s * s * 1024 / 2 * 8                  # QK^T and PV over the unmasked half
    assert train.summary["flops_per_step"] == pytest.approx(
        model_flops(B, s, 8, 1024, 51200) / 3 - causal, rel=0.01)


def test_dse_run_searches_training_with_its_columns(tiny_dict, tmp_path):
    d = _train_dict(tiny_dict)
    d["workload"]["tokens"] = 1e10
    d["search"] = {**tiny_dict["search"], "objectives": ["latency", "carbon", "cost"]}
    result = dse.Study.from_dict(d).run()
    pareto = result.pareto
    for column in ("iteration_s", "mfu", "memory_per_device_bytes", "time_to_train_s", "carbon_to_train_kg"):
        assert column in pareto.columns
    assert (pareto["mfu"] > 0).all() and (pareto["mfu"] < 1).all()
    assert np.allclose(pareto["latency_s"], pareto["iteration_s"])
    dse.write_results(result, tmp_path / "out")
    assert (tmp_path / "out" / "report.md").exists()


@pytest.mark.parametrize("change, key", [
    (lambda d: d.pop("training"), "training"),
    (lambda d: d["workload"].update(phase="decode"), "workload.phase"),
    (lambda d: d["training"].update(global_batch=0), "training.global_batch"),
    (lambda d: d["workload"].update(tokens=float("inf")), "workload.tokens"),
    (lambda d: (d.pop("training"), d["workload"].update(phase="decode", tokens=1e9)), "workload.tokens"),
    (lambda d: d["training"].update(zero=4), "training.zero"),
])
def test_bad_training_sections_are_one_line_errors(tiny_dict, tmp_path, dse_cli, change, key):
    d = _train_dict(tiny_dict)
    change(d)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(d))
    code, out, err = dse_cli("validate", path)
    assert code == 2 and key in err and len(err.strip().splitlines()) == 1, err
