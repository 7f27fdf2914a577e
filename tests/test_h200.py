"""Issue 35: power-limited clocks, idle power, the h200 suite and the presets of today's accelerators."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import arch
from arch.costing import gemm_report
from arch.power import sustained_clock
from dse.model.perf_model import idle_energy_j
from dse.validation import gpu, h200


def test_sustained_clock_solves_the_cubic_by_hand():
    """A compute-bound kernel (no memory, no overhead) above the floor draws static + (active + E/tc) s^3:
    its clock under the limit is the cube root of (limit - static) / (active + E/tc)."""
    tc, e, static, active, limit = 1e-3, 0.8, 20.0, 400.0, 700.0
    s, t = sustained_clock(tc, 0.0, 0.0, 0.0, 0.0, e, 0.0, static, active, limit, 0.1)
    expected = ((limit - static) / (active + e / tc)) ** (1 / 3)
    assert s == pytest.approx(expected, rel=1e-6)
    assert t == pytest.approx(tc / expected, rel=1e-6)


def test_kernels_under_the_limit_and_chips_without_one_keep_the_full_clock():
    assert sustained_clock(1e-3, 2e-3, 0.0, 5e-6, 0.0, 0.2, 0.05, 20.0, 300.0, 700.0, 0.7)[0] == 1.0
    assert sustained_clock(1e-3, 0.0, 0.0, 0.0, 0.0, 5.0, 0.0, 20.0, 400.0, 0.0, 0.7) == (1.0, 1e-3)


def test_voltage_floor_leaves_only_the_clock_to_fall():
    """Below the voltage floor power falls linearly with the clock: s = (limit - static) / (dynamic at v_floor^2)."""
    tc, e, static, limit, floor = 1e-3, 1.0, 0.0, 300.0, 0.8
    s, _ = sustained_clock(tc, 0.0, 0.0, 0.0, 0.0, e, 0.0, static, 0.0, limit, floor)
    assert s == pytest.approx(limit / (e / tc * floor ** 2), rel=1e-6)


def test_idle_energy_charges_what_waiting_chiplets_draw_beyond_leakage():
    ct = np.array([[0.3, 0.0]])                   # one stage, run twice: chiplet 0 busy 0.6 s, chiplet 1 never
    e = idle_energy_j(1.0, ct, np.array([1.0]), np.array([2.0]), np.array([0, 1]), np.array([100.0, 50.0]), 2)
    assert e == pytest.approx(100.0 * 0.4 + 50.0 * 1.0)


def test_presets_carry_their_power_figures():
    h200_like = arch.preset("h200-like")
    assert h200_like.power_limit_w == 700 and h200_like.idle_w == 122
    assert arch.preset("h100-like").power_limit_w == 700 and arch.preset("a100-like").power_limit_w == 400
    sa = arch.preset("sa-128-ws")                                            # no idle figure: its leakage
    assert arch.idle_power_w(sa) == arch.static_power_w(sa) > 0
    with pytest.raises(arch.ArchError, match="power_limit_w"):
        arch.preset("h200-like", power_limit_w=-1)


@pytest.mark.parametrize("name, precision, shape, measured_tflops, tolerance", [
    # Maximum achievable matmul FLOPS, S. Bekman, ml-engineering compute/accelerator/README.md
    ("b200-like", "bf16", (1792, 16128, 3072), 1745.0, 0.05),       # B200 SXM, torch 2.7.1+cu128
    ("h200-like", "fp8", (1280, 4096, 12032), 1453.4, 0.08),        # H200 SXM fp8, torch 2.7.1+cu128
    ("mi300x-like", "bf16", (10240, 15360, 8192), 668.4, 0.20),     # MI300X, ROCm 6.3 (fitted on ROCm 6.2's)
])
def test_preset_gemm_against_a_measured_figure(name, precision, shape, measured_tflops, tolerance):
    report = gemm_report(arch.preset(name), *shape, precision=precision)
    assert report["achieved_flops"] / 1e12 == pytest.approx(measured_tflops, rel=tolerance)


def test_tpu_v5e_like_is_a_systolic_chip_at_its_datasheet_rates():
    ch = arch.preset("tpu-v5e-like")
    assert ch.kind == "systolic"
    assert ch.peak_flops("bf16") == pytest.approx(197e12, rel=0.01)          # Cloud TPU docs: 197 TFLOP/s
    assert ch.peak_flops("int8") == pytest.approx(394e12, rel=0.01)          # 394 TOPS


@pytest.mark.parametrize("name", ["h200-like", "b200-like", "mi300x-like", "tpu-v5e-like"])
def test_dse_gemm_runs_on_each_new_preset(dse_cli, name):
    code, out, err = dse_cli("gemm", "--chiplet", name, "--m", "4096", "--n", "4096", "--k", "4096")
    assert code == 0, err
    assert name in out


@pytest.fixture(scope="module")
def suite():
    return h200.table()


def test_h200_steps_and_their_power(suite):
    steps = {r["id"]: r for r in suite if r["figure"] == "step"}
    power = {r["id"]: r for r in suite if r["figure"] == "power"}
    assert len(steps) == 10 and len(power) == 4
    # fitted: within 1 % when fitted; the attention kernel's floor (arch.gpu.flash_attention, h200-like's
    # attention_overhead_us) came after the pytorch-graphs stack's kernel_overhead_us was fitted on the
    # decode of one sequence, which it moves to 1.023 until that is re-fitted
    for cid in h200.CALIBRATION:
        assert steps[cid]["ratio"] == pytest.approx(1.0, abs=0.03)
    # the target is every step within 5 %: 9 of 10 (8 before PyTorch's decode attention ran its
    # heads unsplit and its unfused elementwise kernels moved their operands through memory), the prefill
    # of 128 tokens 0.934 (0.922 before)
    assert sum(abs(r["ratio"] - 1.0) <= 0.05 for r in steps.values()) >= 9
    assert all(abs(r["ratio"] - 1.0) <= 0.07 for r in steps.values())
    # prefill at the power limit (688 W measured), decode under it at the full clock
    # (one clock per kernel: the step's memory-bound kernels run at the full clock below the limit, 672 W)
    assert power["step-prefill-b1-c8192"]["modelled"] == pytest.approx(687.8, rel=0.03)
    assert power["step-decode-b64-c512"]["modelled"] < 700.0
    assert all(abs(r["ratio"] - 1.0) <= 0.14 for r in power.values())    # decode of 128: 0.87


def test_power_limit_is_what_slows_the_long_prefill(monkeypatch):
    case = {**h200.step_case(type("Row", (), dict(phase="prefill", batch=1, context=8192))), "measured_ms": 241.0}
    limited = gpu.step_s(case)
    stack = dict(gpu.STACKS[h200.STACK]["h200"], power_limit_w=0.0)
    monkeypatch.setitem(gpu.STACKS[h200.STACK], "h200", stack)
    assert gpu.step_s(case) < 0.88 * limited           # at the full clock it comes out 15-20 % faster


def test_h200_kernel_sweeps_on_the_rows_not_fitted(suite):
    errors = h200.errors()
    assert errors["gemm-bf16"]["calibration"] < 0.07
    assert errors["gemm-bf16"]["validation"] < 0.10
    assert errors["gemm-fp8"]["validation"] < 0.10
    assert errors["attention"]["validation"] < 0.08           # 31.5 % before the floor and FlashAttention's steps
    assert all(math.isfinite(r["modelled"]) for r in suite)


def test_fidelity_suite_h200(dse_cli, suite):
    code, out, err = dse_cli("fidelity", "--suite", "h200", "--json")
    assert code == 0, err
    report = json.loads(out)["h200"]
    assert report["figures"]["calibration"] == 20 and report["figures"]["validation"] == 58    # 4 OLMoE steps


def _systolic_step_s(power_limit_w: float) -> float:
    """Latency of a small model's prefill on one systolic chiplet with the given power limit."""
    from dse.study.spec import Study
    from dse.system.prepare import prepare

    data = {"name": "systolic-power", "workload": {"model": "llama-2-7b", "phase": "prefill", "batch": 1,
                                                   "context": 512, "precision": "bf16"},
            "hardware": {"chiplets": [{"preset": "sa-128-ws", "power_limit_w": power_limit_w}],
                         "memory": [{"kind": "hbm3", "stacks": [4, 4]}],
                         "package": {"topology": "mesh", "mesh": {"rows": [1, 1], "cols": [1, 1]},
                                     "link": "ucie-standard"}},
            "mapping": {"kind": "many-to-one"}, "faults": {},
            "search": {"objectives": ["latency", "energy"], "population": 4, "generations": 1}}
    from dse.study.space import Design

    prepared = prepare(Study.from_dict(data, source="test"))
    design = Design(rows=1, cols=1, chiplets=[prepared.tables.kind_names[0]], hbm_stacks=[4], ddr_channels=0,
                    link="ucie-standard", mapping="many-to-one",
                    placement={u: [0] for u in prepared.tables.unit_names})
    return float(prepared.evaluator.evaluate_designs([design], with_faults=False)["latency_s"].iloc[0])


