"""Issue 15, bad input: each defect found by trying dse as a careless or hostile user, as a test that
failed before. Every bad input is one line ``error: ...`` naming the key, exit status 2, no traceback."""
from __future__ import annotations

import copy
import json

import pytest
import yaml

from dse.study.schema import limits
from dse.study.yaml_input import MAX_DEPTH


def _set(data: dict, path: str, value) -> dict:
    data = copy.deepcopy(data)
    node = data
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node.setdefault(k, {})
    node[int(keys[-1]) if isinstance(node, list) else keys[-1]] = value
    return data


def _one_line_error(code, out, err, *words):
    assert code == 2, (out, err)
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in out + err
    for w in words:
        assert w in err, err


@pytest.fixture
def write(tmp_path):
    def _write(data, name="study.yaml"):
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
        return path
    return _write


@pytest.fixture
def moe_dict():
    return yaml.safe_load(open("tests/data/tiny_moe.yaml"))


# studies that passed validation and then failed in `dse run` with a traceback, or ran with nonsense
TRACEBACKS = [
    ("workload.routing.seed", -1, "workload.routing.seed", "greater than or equal to 0"),
    ("search.seed", -1, "search.seed", "greater than or equal to 0"),
    ("hardware.memory.0.overrides", {"capacity_gib": float("nan")}, "hardware.memory[0].overrides.capacity_gib",
     "finite number"),
    ("hardware.memory.0.stacks", [0, 1_000_000_000], "hardware.memory[0].stacks", "at most 128"),
    ("name", "x" * 300, "name", "at most 100"),
    ("name", "..", "name", "not '.' or '..'"),
    ("hardware.chiplets.0.freq_ghz", float("inf"), "hardware.chiplets[0].freq_ghz", "finite number"),
    ("workload.routing", {"distribution": "zipf", "s": float("inf")}, "workload.routing.s", "finite number"),
    ("workload.routing", {"distribution": "dirichlet", "alpha": 1e-300}, "workload.routing.alpha", "0.001"),
    ("search.reference_point", {"latency": float("inf")}, "search.reference_point.latency", "finite number"),
    ("workload.batch", True, "workload.batch", "valid integer"),
    ("workload.batch", 2.5, "workload.batch", "valid integer"),
    ("workload.per_layer", "yes", "workload.per_layer", "valid boolean"),
    ("hardware.package.mesh", {"rows": [1, 1000], "cols": 2}, "hardware.package.mesh.rows", "at most 16"),
    ("hardware.package.mesh", {"rows": 32, "cols": 32}, "hardware.package.mesh.rows", "at most 16"),
    ("hardware.memory.1.channels", [1, 99], "hardware.memory[1].channels", "at most 64"),
    ("workload.batch", 10**9, "workload.batch", "at most 65,536"),
    ("workload.context", 10**9, "workload.context", "at most 10,000,000"),
    ("search.population", 100_000, "search", "at most 1,000,000"),
    ("mapping.max_replicas", 10**9, "mapping.max_replicas", "at most 256"),
    ("faults.monte_carlo", {"samples": 2, "failures": 10**9}, "faults.monte_carlo.failures", "at most 256"),
    ("hardware.chiplets.0.overrides", {"x": float("nan")}, "hardware.chiplets[0].overrides", "finite"),
]


@pytest.mark.parametrize("path,value,key,words", TRACEBACKS, ids=[f"{t[0]}={str(t[1])[:10]}" for t in TRACEBACKS])
def test_bad_values_are_one_line_naming_the_key(dse_cli, moe_dict, write, tmp_path, path, value, key, words):
    moe_dict["search"]["generations"] = 20
    code, out, err = dse_cli("validate", write(_set(moe_dict, path, value)))
    _one_line_error(code, out, err, f"{key}: ", words)


def test_caps_say_why(dse_cli, tiny_dict, write):
    code, out, err = dse_cli("validate", write(_set(tiny_dict, "hardware.package.mesh.rows", [1, 17])))
    _one_line_error(code, out, err, limits.MESH_SIDE.why)


