"""The study key ``runtime:`` (issue 36): the search's runtime objectives are each design's timeline totals,
the snapshot metrics stay the study's, and `dse run`'s report draws the balanced design's timeline."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

import dse
from conftest import DATA
from dse.errors import StudyError
from dse.runtime.scenario import load_scenario
from dse.runtime.search import RUNTIME_COLUMNS
from dse.runtime.timeline import run_timelines

STUDY = DATA / "timeline_study.yaml"
SCENARIO = {"name": "short", "horizon_s": 600, "window_s": 60, "popularity": {"drift": "rotate", "rate_per_s": 1 / 120},
            "failures": {"events": [{"t_s": 250, "chiplet": 1, "repair_s": 200}], "spares": 1}}
OBJECTIVES = ["tokens_over_horizon", "availability", "migration_energy"]


def write_study(tmp_path, runtime: dict | None, objectives=OBJECTIVES, scenario=SCENARIO, base=STUDY):
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump(scenario, sort_keys=False))
    data = yaml.safe_load(base.read_text())
    if runtime is not None:
        data["runtime"] = {"scenario": "scenario.yaml", **runtime}
    data["search"] = {"objectives": objectives, "population": 4, "generations": 1}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize("policy", ["periodic", "on-failure", "static"])
def test_runtime_columns_are_the_timeline_totals(tmp_path, policy):
    """The search's compact plans (dse.runtime.shape's templates, windows at rest) total what the
    window-by-window timeline does; the scenario's failure is stood in for by a spare, then repaired."""
    prepared = dse.prepare(dse.load_study(write_study(tmp_path, {"policy": policy, "every_s": 120})))
    space = prepared.space
    X = np.vstack([space.seeds[:2], np.random.default_rng(1).integers(space.lower, np.asarray(space.upper) + 1,
                                                                       size=(3, space.n_var))])
    metrics = prepared.evaluator(X)
    snapshot = prepared.system_evaluator(X)
    assert list(metrics.columns) == list(snapshot.columns) + list(RUNTIME_COLUMNS)
    assert np.array_equal(metrics[snapshot.columns].to_numpy(), snapshot.to_numpy(), equal_nan=True)
    lines = run_timelines(prepared, prepared.evaluator.designs(X), load_scenario(tmp_path / "scenario.yaml"),
                          policy, 120, strict=False)
    for (column, total) in RUNTIME_COLUMNS.items():
        assert metrics[column].tolist() == pytest.approx([t.totals[total] for t in lines], rel=1e-12)
    assert (metrics["availability_frac"] <= 1).all() and (metrics["tokens_over_horizon"] > 0).all()
    # one population: the windows of every design in it cost what they cost one by one
    one = run_timelines(prepared, prepared.evaluator.designs(X[2:3]), load_scenario(tmp_path / "scenario.yaml"),
                        policy, 120, strict=False)[0]
    assert one.totals == pytest.approx(lines[2].totals, rel=1e-12)


@pytest.mark.parametrize("runtime, objectives, key", [
    (None, OBJECTIVES, "search.objectives"),
    ({"policy": "sometimes"}, OBJECTIVES, "runtime.policy"),
    ({"policy": "threshold", "bound": 0.5}, OBJECTIVES, "runtime.bound"),
    ({"every_s": float("nan")}, OBJECTIVES, "runtime.every_s"),
])
def test_bad_runtime_section(tmp_path, runtime, objectives, key):
    with pytest.raises(StudyError) as exc:
        dse.load_study(write_study(tmp_path, runtime, objectives))
    assert exc.value.key.startswith(key)


def test_bad_scenario_names_the_runtime_key(tmp_path):
    path = write_study(tmp_path, {"policy": "static"}, scenario={"horizon_s": 60, "window_s": 120})
    with pytest.raises(StudyError) as exc:
        dse.prepare(dse.load_study(path))
    assert exc.value.key.startswith("runtime.scenario") and "window_s" in str(exc.value)


def test_runtime_needs_one_package_step(tmp_path):
    path = tmp_path / "study.yaml"          # a training study: the refusal stays (serving ones follow their server)
    path.write_text((DATA.parent.parent / "studies" / "train_llama2_7b.yaml").read_text() +
                    "\nruntime: {scenario: scenario.yaml, policy: static}\n")
    with pytest.raises(StudyError) as exc:
        dse.load_study(path)
    assert exc.value.key == "runtime"


def test_dse_run_reports_the_balanced_design_timeline(dse_cli, tmp_path):
    path = write_study(tmp_path, {"policy": "on-failure"}, objectives=["tokens_over_horizon", "area"])
    out = tmp_path / "results"
    code, _, err = dse_cli("run", path, "--out", out, "--quiet")
    assert code == 0, err
    report = (out / "report.md").read_text()
    assert "(balanced design)" in report and "## Timeline of" in report
    assert list((out / "plots").glob("timeline_*.png")) and list((out / "plots").glob("timeline_*.svg"))
    evaluations = (out / "evaluations.csv").read_text().splitlines()[0]
    assert "tokens_over_horizon" in evaluations and "availability_frac" in evaluations
