"""The whole step against measured GPUs, and each term that brought it there (issue 22).

Calibration data: arch/data/calibration/ (LLMCompass A100 GEMM sweep, Vidur A100/H100 kernel times).
Validation data: dse/validation/data/gpu_cases.yaml (Splitwise, TensorRT-LLM, LLMCompass layers), never
fitted; docs/validation.md has the table (python -m dse.validation.gpu --write docs/validation.md).
"""
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

import arch
import noc
from arch import calibrate as C
from arch.roofline import kernel_time_s
from dse.validation import gpu as gpu_validation
from dse.validation.common import geomean_error

ROOT = Path(__file__).resolve().parents[1]
CAL = ROOT / "arch" / "data" / "calibration"


def test_pipeline_overlap_by_hand():
    # n steps of load l and compute k: l + (n - 1) max(l, k) + k
    n, l, k = 4, 3e-6, 5e-6
    assert kernel_time_s(n * k, n * l, 1.0 / n, 0.0, 0.0) == pytest.approx(l + (n - 1) * max(l, k) + k)
    # a deep pipeline is the bare roofline max; one step is the sum; overhead adds; dispatch is a floor
    assert kernel_time_s(2.0, 1.0, 0.0, 0.0, 0.0) == 2.0
    assert kernel_time_s(2.0, 1.0, 1.0, 0.0, 0.0) == 3.0
    assert kernel_time_s(2.0, 1.0, 0.0, 0.5, 0.0) == 2.5
    assert kernel_time_s(1e-6, 1e-6, 0.0, 0.0, 3e-5) == 3e-5


def test_calibration_round_trips_within_one_percent():
    # measurements made by the model itself with known parameters come back
    truth = {"max_efficiency": 0.75, "mem_efficiency": 0.8, "kernel_overhead_us": 9.0, "dispatch_us": 25.0}
    rows = C.read_measurements(CAL / "a100_gemm_llmcompass.csv")
    made = C.with_values(arch.preset("a100-like"), truth)
    rows["measured_us"] = C.predict_us(made, rows, 2039e9)
    fitted, report = C.fit(arch.preset("a100-like"), rows, 2039e9)
    for field, value in truth.items():
        assert C.current(fitted, field) == pytest.approx(value, rel=0.01), field
    assert C.geomean_error(report) < 1e-3


def test_presets_fit_their_calibration_sets():
    # the shipped figures are the fits of `dse calibrate` to Vidur's kernel times (arch/data/chiplets.yaml),
    # at the datasheet memory's sustained bandwidth (the step model's)
    from dse.validation.gpu import sustained_bandwidth_Bps

    for gpu in ("h100", "a100"):
        rows = C.read_measurements(CAL / f"{gpu}_gemm_vidur.csv")
        rows = rows.assign(modelled_us=C.predict_us(arch.preset(f"{gpu}-like"), rows,
                                                    sustained_bandwidth_Bps(f"{gpu}-like")))
        assert C.geomean_error(rows) < 0.11, gpu
    # LLMCompass's isolated torch.matmul sweep (wall clock, with PyTorch's dispatch) runs faster than Vidur's
    # kernels: its own fit is max_efficiency 0.870, mem_efficiency 0.915, dispatch 35.2 us, 7.5 % geomean
    rows = C.read_measurements(CAL / "a100_gemm_llmcompass.csv")
    isolated = C.with_values(arch.preset("a100-like"), A100_ISOLATED)
    bw = sustained_bandwidth_Bps("a100-like")
    assert C.geomean_error(rows.assign(modelled_us=C.predict_us(isolated, rows, bw))) < 0.08
    assert C.geomean_error(rows.assign(modelled_us=C.predict_us(
        C.with_values(arch.preset("a100-like"), {"dispatch_us": 35.2}), rows, bw))) > 0.15


#: `dse calibrate --chiplet a100-like --measurements arch/data/calibration/a100_gemm_llmcompass.csv
#: --memory-bandwidth-gbps 2039 --fit max_efficiency,mem_efficiency,dispatch_us` (mem_efficiency: of the
#: sustained 1,789 GB/s; 0.803 of the peak)
A100_ISOLATED = {"max_efficiency": 0.870, "mem_efficiency": 0.915, "dispatch_us": 35.2}