def test_a_systolic_chiplet_over_its_limit_slows_too():
    """sa-128-ws draws about 1 W of leakage, 3.6 W of clocks and up to 12 W switching: a 10 W limit slows its
    compute-bound prefill, a 1 kW one does not."""
    free = _systolic_step_s(0.0)
    assert _systolic_step_s(10.0) > 1.2 * free
    assert _systolic_step_s(1000.0) == pytest.approx(free)


def test_pytorch_runs_a_multi_head_decode_unsplit():
    # FlashAttention-2's mha_fwd splits a decode's keys only for grouped-query heads (split-KV requires
    # seqlenq_ngroups_swapped, num_heads > num_heads_k: Dao-AILab/flash-attention issue #1029)
    from arch.gpu import gpu_attention
    rest = (132.0, 4096.0, 0.8, 16.0, 228 * 1024.0, 2.0, 0.0)
    # Llama-2-7B (32 heads, no GQA), one sequence over 4,096 keys: 32 blocks stepping over 32 key blocks
    assert gpu_attention(1.0, 4096.0, 128.0, 32.0, 1.0, *rest, True)[1:] == (32.0, 32.0)
    assert gpu_attention(1.0, 4096.0, 128.0, 32.0, 1.0, *rest, False)[1:] == (128.0, 8.0)   # flash-decoding
    # GQA (4 query heads a KV head, 8 KV heads) splits either way: 8 blocks x 16
    assert gpu_attention(4.0, 4096.0, 128.0, 8.0, 1.0, *rest, True)[1] == 128.0
    assert arch.preset("h200-like").split_kv == "fill"
    assert gpu.STACKS["pytorch-graphs"]["h200"]["split_kv"] == "gqa"