def test_a_huge_chiplet_library_is_refused_before_it_is_built(dse_cli, tiny_dict, write):
    chiplet = tiny_dict["hardware"]["chiplets"][0]
    tiny_dict["hardware"]["chiplets"] = [{**chiplet, "name": f"c{i}"} for i in range(50_000)]
    code, out, err = dse_cli("validate", write(tiny_dict))
    _one_line_error(code, out, err, "hardware.chiplets: ", "50,000 chiplets listed", "at most 64")
    assert len(err) < 400


def test_options_that_multiply_past_the_library_cap(dse_cli, tiny_dict, write):
    tiny_dict["hardware"]["chiplets"][0]["options"] = {"sram_mb": list(range(1, 11)), "freq_ghz": [1, 2, 3, 4, 5, 6, 7]}
    code, out, err = dse_cli("validate", write(tiny_dict))
    _one_line_error(code, out, err, "70 chiplet variants", "at most 64")


def test_duplicate_yaml_keys_are_refused(dse_cli, write):
    text = open("tests/data/tiny.yaml").read() + "name: other\n"
    code, out, err = dse_cli("validate", write(text))
    _one_line_error(code, out, err, "key 'name' appears twice")


def test_deep_nesting_is_refused_without_recursion(dse_cli, write):
    code, out, err = dse_cli("validate", write("name: " + "[" * 5000 + "]" * 5000 + "\n"))
    _one_line_error(code, out, err, f"nested deeper than {MAX_DEPTH} levels")


def test_exponents_without_a_dot_are_numbers(dse_cli, tiny_dict, write):
    text = yaml.safe_dump(_set(tiny_dict, "constraints", {"peak_power_w": 1500.0})).replace("1500.0", "1.5e3")
    assert "1.5e3" in text
    code, _, err = dse_cli("validate", write(text))
    assert code == 0, err


def test_nan_in_a_model_config(dse_cli, tiny_dict, write, tmp_path):
    config = json.loads(open("workloads/presets/gpt2.json").read())
    config["n_embd"] = float("nan")
    (tmp_path / "config.json").write_text(json.dumps(config))        # json writes NaN, json reads it back
    code, out, err = dse_cli("validate", write(_set(tiny_dict, "workload.model", str(tmp_path / "config.json"))))
    _one_line_error(code, out, err, "workload.model: ", "'n_embd' must be a whole number")
    code, out, err = dse_cli("workload", tmp_path / "config.json")
    _one_line_error(code, out, err, "'n_embd'")


def test_an_moe_family_without_experts(dse_cli, tmp_path):
    config = json.loads(open("workloads/presets/mixtral-8x7b.json").read())
    config["num_local_experts"] = 0
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, err = dse_cli("workload", tmp_path / "config.json")
    _one_line_error(code, out, err, "num_local_experts is 0")


@pytest.mark.parametrize("row,words", [
    ({"layer": 0, "token": 0, "experts": [0, 1], "weights": [0.7, -0.3]}, "finite numbers >= 0"),
    ({"layer": 0, "token": [1], "experts": [0, 1]}, "token is a whole number"),
    ({"layer": [0], "token": 0, "experts": [0, 1]}, "not a MoE layer"),
    ({"layer": 0, "token": 0, "experts": [[0], [1]]}, "distinct indices"),
])
def test_bad_routing_trace_rows(dse_cli, moe_dict, write, tmp_path, row, words):
    (tmp_path / "trace.jsonl").write_text(json.dumps(row) + "\n")
    study = _set(moe_dict, "workload.routing", {"distribution": "trace", "trace": str(tmp_path / "trace.jsonl")})
    code, out, err = dse_cli("validate", write(study))
    _one_line_error(code, out, err, words)


def test_a_graph_package_with_an_unconnected_chiplet(dse_cli, tiny_dict, write):
    tiny_dict["hardware"]["package"] = {"topology": "graph", "mesh": {"rows": 1, "cols": 4},
                                        "links": [{"between": [0, 1]}, {"between": [1, 2]}]}
    code, out, err = dse_cli("validate", write(tiny_dict))
    _one_line_error(code, out, err, "hardware.package.links: ", "chiplet 3 is not connected")