def test_fp8_efficiency_against_deepgemm():
    # DeepGEMM README (deepseek-ai/DeepGEMM a6d97a1), H800 (H100 compute and HBM3), fp8 dense GEMMs:
    # M=4096 N=7168 K=16384: 1358 TFLOP/s; M=4096 N=4096 K=7168: 1304 TFLOP/s. Our fp8 efficiency is
    # MAMF's (1402.6 TFLOP/s), a different harness: within 10 %
    h100 = arch.preset("h100-like")
    for (m, n, k), measured in (((4096, 7168, 16384), 1358), ((4096, 4096, 7168), 1304)):
        r = arch.gemm_report(h100, m, n, k, precision="fp8")
        assert r["achieved_flops"] / 1e12 == pytest.approx(measured, rel=0.10)


def test_collective_steps_follow_the_ring():
    # Thakur et al. 2005: a ring all-reduce over t devices is 2(t - 1) steps; a reduce t - 1
    from dse.model.graph_columns import sync_steps
    assert sync_steps(np.array([8, 4, 1]), np.array([8, 1, 4])).tolist() == [14, 3, 1]
    # 8 x A100 nccl-tests all-reduce of 32 KiB: 43.8 us (S. Bekman, ml-engineering network/README.md);
    # 14 steps at the nvlink3 sync latency plus 2 (p - 1)/p x 32 KiB at the bus bandwidth
    link = noc.link_tech("nvlink3")
    model = 14 * link.sync_latency_s + 2 * 7 / 8 * 32768 / link.bandwidth_Bps
    assert model == pytest.approx(43.8e-6, rel=0.10)
    # 4 x A100, 8 bytes: 12.5 us (LLMCompass ae/figure5/h/test_allreduce.py): 6 steps; within 50 %
    assert 6 * link.sync_latency_s == pytest.approx(12.5e-6, rel=0.5)


def test_tensor_parallel_handoffs_pay_the_collective_steps():
    # the same TP=2 decode with and without the link's sync latency: the difference is 2 steps per
    # all-reduce hand-off crossing the GPUs, 2 per layer (attention and FFN outputs) x layers
    case = {"id": "t", "model": "llama-3-8b", "gpu": "h100", "gpus": 2, "phase": "decode", "batch": 1,
            "context": 256, "precision": "bf16"}
    with_sync = gpu_validation.modelled_s(case)
    link = noc.link_tech("nvlink4")
    assert link.sync_latency_s > 0
    import dataclasses
    import noc.links as links
    original = links.link_tech
    try:
        links.link_tech = lambda name: dataclasses.replace(original(name), sync_latency_s=0.0)
        noc.link_tech = links.link_tech
        without = gpu_validation.modelled_s(case)
    finally:
        links.link_tech = original
        noc.link_tech = original
    layers = 32
    # attention -> FFN and FFN -> next attention per layer, the embedding and LM head hand-offs besides
    assert with_sync - without == pytest.approx(2 * layers * 2 * link.sync_latency_s, rel=0.1)


