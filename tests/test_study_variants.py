"""Topology, link technology and memory kinds left open by the study: one package variant each, chosen by
a gene."""
import numpy as np
import pandas as pd
import pytest
import yaml

import dse


@pytest.fixture(scope="module")
def open_study():
    data = yaml.safe_load(open("tests/data/tiny.yaml"))
    data["hardware"]["package"]["link"] = ["ucie-advanced", "organic-substrate"]
    data["hardware"]["memory"][0]["kind"] = ["hbm3", "hbm3e"]
    return dse.Study.from_dict(data)


def test_every_combination_is_a_variant(open_study):
    labels = [label for label, _ in open_study.variants()]
    assert labels == ["mesh ucie-advanced hbm3 ddr5", "mesh ucie-advanced hbm3e ddr5",
                      "mesh organic-substrate hbm3 ddr5", "mesh organic-substrate hbm3e ddr5"]
    prepared = dse.prepare(open_study)
    assert prepared.space.upper[prepared.space.slices["variant"]][0] == 3


def test_each_variant_evaluates_as_its_own_concrete_study(open_study):
    """A design of variant v has the metrics of the same design in the study with v's choices fixed."""
    prepared = dse.prepare(open_study)
    space = prepared.space
    X = np.random.default_rng(2).integers(space.lower, space.upper + 1, size=(24, space.n_var))
    metrics = prepared.evaluator(X)
    designs = prepared.evaluator.designs(X)
    variants = open_study.variants()
    for x, design, (_, row) in zip(X, designs, metrics.iterrows()):
        label, concrete = variants[x[space.slices["variant"]][0]]
        assert (design.topology, design.link, design.hbm_kind, design.ddr_kind) == tuple(label.split())
        alone = dse.prepare(concrete).evaluator.evaluate_designs([design]).iloc[0]
        pd.testing.assert_series_equal(row, alone, check_names=False)
    # the variants really differ: faster HBM, a slower and dearer-to-bond link
    by = {d.hbm_kind: m for d, (_, m) in zip(designs, metrics.iterrows())}
    assert set(by) == {"hbm3", "hbm3e"}
    # round trip: designs evaluate again to the same numbers
    again = prepared.evaluator.evaluate_designs(designs)
    assert np.allclose(again.to_numpy(), metrics.to_numpy(), equal_nan=True)


def test_run_records_the_choices(open_study, tmp_path):
    result = open_study.run()
    assert {"link", "hbm_kind", "ddr_kind"} <= set(result.pareto.columns)
    assert set(result.evaluations["link"]) == {"ucie-advanced", "organic-substrate"}
    out = dse.write_results(result, tmp_path / "r")
    design_id = result.pareto["design_id"].iloc[0]
    d = dse.read_design(out / "designs" / f"{design_id}.yaml")
    assert d.hbm_kind in ("hbm3", "hbm3e") and d.link in ("ucie-advanced", "organic-substrate")


@pytest.mark.parametrize("path,value,key,words", [
    ("memory.0.kind", ["hbm3", "ddr5"], "hardware.memory[0]", "all HBM or all DDR/LPDDR"),
    ("memory.0.kind", ["hbm3", "hbm7"], "hardware.memory[0]", "unknown memory kind 'hbm7'"),
    ("package.link", ["ucie-advanced", "tin-cans"], "hardware.package.link", "unknown link technology 'tin-cans'"),
    ("package.link", [], "hardware.package.link", "at least one technology"),
    ("package.topology", [], "hardware.package.topology", "distinct choices among mesh, torus"),
    ("package.topology", ["mesh", "graph"], "hardware.package.topology", "distinct choices among mesh, torus"),
    ("package.topology", "ring", "hardware.package.topology", "unknown topology; allowed"),
])
def test_bad_choices_name_the_key(tiny_dict, path, value, key, words):
    node = tiny_dict["hardware"]
    parts = path.split(".")
    for p in parts[:-1]:
        node = node[int(p)] if p.isdigit() else node[p]
    node[parts[-1]] = value
    with pytest.raises(dse.StudyError) as err:
        dse.Study.from_dict(tiny_dict)
    assert err.value.key.startswith(key) and words in str(err.value), str(err.value)


def test_topology_is_a_choice_too(tiny_dict):
    """Mesh or torus: on a 3 x 3 package the torus's wrap links shorten routes, so the same design's
    hand-offs cross fewer links (network energy falls) and each variant equals its concrete study."""
    tiny_dict["hardware"]["package"].update(topology=["mesh", "torus"], mesh={"rows": 3, "cols": 3})
    study = dse.Study.from_dict(tiny_dict)
    assert [label.split()[0] for label, _ in study.variants()] == ["mesh", "torus"]
    prepared = dse.prepare(study)
    space = prepared.space
    X = np.random.default_rng(5).integers(space.lower, space.upper + 1, size=(40, space.n_var))
    X[:, space.slices["variant"]] = 0
    mesh_designs = prepared.evaluator.designs(X)
    X[:, space.slices["variant"]] = 1
    torus_designs = prepared.evaluator.designs(X)
    assert {d.topology for d in mesh_designs} == {"mesh"} and {d.topology for d in torus_designs} == {"torus"}
    mesh, torus = prepared.evaluator.evaluate_designs(mesh_designs), prepared.evaluator.evaluate_designs(torus_designs)
    assert (torus["energy_network_j_per_token"] <= mesh["energy_network_j_per_token"] * (1 + 1e-12)).all()
    assert (torus["energy_network_j_per_token"] < mesh["energy_network_j_per_token"]).any()
    concrete = dse.prepare(study.variants()[1][1]).evaluator.evaluate_designs(torus_designs)
    pd.testing.assert_frame_equal(torus, concrete)


def test_validate_lists_the_variants(tiny_dict, tmp_path, dse_cli):
    tiny_dict["hardware"]["package"]["link"] = ["ucie-advanced", "organic-substrate"]
    path = tmp_path / "open.yaml"
    path.write_text(yaml.safe_dump(tiny_dict))
    code, out, _ = dse_cli("validate", path)
    assert code == 0
    assert "2 package variants (mesh ucie-advanced hbm3 ddr5; mesh organic-substrate hbm3 ddr5)" in out


def test_a_design_outside_the_studys_choices_is_named(tiny_dict):
    study = dse.Study.from_dict(tiny_dict)
    prepared = dse.prepare(study)
    design = prepared.evaluator.designs(prepared.space.lower[None, :])[0]
    design.topology = "torus"
    with pytest.raises(dse.StudyError) as err:
        prepared.check_design(design)
    assert err.value.key == "topology" and "allowed: mesh" in str(err.value)


def test_screening_reaches_every_variant(open_study):
    from dse.search.screening import screened
    ev = dse.prepare(open_study).evaluator
    packages = ev.package_evaluators()
    assert len(packages) == len(open_study.variants()) > 1
    with screened(ev):
        assert all(p.screening for p in packages)
    assert not any(p.screening for p in packages)
