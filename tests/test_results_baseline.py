"""The EPLB-style seed (dse.search.baseline) in the results folder: baseline.json written, read back by
`dse.load_results`, and shown by `dse compare`."""
import json
import math

import numpy as np
import pytest

import dse
from dse.errors import StudyError
from dse.model.objectives import OBJECTIVES
from dse.results.compare import compare_runs, dominates
from dse.search.hypervolume import costs


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """The tiny per-layer MoE study (tests/data/tiny_moe.yaml), 8 x 2 designs, seeded with the EPLB-style
    design, written and loaded back."""
    study = dse.load_study("tests/data/tiny_moe.yaml")
    result = dse.run_study(study)
    out = tmp_path_factory.mktemp("seeded") / "run"
    dse.write_results(result, out, report=False)
    return result, out, dse.load_results(out)


def test_the_baseline_survives_the_folder_with_the_runs_metrics(seeded):
    result, out, loaded = seeded
    assert result.baseline is not None
    assert loaded.baseline == result.baseline
    ran = result.evaluations.set_index("design_id").loc[result.baseline]
    back = loaded.evaluations.set_index("design_id").loc[loaded.baseline]
    record = json.loads((out / "baseline.json").read_text())
    assert record["design_id"] == result.baseline
    numeric = [c for c, v in ran.items() if isinstance(v, (int, float, np.integer, np.floating))
               and not isinstance(v, bool)]
    assert {"latency_s", "energy_j_per_token"} <= set(numeric) <= set(record["metrics"])
    for column in numeric:
        value = float(ran[column])
        if math.isfinite(value):
            assert record["metrics"][column] == value, column          # written exactly (repr of a float)
            assert float(back[column]) == pytest.approx(value, rel=1e-12, abs=0.0), column
        else:
            assert record["metrics"][column] is None and not math.isfinite(float(back[column]))
    assert "baseline to beat" in (out / "summary.md").read_text()


def test_a_baseline_naming_no_evaluated_design_is_refused(seeded, tmp_path):
    import shutil
    _, out, _ = seeded
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "baseline.json").write_text(json.dumps({"design_id": "d99999", "metrics": {}}))
    with pytest.raises(StudyError, match="d99999"):
        dse.load_results(copy)
    (copy / "baseline.json").write_text("[1, 2]")
    with pytest.raises(StudyError, match="baseline.json"):
        dse.load_results(copy)


def test_compare_shows_each_runs_seed_and_the_front_designs_dominating_it(seeded, tmp_path, dse_cli):
    """The seed's objectives as written, and dominance recomputed by hand (no worse everywhere, better in one)."""
    result, out, _ = seeded
    c = compare_runs([out, out])
    entry = c.as_dict()["runs"][0]["baseline"]
    objectives = list(result.study.search.objectives)
    seed = result.evaluations.set_index("design_id").loc[[result.baseline]]
    assert entry["design_id"] == result.baseline
    assert entry["objectives"] == {o: float(seed[OBJECTIVES[o][0]].iloc[0]) for o in objectives}
    front = c.runs[0].front
    by_hand = [str(front["design_id"].iloc[k]) for k in range(len(front))
               if all(front[OBJECTIVES[o][0]].iloc[k] <= seed[OBJECTIVES[o][0]].iloc[0] for o in objectives)
               and any(front[OBJECTIVES[o][0]].iloc[k] < seed[OBJECTIVES[o][0]].iloc[0] for o in objectives)]
    assert entry["dominated_by"] == by_hand
    assert dominates(costs(front, objectives), costs(seed, objectives)).any() == bool(by_hand)
    code, text, _ = dse_cli("compare", str(out), str(out))
    assert code == 0 and f"EPLB-style seed {result.baseline}" in text


def test_an_infeasible_baseline_is_named_infeasible_not_given_penalty_figures(seeded):
    """An infeasible design's workload metrics are penalties (evaluations.csv leaves them empty): the summary
    says the seed is infeasible and why, in memory and after a reload alike."""
    import dataclasses

    from dse.results.report import baseline_lines
    result, _, loaded = seeded
    seed_area = float(result.evaluations.set_index("design_id").loc[result.baseline, "area_mm2"])
    study = result.study.model_copy(update={"constraints": result.study.constraints.model_copy(
        update={"area_mm2": seed_area / 2})})
    for run in (result, loaded):
        ev = run.evaluations.copy()
        ev.loc[ev["design_id"] == run.baseline, "feasible"] = False
        line = baseline_lines(dataclasses.replace(run, evaluations=ev, study=study))
        assert len(line) == 1 and "is infeasible (area_mm2 " in line[0] and "over constraints.area_mm2" in line[0], line
        assert "nan" not in line[0] and "e+" not in line[0]