def test_whole_step_against_measured_gpus():
    rows = gpu_validation.table()
    print("\n" + gpu_validation.markdown(rows))
    validation = [r for r in rows if r["set"] == "validation"]
    # issue 22 measured 59 % (a factor 1.59) before this model, 28.6 % with the A100 preset at LLMCompass's
    # isolated GEMM rate, 23.3 % (22 of 30 within 25 %) with a dispatch floor per kernel; with the host
    # issuing ahead and waiting per sequence 25.5 %, 20 of 28: the batch-1 decodes come within 12 % at 1 to
    # 8 GPUs, Splitwise's short prefills fall to 0.63-0.81 (docs/validation.md says why); the goal is 10 %.
    # With mem_efficiency of the sustained bandwidth (no second derating) 23.4 %, 19 of 28: TRT-LLM v0.5's
    # 128-token prefills on one A100 and one H100, already fast, move from 0.754 and 0.769 to 0.747
    assert geomean_error(r["ratio"] for r in validation) < 0.27
    assert sum(abs(r["ratio"] - 1) <= 0.25 for r in validation) >= 19
    batch_one_decodes = [r for r in validation if r["phase"] == "decode" and r["batch"] == 1]
    # (0.12 before that change; the DGX H100's 2-GPU decode of 512 tokens then moved from 0.89 to 0.85)
    assert max(abs(r["ratio"] - 1) for r in batch_one_decodes) < 0.16
    by_source = {}
    for r in validation:
        by_source.setdefault(r["source"], []).append(r)
    assert geomean_error(r["ratio"] for r in by_source["trtllm-v0.14"]) < 0.10      # decode, optimised runtime
    assert geomean_error(r["ratio"] for r in by_source["llmcompass"]) < 0.10        # GPT-3 layers, eager


def test_attention_math_stays_16_bit_under_fp8():
    # FP8 recipes quantize the linear layers; fused attention computes in FP16/BF16 (NVIDIA Transformer
    # Engine FP8 primer): on H100 the projection runs at the fp8 rate, the scores at the bf16 rate
    import workloads
    ops = workloads.extract("llama-3-8b", phase="prefill", batch=1, context=2048, precision="fp8").ops
    h100 = arch.preset("h100-like")
    fp8 = arch.op_costs(ops, [h100], "fp8")
    bf16 = arch.op_costs(ops, [h100], "bf16")
    names = ops["name"].to_numpy()
    score = names == "attn_score"
    qkv = names == "qkv_proj"
    assert fp8.time_s[score, 0] == pytest.approx(bf16.time_s[score, 0])
    assert (fp8.time_s[qkv, 0] < 0.7 * bf16.time_s[qkv, 0]).all()
    assert (fp8.utilisation[score, 0] <= 1.0).all() and (fp8.utilisation[score, 0] > 0.3).all()


def _one_chiplet_study(tmp_path, model="llama-3-8b"):
    text = f"""name: one
workload: {{model: {model}, phase: decode, batch: 1, context: 512, precision: bf16}}
hardware:
  chiplets: [{{preset: h100-like}}]
  memory: [{{kind: hbm3, stacks: [5, 5]}}]
  package: {{topology: mesh, mesh: {{rows: [1, 1], cols: [1, 1]}}, link: ucie-advanced}}
mapping: {{kind: many-to-one}}
search: {{objectives: [latency, energy], population: 4, generations: 1}}
"""
    path = tmp_path / "study.yaml"
    path.write_text(text)
    return path


def test_evaluate_on_a_one_chiplet_package(tmp_path, dse_cli):
    # issue 22 defect: a 1x1 package printed a traceback (no single failures to list)
    import dse
    import yaml as _yaml
    study_path = _one_chiplet_study(tmp_path)
    prepared = dse.prepare(dse.load_study(study_path))
    design = prepared.evaluator.designs(prepared.space.lower[None, :])[0]
    design_path = tmp_path / "d.yaml"
    design_path.write_text(_yaml.safe_dump(design.to_dict()))
    code, out, err = dse_cli("evaluate", str(study_path), "--design", str(design_path))
    assert code == 0, err
    report = prepared.package_evaluator.failure_report(design)
    assert list(report["retained_frac"]) == [0.0]          # losing the only chiplet keeps nothing
    metrics = prepared.evaluator.evaluate_designs([design]).iloc[0]
    assert metrics["fault_tolerance_frac"] == 0.0


def test_model_paths_resolve_against_the_study_folder(tmp_path, monkeypatch):
    # issue 22 defect: a config.json path was read from the working directory
    import shutil
    import dse
    (tmp_path / "models").mkdir()
    shutil.copy(ROOT / "workloads" / "presets" / "gpt2.json", tmp_path / "models" / "mine.json")
    study_path = _one_chiplet_study(tmp_path, model="models/mine.json")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    study = dse.load_study(study_path)
    assert Path(study.workload.model) == tmp_path / "models" / "mine.json"
    assert dse.prepare(study).tables.n_units > 0


