"""``dse gemm`` and the chiplet entries of a study (kinds, presets, overrides, errors naming the key)."""
import json

import pytest
import yaml

import arch
from dse.study import Study


def test_gemm_on_an_array_matches_the_model(dse_cli):
    code, out, err = dse_cli("gemm", "--m", 96, "--n", 128, "--k", 64, "--rows", 16, "--cols", 16, "--dataflow", "ws",
                             "--sram-kb", 16, "--bandwidth", 4, "--no-accumulate", "--json")
    assert code == 0, err
    r = json.loads(out)
    # SCALE-Sim 3.0.0 on the same GEMM, array, 16 KB buffers and 4 words/cycle: 4,543 + 1 stall-free cycles
    assert r["cycles"] == 4544
    assert r["sram_ifmap_reads"] == 49152 and r["sram_filter_reads"] == 8192
    assert r["dram_ofmap_writes"] == 4 * 96 * 128
    assert r["stall_cycles"] > 0 and r["total_cycles"] == r["cycles"] + r["stall_cycles"]
    assert r["achieved_flops"] == pytest.approx(2 * 96 * 128 * 64 / (r["total_cycles"] / 1e9))


def test_gemm_on_a_preset_chiplet_reports_latency_and_flops(dse_cli):
    code, out, err = dse_cli("gemm", "--chiplet", "h100-like", "--m", 8192, "--n", 8192, "--k", 8192,
                             "--precision", "bf16", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["kind"] == "gpu" and r["latency_s"] > 0
    assert r["achieved_flops"] == pytest.approx(2 * 8192 ** 3 / r["latency_s"])
    code, out, _ = dse_cli("gemm", "--chiplet", "sa-128-ws", "--m", 128, "--n", 128, "--k", 128, "--memory", "hbm3",
                           "--stacks", 1)
    assert code == 0 and "latency_s" in out and "achieved_flops" in out


@pytest.mark.parametrize("m,n,k", [(1, 12288, 4096), (16, 4096, 4096)])
def test_gemm_on_a_preset_chiplet_reads_its_datasheet_memory(dse_cli, m, n, k):
    # issue 34: 12.2 us and 3.05 us before, the compute alone, while the weights (100.7 MB, 33.5 MB) take at
    # least bytes / 3.35 TB/s (H100 SXM datasheet: 5 HBM3 stacks at 5.24 Gb/s per pin); Vidur measures 38 us
    # and 16 us (arch/data/calibration/h100_gemm_vidur.csv, M = 1 and 8)
    code, out, err = dse_cli("gemm", "--chiplet", "h100-like", "--m", m, "--n", n, "--k", k, "--json")
    assert code == 0, err
    r = json.loads(out)
    weights = 2 * n * k
    assert r["dram_bytes"] >= weights
    assert r["latency_s"] >= weights / 3.3536e12
    assert r["peak_bandwidth_Bps"] == pytest.approx(5 * 5.24e9 * 1024 / 8)
    assert r["memory"].startswith("hbm3 x 5 stacks") and "h100 datasheet" in r["memory"]
    assert r["bound"] == "memory"
    code, out, _ = dse_cli("gemm", "--chiplet", "h100-like", "--m", m, "--n", n, "--k", k)
    assert "hbm3 x 5 stacks" in out and "bound" in out and max(map(len, out.splitlines())) <= 80


def test_gemm_memory_time_by_hand(dse_cli):
    # sa-128-ws: no kernel overhead, a deep pipeline (the bare max), mem_efficiency 1. One token through a
    # 2048 x 2048 bf16 weight: A, B read and C written once, 2 (2048 + 2048^2 + 2048) bytes
    import memory
    bytes_ = 2 * (2048 + 2048 * 2048 + 2048)
    ddr = memory.effective_bandwidth_Bps(memory.memory_preset("ddr5"), 1)
    code, out, err = dse_cli("gemm", "--chiplet", "sa-128-ws", "--m", 1, "--n", 2048, "--k", 2048,
                             "--memory", "ddr5", "--channels", 1, "--json")
    r = json.loads(out)
    assert code == 0, err
    assert r["dram_bytes"] == bytes_ and r["bound"] == "memory"
    assert r["latency_s"] == pytest.approx(bytes_ / ddr) and r["memory"].startswith("ddr5 x 1 channel ")
    # on one HBM3 stack (about 20 x the bandwidth) the array's 33 us of compute binds instead
    code, out, _ = dse_cli("gemm", "--chiplet", "sa-128-ws", "--m", 1, "--n", 2048, "--k", 2048,
                           "--memory", "hbm3", "--stacks", 1, "--json")
    r = json.loads(out)
    assert r["bound"] == "compute" and r["latency_s"] == r["compute_s"] > r["memory_s"]


def test_gemm_agrees_with_the_calibration_model():
    # dse gemm and dse calibrate cost a GEMM with one function (arch.costing.gemm_kernel, the step model's
    # arch.roofline.kernel_time_s): the same time at the same bandwidth at the full clock. dse gemm runs the
    # kernel back to back at the clock the power limit leaves (issue 48), as the step model; the calibration
    # fits kernel sweeps (short replays) at the full clock, so the two agree on a chip without a limit
    import pandas as pd
    from arch import calibrate as C
    h100 = arch.preset("h100-like", power_limit_w=0.0)
    rows = pd.DataFrame({"M": [1.0, 16.0, 4096.0], "N": [12288.0, 4096.0, 4096.0], "K": [4096.0] * 3,
                         "batch": [1.0] * 3, "precision": ["bf16"] * 3})
    for i, row in rows.iterrows():
        r = arch.gemm_report(h100, row.M, row.N, row.K, memory_Bps=3.0e12)
        assert r["latency_s"] * 1e6 == pytest.approx(C.predict_us(h100, rows, 3.0e12)[i])


@pytest.mark.parametrize("args,words", [
    (["--m", 4, "--n", 4, "--k", 4], "give --rows and --cols"),
    (["--chiplet", "z900-like", "--m", 4, "--n", 4, "--k", 4], "unknown chiplet preset 'z900-like'"),
    (["--chiplet", "a100-like", "--rows", 4, "--m", 4, "--n", 4, "--k", 4], "--chiplet takes the array"),
    (["--chiplet", "sa-128-ws", "--m", 4, "--n", 4, "--k", 4], "no datasheet memory; give --memory KIND"),
    (["--chiplet", "sa-128-ws", "--memory", "ddr5", "--m", 4, "--n", 4, "--k", 4], "give --channels N"),
    (["--chiplet", "h100-like", "--memory", "hbm3", "--channels", 2, "--m", 4, "--n", 4, "--k", 4],
     "counted with --stacks"),
    (["--chiplet", "h100-like", "--memory", "hbm9", "--m", 4, "--n", 4, "--k", 4], "'--memory'"),
    (["--chiplet", "h100-like", "--stacks", 0, "--m", 4, "--n", 4, "--k", 4], "'--stacks'"),
    (["--rows", 4, "--cols", 4, "--stacks", 2, "--m", 4, "--n", 4, "--k", 4], "go with --chiplet"),
])
def test_gemm_bad_input_exits_2(dse_cli, args, words):
    code, out, err = dse_cli("gemm", *args)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1 and words in err, err


def _study(tiny_dict, chiplets):
    data = dict(tiny_dict)
    data["hardware"] = {**tiny_dict["hardware"], "chiplets": chiplets}
    return Study.from_dict(data)


def test_study_takes_presets_kinds_and_overrides(tiny_dict):
    study = _study(tiny_dict, [
        {"preset": "h100-like"},
        {"preset": "a100-like", "name": "a100-fast", "freq_ghz": 1.6},
        {"name": "cpu", "kind": "cpu", "node": "5nm", "freq_ghz": 3.0, "cores": 16, "llc_mb": 64},
        {"name": "sa", "kind": "systolic", "array": [32, 32], "sram_mb": 4, "freq_ghz": 1.0, "node": "7nm",
         "overrides": {"wafer_cost_usd": 12000, "mac_energy_pj": {"bf16": 0.5}}},
        {"name": "rc", "kind": "reconfigurable", "array": [64, 64], "sram_mb": 4, "freq_ghz": 1.0, "node": "7nm",
         "modes": [{"array": [64, 64], "dataflow": "ws"}, {"array": [32, 32], "dataflow": "os", "arrays": 4}]},
    ])
    chips = [c.to_chiplet() for c in study.hardware.chiplets]
    assert [c.name for c in chips] == ["h100-like", "a100-fast", "cpu", "sa", "rc"]
    assert isinstance(chips[0], arch.GpuChiplet) and chips[1].freq_hz == 1.6e9 and chips[1].sms == 108
    assert chips[3].tech().wafer_cost_usd == 12000 and chips[3].tech().mac_energy_pj["bf16"] == 0.5
    assert arch.chiplet_cost_usd(chips[3]) > arch.known_good_die_cost_usd(arch.chiplet_area_mm2(chips[3]), "7nm")
    assert isinstance(chips[4], arch.ReconfigurableChiplet)


@pytest.mark.parametrize("entry,key,words", [
    ({"preset": "z900-like"}, "hardware.chiplets[0].preset", "unknown chiplet preset 'z900-like'; available: a100-like"),
    ({"name": "g", "kind": "gpu", "node": "5nm", "freq_ghz": 1.0, "sms": 4, "l2_mb": 8,
      "tensor_flops_per_sm_cycle": {"bf16": 1024}, "array": [8, 8]},
     "hardware.chiplets[0]", "unknown field 'array' for kind gpu"),
    ({"name": "s", "kind": "systolic", "array": [8, 8], "sram_mb": 1, "freq_ghz": 1, "node": "7nm",
      "overrides": {"wafer_price": 3}}, "hardware.chiplets[0]", "unknown technology override 'wafer_price'"),
    ({"kind": "systolic", "array": [8, 8], "sram_mb": 1, "freq_ghz": 1, "node": "7nm"},
     "hardware.chiplets[0]", "every chiplet needs a 'name'"),
    ({"name": "g", "kind": "gpu", "node": "5nm", "freq_ghz": 1.0, "sms": 4, "l2_mb": 8},
     "hardware.chiplets[0]", "missing tensor_flops_per_sm_cycle"),
    ({"name": "s", "kind": "systolic", "array": [8, 8], "sram_mb": 1, "freq_ghz": 1000, "node": "7nm"},
     "hardware.chiplets[0].freq_ghz", "less than or equal to 100"),      # GHz; had no upper bound
])
def test_bad_chiplet_entries_name_the_key(dse_cli, tiny_dict, tmp_path, entry, key, words):
    data = dict(tiny_dict)
    data["hardware"] = {**tiny_dict["hardware"], "chiplets": [entry]}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    code, _, err = dse_cli("validate", path)
    assert code == 2
    assert err.startswith("error: ") and f"{key}: " in err and words in err, err


def test_tables_cost_every_kind(tiny_dict):
    from dse.model.tables import build_tables
    study = _study(tiny_dict, [{"preset": "h100-like"}, {"preset": "sa-fission-128"}, {"preset": "zen4-ccd-like"},
                               {"name": "sa", "kind": "systolic", "array": [16, 16], "sram_mb": 2, "freq_ghz": 1.0,
                                "node": "7nm", "overrides": {"wafer_cost_usd": 12000}}])
    t = build_tables(study)
    chips = [c.to_chiplet() for c in study.hardware.chiplets]
    assert (t.unit_time_s > 0).all() and (t.unit_energy_j > 0).all()
    assert t.kind_peak_dynamic_w == pytest.approx([arch.peak_dynamic_power_w(c, "bf16") for c in chips])
    assert list(t.kind_wafer_cost_usd) == [16988, 9346, 16988, 12000]
    # the GPU is the fastest on every unit, the 16 x 16 array the slowest
    assert (t.unit_time_s[:, 0] < t.unit_time_s[:, 3]).all()
