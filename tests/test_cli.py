"""The dse command: run, validate, models, and bad input reported as exit status 2."""
from __future__ import annotations

import pandas as pd
import pytest
import yaml

from search_helpers import dominates


def test_models_lists_presets(dse_cli):
    code, out, _ = dse_cli("models")
    assert code == 0
    assert "mixtral-8x7b" in out and "MoE 8 experts, top-2" in out
    assert "llama-3-8b" in out and "gpt2" in out


def test_validate_ok(dse_cli, tiny_path):
    code, out, err = dse_cli("validate", tiny_path)
    assert code == 0, err
    assert out.startswith("ok: study 'tiny'")


def test_run_writes_results_folder(dse_cli, tiny_path, tmp_path):
    out_dir = tmp_path / "res"
    code, out, err = dse_cli("run", tiny_path, "--out", out_dir, "--quiet")
    assert code == 0, err
    assert {p.name for p in out_dir.iterdir()} == {"pareto.csv", "evaluations.csv", "study.yaml", "summary.md",
                                                  "convergence.csv", "designs", "plots", "report.md",
                                                  "report.html", ".dse-results", ".dse-written", "placements.parquet",
                                                  "baseline.json"}
    pareto = pd.read_csv(out_dir / "pareto.csv")
    evaluations = pd.read_csv(out_dir / "evaluations.csv")
    assert len(evaluations) == 8 * 3
    assert len(pareto) >= 2
    assert {"design_id", "latency_s", "energy_j_per_token", "area_mm2", "rows", "cols", "placement"} <= set(pareto)
    F = pareto[["latency_s", "energy_j_per_token", "area_mm2"]].to_numpy()
    for i in range(len(F)):
        for j in range(len(F)):
            assert not dominates(F[i], F[j]), "pareto.csv holds a dominated design"
    resolved = yaml.safe_load((out_dir / "study.yaml").read_text())
    assert resolved["workload"]["routing"]["distribution"] == "uniform"   # defaults filled in
    assert resolved["search"]["seed"] == 3
    for design_id in pareto["design_id"]:
        assert (out_dir / "designs" / f"{design_id}.yaml").exists()
    assert "Pareto front" in out


def test_run_seed_override_is_recorded(dse_cli, tiny_path, tmp_path):
    code, _, err = dse_cli("run", tiny_path, "--out", tmp_path / "r", "--seed", "11", "--quiet")
    assert code == 0, err
    assert yaml.safe_load((tmp_path / "r" / "study.yaml").read_text())["search"]["seed"] == 11


def _write(tmp_path, data) -> str:
    path = tmp_path / "study.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(path)


def _mutate(base: dict, path: str, value):
    import copy
    data = copy.deepcopy(base)
    keys = path.split(".")
    node = data
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    last = keys[-1]
    if value is _DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return data


_DELETE = object()

BAD_STUDIES = [
    # (what to change, new value, key the message must name, words it must contain)
    ("colour", "red", "colour", "unknown key 'colour'; allowed: name, workload"),
    ("hardware.chiplets.0.arrray", [8, 8], "hardware.chiplets[0].arrray", "allowed: name, kind, array"),
    ("workload.batch", "many", "workload.batch", "valid integer"),
    ("workload.batch", -4, "workload.batch", "greater than 0"),
    ("workload.model", "gpt-17", "workload.model", "unknown model 'gpt-17'"),
    ("hardware.chiplets", [], "hardware.chiplets", "at least 1 item"),
    ("hardware.chiplets.0.node", "2nm", "hardware.chiplets[0].node", "allowed: 5nm, 7nm"),
    ("hardware.chiplets.0.dataflow", "rs", "hardware.chiplets[0].dataflow", "'os', 'ws' or 'is'"),
    ("hardware.memory.0.kind", "hbm9", "hardware.memory[0]", "unknown memory kind 'hbm9'"),
    ("hardware.package.mesh.rows", [3, 1], "hardware.package.mesh.rows", "above high end"),
    ("hardware.package.link", "carrier-pigeon", "hardware.package.link", "allowed: ucie-advanced"),
    ("search.objectives", ["latency"], "search.objectives", "at least 2 items"),
    ("search.objectives", ["latency", "beauty"], "search.objectives[1]", "'latency', 'throughput'"),
    ("search.population", 2, "search.population", "greater than or equal to 4"),
    ("workload.precision", "fp64", "workload.precision", "'bf16'"),
    ("mapping.kind", "all-to-all", "mapping.kind", "'one-to-one'"),
    ("name", _DELETE, "name", "required key is missing"),
    ("hardware.memory.1.stacks", [1, 2], "hardware.memory[1]", "ddr5 is counted in channels, not stacks"),
    ("faults", {"failed_router": "sometimes"}, "faults.failed_router", "'forwards' or 'fails'"),
    ("faults", {"links": "often"}, "faults.links", "valid boolean"),
]


@pytest.mark.parametrize("path,value,key,words", BAD_STUDIES, ids=[b[0] + ":" + str(b[1])[:12] for b in BAD_STUDIES])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_bad_study_exits_2_naming_the_key(dse_cli, tiny_dict, tmp_path, path, value, key, words, command):
    study = _write(tmp_path, _mutate(tiny_dict, path, value))
    code, out, err = dse_cli(command, study, "--out", tmp_path / "never") if command == "run" \
        else dse_cli(command, study)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert f"{key}: " in err, err
    assert words in err, err
    assert "Traceback" not in err + out
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize("content,words", [
    (None, "does not exist"),
    ("name: [unclosed", "not valid YAML at line 1"),
    ("- just\n- a list\n", "a study is a YAML mapping"),
    (b"\xff\xfe\x00binary", "cannot read study file"),
])
def test_unreadable_study_files(dse_cli, tmp_path, content, words):
    path = tmp_path / "study.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    code, _, err = dse_cli("validate", path)
    assert code == 2
    assert words in err, err


def test_model_config_path_errors(dse_cli, tiny_dict, tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "bert", "hidden_size": 8}')
    code, _, err = dse_cli("validate", _write(tmp_path, _mutate(tiny_dict, "workload.model", str(config))))
    assert code == 2
    assert "workload.model: " in err and "unsupported model_type 'bert'" in err
    config.write_text('{"model_type": "llama", "hidden_size": 8}')
    code, _, err = dse_cli("validate", _write(tmp_path, _mutate(tiny_dict, "workload.model", str(config))))
    assert code == 2 and "missing key 'num_hidden_layers'" in err


def test_unknown_command_option_exits_2(dse_cli, tiny_path):
    code, _, err = dse_cli("run", tiny_path, "--sed", "3")
    assert code == 2 and "No such option" in err


def test_run_with_no_feasible_design_says_why(dse_cli, tmp_path):
    study = yaml.safe_load(open("tests/data/tiny_moe.yaml"))
    study["mapping"] = {"kind": "one-to-one"}                      # 8 experts a layer, at most 2 chiplets
    study["hardware"]["package"]["mesh"] = {"rows": 1, "cols": 2}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    code, out, err = dse_cli("run", path, "--out", tmp_path / "r", "--quiet")
    assert code == 0, err
    assert "0 feasible" in out
    assert "no design was feasible: 100% of designs: one-to-one needs a chiplet per expert" in out
