"""A system study end to end: DeepSeek-V3 over several packages leaves a front with carbon, a report that
shows the system and one package's floorplan, designs `dse evaluate` reads back; carbon as an objective;
bad system keys as one-line errors."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from search_helpers import dominates

import dse
from dse.errors import StudyError
from dse.study.spec import Study

STUDY = Path(__file__).parent.parent / "studies" / "deepseek_v3_multi_package.yaml"


@pytest.fixture(scope="module")
def deepseek_run(tmp_path_factory):
    data = yaml.safe_load(STUDY.read_text())
    data["search"].update(population=8, generations=2)
    study = Study.from_dict(data)
    out = tmp_path_factory.mktemp("ds") / "res"
    result = dse.run_study(study)
    dse.write_results(result, out)
    return study, out


def test_deepseek_study_leaves_a_front_with_carbon(deepseek_run):
    study, out = deepseek_run
    pareto = pd.read_csv(out / "pareto.csv")
    assert len(pareto) >= 1
    assert {"carbon_g_per_token", "embodied_kg", "packages", "nodes", "pipeline", "experts", "replicas"} <= set(pareto)
    assert (pareto["carbon_g_per_token"] > 0).all() and (pareto["packages"] >= 4).all()
    assert (pareto["capacity_short_bytes"] == 0).all()
    F = pareto[["latency_s", "carbon_g_per_token", "cost_usd"]].to_numpy()
    F = np.column_stack([F, -pareto["throughput_tok_s"].to_numpy()])
    assert not any(dominates(F[i], F[j]) for i in range(len(F)) for j in range(len(F)))
    # 671 GB of fp8 weights: no design fits on fewer packages than its memory holds
    per_package = pareto["hbm_stacks"] * 16 * 2**30
    assert (pareto["packages"] / pareto["replicas"] * per_package >= 671e9 * 0.99).all()


def test_report_shows_the_system_and_a_package_floorplan(deepseek_run):
    _, out = deepseek_run
    report = (out / "report.md").read_text()
    assert "**System**" in report and "systems of chiplet packages" in report
    systems = [line for line in report.splitlines() if line.startswith("![system ")]
    floorplans = [line for line in report.splitlines() if line.startswith("![floorplan ")]
    assert systems and floorplans
    for line in systems + floorplans:
        assert (out / line.split("(")[1].rstrip(")")).exists()


def test_a_system_design_reads_back_and_evaluates(deepseek_run, dse_cli):
    study, out = deepseek_run
    design_file = sorted((out / "designs").glob("*.yaml"))[0]
    design = dse.read_design(design_file)
    assert set(design.system) == {"pipeline", "experts", "replicas"}
    code, text, err = dse_cli("evaluate", STUDY, "--design", design_file)
    assert code == 0, err
    assert "per package failure" in text and "carbon_g_per_token" in text
    row = pd.read_csv(out / "pareto.csv").set_index("design_id").loc[design_file.stem]
    again = dse.prepare(study).evaluator.evaluate_designs([design]).iloc[0]
    assert again["latency_s"] == pytest.approx(row["latency_s"], rel=1e-9)
    assert again["carbon_g_per_token"] == pytest.approx(row["carbon_g_per_token"], rel=1e-9)


def test_carbon_is_an_objective_of_a_one_package_study(dse_cli, tiny_dict, tmp_path):
    tiny_dict["search"]["objectives"] = ["latency", "carbon"]
    path = tmp_path / "tiny_carbon.yaml"
    path.write_text(yaml.safe_dump(tiny_dict))
    code, _, err = dse_cli("run", path, "--out", tmp_path / "res", "--quiet")
    assert code == 0, err
    pareto = pd.read_csv(tmp_path / "res" / "pareto.csv")
    F = pareto[["latency_s", "carbon_g_per_token"]].to_numpy()
    assert len(F) >= 1 and (F[:, 1] > 0).all()
    assert not any(dominates(F[i], F[j]) for i in range(len(F)) for j in range(len(F)))
    ev = pd.read_csv(tmp_path / "res" / "evaluations.csv")
    np.testing.assert_allclose(ev["carbon_g_per_token"], ev["carbon_operational_g_per_token"]
                               + ev["carbon_embodied_g_per_token"], rtol=1e-12)


@pytest.mark.parametrize("system, key", [
    ({"preset": "dgx-z"}, "system.preset"),
    ({"fabric": "nvlink4", "parallel": {"pipeline": [0, 2]}}, "system.parallel.pipeline"),
    ({"fabric": "nvlink4", "packages_per_node": 8, "parallel": {"experts": [16]}}, "system.network"),
    ({"fabric": "nvlink4", "parallel": {"replicas": [4096], "experts": [2]}}, "system"),
    ({"fabric": "nvlink4", "colour": "green"}, "system.colour"),
    ({"fabric": "nvlink4", "packages_per_node": 16, "parallel": {"pipeline": [13]}},   # GPT-2: 12 layers
     "system.parallel.pipeline"),
])
def test_bad_system_keys_are_one_line_errors(dse_cli, tiny_dict, tmp_path, system, key):
    tiny_dict["system"] = system
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(tiny_dict))
    code, _, err = dse_cli("validate", path)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and key in err


def test_a_design_without_its_layout_is_refused(tiny_dict):
    tiny_dict["system"] = {"fabric": "nvlink4", "parallel": {"pipeline": [1, 2]}}
    p = dse.prepare(Study.from_dict(tiny_dict))
    X = np.asarray(p.space.lower)[None, :]
    design = p.evaluator.designs(X)[0]
    design.system = None
    with pytest.raises(StudyError) as err:
        p.check_design(design)
    assert err.value.key == "system"


def _trace(path):
    from chakra.schema.protobuf import et_def_pb2 as et
    from chakra.src.third_party.utils.protolib import decodeMessage, openFileRd
    f = openFileRd(str(path))
    decodeMessage(f, et.GlobalMetadata())
    nodes = []
    while True:
        n = et.Node()
        if not decodeMessage(f, n):
            return et, nodes
        nodes.append(n)


def test_astrasim_export_of_the_whole_system(deepseek_run, dse_cli, tmp_path):
    pytest.importorskip("chakra")
    study, out = deepseek_run
    design_id = sorted((out / "designs").glob("*.yaml"))[0].stem
    code, _, err = dse_cli("export", out, "--design", design_id, "--to", "astrasim", "--out", tmp_path / "astra")
    assert code == 0, err
    network = yaml.safe_load((tmp_path / "astra" / "network.yml").read_text())
    design = dse.read_design(out / "designs" / f"{design_id}.yaml")
    s = design.system
    packages = s["pipeline"] * s["experts"] * s["replicas"]
    nodes = -(-packages // 8)
    assert network["npus_count"] == ([8, nodes] if nodes > 1 else [packages])
    assert network["bandwidth"][0] == 450.0 and network["topology"][0] == "Switch"   # NVLink 4 via NVSwitch
    traces = sorted((tmp_path / "astra").glob(f"{design_id}.*.et"))
    assert len(traces) == int(np.prod(network["npus_count"]))
    et, nodes_ = _trace(tmp_path / "astra" / f"{design_id}.0.et")
    kinds = [n.type for n in nodes_]
    # every MoE layer instance of the first package: a dispatch and a combine around its compute
    moe = sum(1 for n in nodes_ if n.type == et.COMP_NODE and ".moe#" in n.name)
    assert kinds.count(et.COMM_COLL_NODE) == (2 * moe if s["experts"] > 1 else 0)
    # the compute of the first package adds up to its own step (the package model), to whole microseconds
    step = float(dse.prepare(study).for_design(design).evaluator.evaluate_designs([design], False)["latency_s"][0])
    compute_us = sum(n.duration_micros for n in nodes_ if n.type == et.COMP_NODE)
    assert compute_us == pytest.approx(step * 1e6, abs=len(nodes_))
    groups = yaml.safe_load((tmp_path / "astra" / "comm_groups.json").read_text())
    if s["experts"] > 1:
        assert sorted(x for g in groups.values() for x in g) == list(range(packages))


def test_astrasim_export_needs_a_system(dse_cli, tiny_path, tmp_path):
    out = tmp_path / "res"
    assert dse_cli("run", tiny_path, "--out", out, "--quiet")[0] == 0
    design_id = sorted((out / "designs").glob("*.yaml"))[0].stem
    code, _, err = dse_cli("export", out, "--design", design_id, "--to", "astrasim")
    assert code == 2 and "--to" in err and len(err.strip().splitlines()) == 1