def test_double_buffered_weights_by_hand():
    from arch.systolic import double_buffered_cycles, gemm_cycles
    R, C = 128, 128
    # one fold: nothing to hide, SCALE-Sim's 2R + C + T - 2
    assert double_buffered_cycles(8, 128, 128, R, C, 1) == gemm_cycles(8, 128, 128, R, C, 1) == 2 * R + C + 8 - 2
    # decode, M = T = 8 tokens, 16 folds of weights: each later fold waits only for its R-cycle tile load
    folds = 16
    t = 8
    assert double_buffered_cycles(t, 128 * 4, 128 * 4, R, C, 1) == 2 * R + C - 2 + folds * t + (folds - 1) * (R - t)
    # 2.7x fewer cycles than fold after fold here: (2R + C + T - 2) = 390 per fold against 128
    assert gemm_cycles(t, 512, 512, R, C, 1) / double_buffered_cycles(t, 512, 512, R, C, 1) == pytest.approx(6240 / 2310)
    # output stationary holds nothing to load: unchanged
    assert double_buffered_cycles(300, 500, 700, R, C, 0) == gemm_cycles(300, 500, 700, R, C, 0)


def test_double_buffered_array_reaches_full_rate_at_a_batch_of_its_rows():
    # TPU v1 (Jouppi et al., ISCA 2017): a 256 x 256 weight-stationary array whose weight FIFO and
    # double-buffered weights hide the 256-cycle tile shift once a tile is used for at least 256 rows
    # of inputs; then the array runs at its 92 TOPS peak (65,536 MACs x 2 x 700 MHz)
    from arch.systolic import double_buffered_cycles
    R = C = 256
    tpu = arch.SystolicChiplet(name="tpu-v1", node="7nm", freq_hz=700e6, rows=R, cols=C, dataflow="ws",
                               sram_bytes=24 * 2**20, pe_precision="int8")
    assert tpu.peak_flops("int8") / 1e12 == pytest.approx(91.75, rel=0.01)
    K = N = 256 * 64                                   # 4,096 weight tiles
    for batch, expected in ((256, 1.0), (128, 0.5), (8, 8 / 256)):
        cycles = double_buffered_cycles(batch, N, K, R, C, 1)
        util = batch * N * K / (R * C * cycles)
        assert util == pytest.approx(expected, rel=0.01)


def test_kv_precision_sizes_the_cache_apart_from_the_weights():
    # Llama-3-8B: 2 x 32 layers x 8 KV heads x 128 = 65,536 KV elements per token; fp8 weights with a
    # 16-bit cache (the common serving setup) keep 128 KiB per token and read it at 2 bytes per element
    import workloads
    fp8 = workloads.extract("llama-3-8b", precision="fp8", batch=2, context=1000)
    mixed = workloads.extract("llama-3-8b", precision="fp8", kv_precision="fp16", batch=2, context=1000)
    assert fp8.summary["kv_cache_bytes_per_token"] == 65536
    assert mixed.summary["kv_cache_bytes_per_token"] == 131072
    assert mixed.summary["kv_bytes_per_step"] == 2 * fp8.summary["kv_bytes_per_step"]
    assert mixed.summary["weight_bytes_per_step"] == fp8.summary["weight_bytes_per_step"]
    same = workloads.extract("llama-3-8b", precision="fp8", kv_precision="fp8", batch=2, context=1000)
    assert same.ops.equals(fp8.ops)


def test_study_kv_precision_reaches_the_tables(tmp_path):
    import dse
    base = _one_chiplet_study(tmp_path)
    text = base.read_text().replace("precision: bf16}", "precision: fp8}")
    plain = dse.prepare(dse.Study.from_dict(yaml.safe_load(text))).tables
    mixed_text = text.replace("precision: fp8}", "precision: fp8, kv_precision: bf16}")
    mixed = dse.prepare(dse.Study.from_dict(yaml.safe_load(mixed_text))).tables
    assert mixed.unit_kv_bytes.sum() == pytest.approx(2 * plain.unit_kv_bytes.sum())
    with pytest.raises(dse.StudyError, match="kv_precision"):
        dse.Study.from_dict(yaml.safe_load(text.replace("precision: fp8}", "precision: fp8, kv_precision: fp6}")))