def test_long_context_decode_of_one_sequence_grows_as_measured(suite):
    # measured on the H200 (h200_steps_llama2_7b.csv): 1,024 -> 4,096 tokens of KV add 0.709 ms a step,
    # 22 us a layer (0.26 ms modelled while the heads' keys were split four ways)
    steps = {r["id"]: r for r in suite if r["figure"] == "step"}
    a, b = steps["step-decode-b1-c1024"], steps["step-decode-b1-c4096"]
    assert b["modelled"] - a["modelled"] == pytest.approx(b["measured"] - a["measured"], rel=0.15)


def test_unfused_elementwise_kernels_against_the_measured_timeline():
    # measured (h200_timeline_llama2_7b_decode_b128_c1024.csv, torch.profiler): PyTorch's elementwise
    # kernels of a decode of 128 sequences take 65.5 us of GPU time a layer, without the gaps between
    # kernels that the model's kernel_overhead_us holds; the model's (operands through memory) just above
    import pandas as pd

    from arch.roofline import kernel_time_s
    from dse.model.tables import build_workload
    from dse.validation.common import DATA

    timeline = pd.read_csv(DATA / "h200_timeline_llama2_7b_decode_b128_c1024.csv", comment="#")
    measured = timeline[timeline.kernel.str.startswith("void at::native")].total_us.sum() / 32
    assert measured == pytest.approx(65.5, abs=0.5)
    study = gpu.case_study(h200.step_case(type("Row", (), dict(phase="decode", batch=128, context=1024))))
    ch, ops = study.hardware.library()[0], build_workload(study).ops
    rows = np.flatnonzero(ops.unit.str.startswith("L0").to_numpy() & (ops.engine == "vector").to_numpy()
                          & (ops.act_in_bytes > 0).to_numpy())
    bandwidth = h200.BANDWIDTH_BPS * ch.mem_efficiency

    def per_layer_us(from_dram: bool) -> float:
        c = arch.op_costs(ops, [ch], "bf16", vector_from_dram=from_dram)
        return 1e6 * sum(kernel_time_s(c.time_s[i, 0], c.dram_bytes[i, 0] / bandwidth, 0.0, ch.kernel_overhead_s,
                                       0.0) for i in rows)
    modelled = per_layer_us(True)
    assert measured < modelled < 1.25 * measured
    # 50 MB a layer at the memory's 4.2 TB/s, not the L2's 9 TB/s: about 6 us more
    assert modelled - per_layer_us(False) == pytest.approx(6.5, abs=1.5)


