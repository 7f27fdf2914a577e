"""``dse memory`` and memory overrides in a study."""
import json

import pytest
import yaml

import dse
import memory


def test_lists_every_preset(dse_cli):
    code, out, err = dse_cli("memory")
    assert code == 0, err
    for kind in memory.memory_kinds():
        assert kind in out


def test_report_of_four_hbm3_stacks(dse_cli):
    code, out, err = dse_cli("memory", "hbm3", "--stacks", "4")
    assert code == 0, err
    assert "hbm3 x 4 stacks" in out
    assert "3276.8 GB/s" in out                        # 4 x 819.2
    assert "64.0 GiB" in out
    assert "4.50 pJ/bit" in out


def test_json_is_si_and_matches_the_api(dse_cli):
    code, out, _ = dse_cli("memory", "ddr5", "--channels", "2", "--set", "capacity_gib=64", "--json")
    assert code == 0
    r = json.loads(out)
    spec = memory.memory_preset("ddr5", {"capacity_gib": 64})
    assert r["peak_bandwidth_Bps"] == pytest.approx(2 * 38.4e9)
    assert r["capacity_bytes"] == 2 * 64 * 2**30
    assert r["streaming"]["bandwidth_Bps"] == pytest.approx(memory.effective_bandwidth_Bps(spec, 2))
    assert r["scattered_64B"]["row_hit_rate"] == 0.0   # a 64 B line is one DDR5 burst
    assert r["row_miss_latency_s"] == pytest.approx(memory.access_latency_s(spec, 0.0))
    assert r["streaming"]["loaded_latency_s"]["0.8"] > r["streaming"]["latency_s"]


@pytest.mark.parametrize("args,words", [
    (["ddr5", "--stacks", "2"], "ddr5 is counted in channels, not stacks"),
    (["hbm3", "--channels", "2"], "hbm3 is counted in stacks, not channels"),
    (["hbm9"], "unknown memory kind 'hbm9'"),
    (["hbm3", "--set", "capacity_gb=3"], "unknown override 'capacity_gb'"),
    (["hbm3", "--set", "capacity_gib"], "--set expects KEY=VALUE"),
    (["hbm3", "--set", "capacity_gib=big"], "'big' is not a number"),
])
def test_bad_input_is_one_line_and_exit_2(dse_cli, args, words):
    code, out, err = dse_cli("memory", *args)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert words in err


def test_study_overrides_reach_the_tables(tiny_dict):
    tiny_dict["hardware"]["memory"][0]["overrides"] = {"capacity_gib": 24, "data_rate_gbps": 8.0}
    prepared = dse.prepare(dse.Study.from_dict(tiny_dict))
    assert prepared.tables.hbm.capacity_bytes == 24 * 2**30
    assert prepared.tables.hbm_bw_Bps == pytest.approx(memory.effective_bandwidth_Bps(prepared.tables.hbm, 1))
    assert prepared.tables.hbm.peak_bandwidth_Bps == pytest.approx(1024e9)


@pytest.mark.parametrize("overrides,words", [
    ({"capacity_gb": 24}, "unknown override 'capacity_gb'; allowed:"),
    ({"tRCD_ns": -3}, "tRCD_ns must be > 0"),
])
def test_bad_study_override_names_the_key(dse_cli, tiny_dict, tmp_path, overrides, words):
    tiny_dict["hardware"]["memory"][0]["overrides"] = overrides
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(tiny_dict))
    code, _, err = dse_cli("validate", path)
    assert code == 2
    assert "hardware.memory[0].overrides: memory hbm3: " in err and words in err, err