def test_link_overrides_change_the_package_network(tmp_path):
    # a study may give its link technology another bandwidth, latency or sync latency
    import dse
    text = _one_chiplet_study(tmp_path).read_text().replace(
        "package: {topology: mesh, mesh: {rows: [1, 1], cols: [1, 1]}, link: ucie-advanced}",
        "package: {topology: mesh, mesh: {rows: [1, 1], cols: [2, 2]}, link: nvlink4, "
        "link_overrides: {bandwidth_gbps: 100, latency_ns: 500, sync_latency_us: 10}}")
    study = dse.Study.from_dict(yaml.safe_load(text))
    tech = study.hardware.package.link_tech()
    assert (tech.bandwidth_Bps, tech.latency_s, tech.sync_latency_s) == pytest.approx((100e9, 500e-9, 10e-6))
    assert study.hardware.package.network(1, 2).link_bw_Bps.tolist() == [100e9, 100e9]
    assert dse.prepare(study).tables.link.sync_latency_s == pytest.approx(10e-6)
    with pytest.raises(dse.StudyError, match="link_overrides"):
        dse.Study.from_dict(yaml.safe_load(text.replace("bandwidth_gbps: 100", "bandwidth_gbps: -1")))


def test_expert_tp_shards_routed_experts_evenly():
    # TensorRT-LLM's MoE tensor parallelism: each of t shards holds 1/t of every expert's FFN width
    import workloads
    whole = workloads.extract("mixtral-8x7b", tp=4, batch=8, context=512)
    sharded = workloads.extract("mixtral-8x7b", tp=4, batch=8, context=512, expert_tp=True)
    assert sharded.summary["total_params"] == whole.summary["total_params"]
    g, h = sharded.graph.nodes, whole.graph.nodes
    for e in range(8):
        pieces = [f"L0-31.e{e}.tp{i}" for i in range(4)]
        assert sum(g[p]["weight_bytes"] for p in pieces) == pytest.approx(h[f"L0-31.e{e}"]["weight_bytes"])
    gemm = lambda wl, unit: wl.ops[(wl.ops["unit"] == unit) & (wl.ops["engine"] == "matrix")]["flops"].sum()
    assert gemm(sharded, "L0-31.e3.tp2") == pytest.approx(gemm(whole, "L0-31.e3") / 4)
    # an expert width tp does not divide is refused, naming it
    cfg = workloads.load_model("mixtral-8x7b")
    import dataclasses
    odd = dataclasses.replace(cfg, expert_width=14335)
    with pytest.raises(workloads.WorkloadError, match="expert width"):
        workloads.extract_transformer(odd, tp=2, batch=8, context=512, expert_tp=True)


def test_expert_tp_study_evaluates(tmp_path):
    import dse
    text = _one_chiplet_study(tmp_path, model="mixtral-8x7b").read_text()
    text = text.replace("context: 512, precision: bf16}", "context: 512, precision: fp8, tp: 2, expert_tp: true}")
    text = text.replace("cols: [1, 1]}", "cols: [2, 2]}").replace("stacks: [5, 5]", "stacks: [10, 10]")
    prepared = dse.prepare(dse.Study.from_dict(yaml.safe_load(text)))
    names = prepared.tables.unit_names
    assert "L0-31.e0.tp1" in names
    from dse.study.space import Design
    design = Design(rows=1, cols=2, chiplets=[prepared.tables.kind_names[0]] * 2, hbm_stacks=[5, 5], ddr_channels=0,
                    link="ucie-advanced", mapping="many-to-one",
                    placement={u: [int(u.endswith(".tp1"))] for u in names})
    metrics = prepared.evaluator.evaluate_designs([design], with_faults=False).iloc[0]
    assert np.isfinite(metrics["latency_s"]) and metrics["capacity_short_bytes"] == 0
