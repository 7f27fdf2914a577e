"""``dse compare``: one reference point, hypervolumes and dominance checked by hand on small fronts."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

import dse
from dse.cli.safe_write import written_by_dse
from dse.results.compare import compare_runs, dominates, hypervolume
import numpy as np

#: run A's and run B's fronts as (latency_s, energy_j_per_token): both objectives are costs as they are
FRONT_A = {"a1": (0.0, 10.0), "a2": (5.0, 5.0), "a3": (10.0, 0.0)}
FRONT_B = {"b1": (2.0, 8.0), "b2": (6.0, 6.0), "b3": (8.0, 1.0)}


def results_folder(folder, front: dict, objectives=("latency", "energy"), tiny_path="tests/data/tiny.yaml"):
    """A results folder written by hand: the tiny study with ``objectives`` and ``front`` as pareto.csv."""
    folder.mkdir(parents=True)
    study = dse.load_study(tiny_path).resolved()
    study["search"]["objectives"] = list(objectives)
    (folder / "study.yaml").write_text(yaml.safe_dump(study, sort_keys=False))
    rows = [{"design_id": d, "rows": 2, "cols": 2, "latency_s": lat, "energy_j_per_token": e, "area_mm2": 100.0,
             "feasible": True, "pareto": True} for d, (lat, e) in front.items()]
    pd.DataFrame(rows).to_csv(folder / "pareto.csv", index=False)
    return folder


@pytest.fixture
def two_runs(tmp_path):
    return results_folder(tmp_path / "A", FRONT_A), results_folder(tmp_path / "B", FRONT_B)


def test_hypervolume_by_hand(two_runs):
    """Union ideal (0, 0), nadir (10, 10): A normalised is (0, 1), (0.5, 0.5), (1, 0) under the reference
    (1.1, 1.1): slabs 0.5 x 0.1 + 0.5 x 0.6 + 0.1 x 1.1 = 0.46 of 1.21; B is (0.2, 0.8), (0.6, 0.6),
    (0.8, 0.1): 0.4 x 0.3 + 0.2 x 0.5 + 0.3 x 1.0 = 0.52 of 1.21."""
    c = compare_runs(list(two_runs))
    assert c.hypervolume[0] == pytest.approx(0.46 / 1.21)
    assert c.hypervolume[1] == pytest.approx(0.52 / 1.21)
    assert c.reference_point() == pytest.approx({"latency": 11.0, "energy": 11.0})
    # the same hypervolume from the function alone, and a single point at the ideal dominates the whole box
    assert hypervolume(np.array([[0.0, 0.0]]), np.zeros(2), np.ones(2)) == pytest.approx(1.0)


def test_dominance_by_hand(two_runs):
    """a2 (5, 5) dominates b2 (6, 6); nothing else dominates across the runs. Combined front: all of A,
    b1 and b3."""
    c = compare_runs(list(two_runs))
    by = {(d["run"], d["other"]): d for d in c.dominance}
    assert by[("A", "B")]["dominated"] == 1 and by[("A", "B")]["pairs"] == {"a2": ["b2"]}
    assert by[("A", "B")]["dominating"] == 1 and by[("A", "B")]["other_front_size"] == 3
    assert by[("B", "A")]["dominated"] == 0 and by[("B", "A")]["pairs"] == {}
    assert c.on_combined_front == [3, 2]
    D = dominates(np.array([[1.0, 1.0], [1.0, 2.0]]), np.array([[1.0, 1.0], [2.0, 2.0]]))
    assert D.tolist() == [[False, True], [False, True]]      # equal designs dominate neither


def test_compare_cli_table_and_json(two_runs, dse_cli):
    code, out, err = dse_cli("compare", *map(str, two_runs))
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "b2" in out and "hypervolume (norm.)" in out       # normalised to the shared box, not metric units
    code, out, err = dse_cli("compare", *map(str, two_runs), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert list(data) == ["objectives", "reference_rule", "reference_point", "ideal", "nadir", "runs",
                          "dominance", "written"]
    assert [r["label"] for r in data["runs"]] == ["A", "B"]
    assert list(data["runs"][0]) == ["label", "path", "study", "front_size", "hypervolume", "on_combined_front",
                                     "baseline"]
    assert list(data["dominance"][0]) == ["run", "other", "dominated", "other_front_size", "dominating", "pairs"]
    assert data["runs"][1]["hypervolume"] == pytest.approx(0.52 / 1.21)
    assert data["runs"][0]["baseline"] is None             # folders without baseline.json: an unseeded run


def test_compare_refuses_other_objectives_and_other_folders(two_runs, tmp_path, dse_cli):
    other = results_folder(tmp_path / "C", FRONT_B, objectives=("latency", "area"))
    code, _, err = dse_cli("compare", str(two_runs[0]), str(other))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "objectives" in err
    (tmp_path / "plain").mkdir()
    code, _, err = dse_cli("compare", str(two_runs[0]), str(tmp_path / "plain"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and str(tmp_path / "plain") in err
    assert "not a results folder" in err
    code, _, err = dse_cli("compare", str(two_runs[0]))
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_compare_out_writes_plots_and_page_and_keeps_user_files(two_runs, tmp_path, dse_cli):
    out = tmp_path / "cmp"
    code, _, err = dse_cli("compare", *map(str, two_runs), "--out", str(out))
    assert code == 0, err
    names = {p.name for p in out.iterdir()}
    assert {"front_latency_energy.png", "front_latency_energy.svg", "compare.html"} <= names
    assert all(written_by_dse(out / n) for n in names)
    svg = (out / "front_latency_energy.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    page = (out / "compare.html").read_text()
    assert "a2" in page and "b3" in page and 'src="http' not in page
    code, _, err = dse_cli("compare", *map(str, two_runs), "--out", str(out))     # dse's own files: replaced
    assert code == 0, err
    (out / "compare.html").write_text("<html>mine</html>")
    code, _, err = dse_cli("compare", *map(str, two_runs), "--out", str(out))
    assert code == 2 and "--out" in err and "compare.html" in err
    assert (out / "compare.html").read_text() == "<html>mine</html>"