@pytest.mark.parametrize("args,words", [
    (["export", "RES", "--design", "d1", "--to", "nowhere"], "'--to'"),
    (["run", "STUDY", "--out", "FILE"], "'--out'"),
    (["gemm", "--m", "inf", "--n", "2", "--k", "2", "--rows", "4", "--cols", "4"], "not a finite number"),
    (["workload", "gpt2", "--alpha", "nan"], "not a finite number"),
    (["noc", "--rows", "100", "--cols", "2"], "16"),
    (["memory", "hbm3", "--set", "capacity_gib=nan"], "not a finite number"),
    (["frobnicate"], "No such command"),
])
def test_usage_errors_are_one_line(dse_cli, tiny_path, tmp_path, args, words):
    (tmp_path / "file").write_text("x")
    args = [{"RES": tmp_path, "STUDY": tiny_path, "FILE": tmp_path / "file"}.get(a, a) for a in args]
    code, out, err = dse_cli(*args)
    _one_line_error(code, out, err, words)


@pytest.mark.parametrize("content,words", [
    ("rows: 1\x00", "not valid YAML"),
    ("rows: [1,\n", "not valid YAML at line"),
    ("rows: 1\nrows: 2\n", "appears twice"),
])
def test_unreadable_design_files(dse_cli, tiny_path, write, content, words):
    code, out, err = dse_cli("evaluate", tiny_path, "--design", write(content, "design.yaml"))
    _one_line_error(code, out, err, words)


def _design(**changes):
    d = yaml.safe_load(open("tests/data/exports/tiny_2x2.yaml"))
    d["hbm_stacks"] = [1, 0, 1, 0]                  # the study allows 0..2 stacks in all
    d.update(changes)
    return d


@pytest.mark.parametrize("change,key,words", [
    ({"ddr_channels": 99}, "ddr_channels", "99 is outside the study's range 1..2 (hardware.memory[1].channels)"),
    ({"hbm_stacks": [1, 1, 0, 5]}, "hbm_stacks", "7 in all is outside the study's range 0..2"),
    ({"placement": {"embed": [0, 1, 2], "L0-11.attn": [1], "L0-11.ffn": [2], "lm_head": [0]}}, "placement.embed",
     "3 copies, outside the study's space: mapping.max_replicas is 2"),
    ({"mapping": "one-to-many"}, "mapping", "'one-to-many' is not a choice of the study; allowed: many-to-many"),
    ({"colour": "red"}, "colour", "unknown key 'colour'; allowed: rows, cols"),
    ({"placement": "all"}, "placement", "must map each unit to its slot"),
    ({"chiplets": "big"}, "chiplets", "must be a list of chiplet kind names"),
    ({"rows": True}, "rows", "must be a whole number >= 1"),
    ({"hbm_stacks": [1, 1, 0, 10**9]}, "hbm_stacks", "outside the study's range"),
])
def test_designs_outside_the_space_are_refused(dse_cli, tiny_path, write, change, key, words):
    code, out, err = dse_cli("evaluate", tiny_path, "--design", write(_design(**change), "design.yaml"))
    _one_line_error(code, out, err, f"{key}: ", words)


def test_one_to_one_designs_keep_experts_apart(dse_cli, moe_dict, write):
    import dse
    moe_dict["mapping"] = {"kind": "one-to-one"}
    moe_dict["hardware"]["package"]["mesh"] = {"rows": 3, "cols": 3}
    study_path = write(moe_dict)
    units = dse.prepare(dse.load_study(study_path)).tables.unit_names
    design = {"rows": 3, "cols": 3, "chiplets": ["big"] * 9, "hbm_stacks": [1] * 9, "ddr_channels": 1,
              "link": "ucie-advanced", "mapping": "one-to-one", "placement": {u: [0] for u in units}}
    code, out, err = dse_cli("evaluate", study_path, "--design", write(design, "design.yaml"))
    _one_line_error(code, out, err, "a one-to-one mapping gives each expert a chiplet of its own")


def test_what_if_may_leave_the_space_but_not_the_caps(tiny_path):
    import dataclasses

    import dse
    from dse.results.design_file import design_from_dict
    study = dse.load_study(tiny_path)
    design = design_from_dict(_design())
    more = dse.results.whatif.evaluate(dataclasses.replace(design, ddr_channels=8), study)   # range is 1..2
    assert more["latency_s"] > 0
    with pytest.raises(dse.StudyError, match="ddr_channels: 1000 in all; at most 64"):
        dse.results.whatif.evaluate(dataclasses.replace(design, ddr_channels=1000), study)