def test_m128_gemms_against_the_measured_cublas_kernels():
    """Issue 53 item 4: cuBLAS's kernels of Llama-2-7B's GEMMs at M = 128 (torch.profiler's GPU time of a
    decode of 128 sequences, h200_timeline_llama2_7b_decode_b128_c1024.csv, 32 calls each) against the
    model's GEMM alone (arch.calibrate.predict_us, the h200-like preset). The nvjet names give the tiles:
    every kernel is one wave of at most 132 thread blocks (qkv 192x64: 64 x 2 = 128; o 64x64: 64 x 2 = 128;
    gate+up 192x128: ceil(22,016 / 192) = 115; down 128x64 split-K 2: 32 x 2 x 2 = 128, plus a
    cublasLt splitKreduce kernel; lm_head 256x128: ceil(32,000 / 256) = 125), and the model is within
    12 % of each: the 128-token prefill's GEMMs are not where its step is short, and no wave tail at
    M = 128 appears in these shapes (Llama-3's gate+up, 150 blocks of that 192-wide tile, would be two)."""
    import pandas as pd

    from dse.validation.common import DATA

    timeline = pd.read_csv(DATA / "h200_timeline_llama2_7b_decode_b128_c1024.csv", comment="#")
    per_call = dict(zip(timeline.kernel, timeline.total_us / timeline["count"]))
    measured = {"qkv": per_call["nvjet_sm90_tst_192x64_64x6_1x2_h_bz_NNT"],
                "o": per_call["nvjet_sm90_tst_64x64_64x13_2x1_v_bz_NNT"],
                "gate_up": per_call["nvjet_sm90_tst_192x128_64x5_4x1_v_bz_coopB_NNT"],
                "down": per_call["nvjet_sm90_tst_128x64_64x8_1x2_h_bz_splitK_NNT"]
                + next(v for k, v in per_call.items() if "splitKreduce" in k),
                "lm_head": per_call["nvjet_sm90_tst_256x128_64x4_2x1_v_bz_coopA_NNT"]}
    assert [math.ceil(n / t) for n, t in ((22016, 192), (32000, 256), (28672, 192))] == [115, 125, 150]
    shapes = pd.DataFrame({"M": 128, "N": [12288, 4096, 22016, 4096, 32000], "K": [4096, 4096, 4096, 11008, 4096],
                           "batch": 1, "precision": "bf16"})
    modelled = dict(zip(measured, h200.gemm_modelled_us(shapes)))
    for name, us in measured.items():
        assert modelled[name] == pytest.approx(us, rel=0.12), name
