"""dse.runtime beyond synthetic drift and chiplet failures (issue 36): popularity from a time-stamped routing
trace, offered load from a request trace, HBM-stack and link failures, reconfigurable chiplets."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from conftest import DATA
from dse.errors import StudyError
from dse.runtime import run_timeline
from dse.runtime.mapping import ExpertGroups
from runtime_helpers import relabelled
from dse.runtime.report import table_rows
from dse.runtime.scenario import load_scenario, scenario_from_dict
from dse.study.spec import Study
from dse.system.prepare import prepare

STUDY = DATA / "timeline_study.yaml"


@pytest.fixture(scope="module")
def prepared(timeline_prepared):
    return timeline_prepared


@pytest.fixture(scope="module")
def design(timeline_design):
    return timeline_design


def scenario(tmp_path, **keys):
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({"horizon_s": 300, "window_s": 60, **keys}, sort_keys=False))
    return load_scenario(path)


def test_popularity_from_a_time_stamped_routing_trace(tmp_path, prepared, design):
    """Each window's hot experts are the trace's: the k-th most chosen expert of the window carries the
    study's k-th largest popularity (ranks computed here by hand)."""
    counts = {0: [0, 0, 0, 0, 0, 9, 3, 1], 1: [1, 0, 7, 0, 2, 0, 0, 0]}     # window -> choices per expert
    rows = [{"t": 60 * w + 1 + 0.1 * i, "layer": layer, "token": i, "experts": [e]}
            for w, c in counts.items() for e, k in enumerate(c) for i in range(k) for layer in (0, 17)]
    (tmp_path / "trace.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    tl = run_timeline(prepared, design, scenario(tmp_path, popularity={"drift": "trace", "trace": "trace.jsonl"}))
    groups = ExpertGroups.from_tables(prepared.tables)
    q = groups.q[0]
    for w in (0, 1, 2):
        c = np.asarray(counts[min(w, 1)], float)        # window 2 has no rows: window 1's ranking stays
        perm = np.empty(8, np.int64)
        perm[np.argsort(-c, kind="stable")] = np.argsort(-q, kind="stable")
        assert sorted(q[perm], reverse=True) == sorted(q, reverse=True)
        assert np.argmax(q[perm]) == np.argmax(c)
        expected = prepared.evaluator.evaluate_designs([relabelled(design, groups, [perm])])["latency_s"].iloc[0]
        assert tl.windows[w]["latency_s"] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("row, words", [
    ({"layer": 0, "token": 0, "experts": [1]}, "line 1"),
    ({"t": -1, "layer": 0, "token": 0, "experts": [1]}, "t must be"),
    ({"t": 1, "layer": 99, "token": 0, "experts": [1]}, "layer 99"),
    ({"t": 1, "layer": 0, "token": 0, "experts": [1, 1]}, "distinct"),
    ({"t": 1, "layer": 0, "token": 0, "experts": [8]}, "expert 8"),
])
def test_routing_trace_read_strictly(tmp_path, prepared, design, row, words):
    (tmp_path / "trace.jsonl").write_text(json.dumps(row))
    with pytest.raises(StudyError) as exc:
        run_timeline(prepared, design, scenario(tmp_path, popularity={"drift": "trace", "trace": "trace.jsonl"}))
    assert exc.value.key == "popularity.trace" and words in str(exc.value)


def test_offered_load_from_a_request_trace(tmp_path, prepared, design):
    """An Azure-format request trace: each window offered its arrivals' prompt tokens (a prefill study)."""
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens", "1000,100,5", "1010,200,5", "1059,300,5", "1070,1200,5",
             "1250,60,5"]
    (tmp_path / "requests.csv").write_text("\n".join(lines) + "\n")
    tl = run_timeline(prepared, design, scenario(tmp_path, load={"kind": "trace", "trace": "requests.csv"}))
    by_hand = [600 / 60, 1200 / 60, 0.0, 0.0, 60 / 60]       # arrivals at 0, 10, 59 | 70 | 250 s
    assert [w["tokens_per_s"] for w in tl.windows] == pytest.approx(by_hand, rel=1e-12)
    assert tl.totals["availability"] == pytest.approx(1.0)
    with pytest.raises(StudyError):
        scenario(tmp_path, load={"kind": "trace"})


def test_hbm_stack_failure_is_the_design_with_one_stack_less(tmp_path, prepared, design):
    sc = scenario(tmp_path, failures={"events": [{"t_s": 120, "component": "hbm", "chiplet": 0, "repair_s": 120}]})
    tl = run_timeline(prepared, design, sc)
    cut = prepared.evaluator.evaluate_designs([type(design)(**{**design.to_dict(), "hbm_stacks":
                                                             [design.hbm_stacks[0] - 1, *design.hbm_stacks[1:]]})])
    assert [w["failed_components"] for w in tl.windows] == [[], [], ["hbm 0 x1"], ["hbm 0 x1"], []]
    assert tl.windows[2]["latency_s"] == pytest.approx(cut["latency_s"].iloc[0], rel=1e-12)
    assert tl.windows[0]["latency_s"] < tl.windows[2]["latency_s"]
    assert tl.windows[4]["latency_s"] == tl.windows[0]["latency_s"]
    assert [row.split()[-1] for row in table_rows(tl)[1:]] == ["-", "-", "H0", "H0", "-"]
    with pytest.raises(StudyError) as exc:
        run_timeline(prepared, design, scenario(tmp_path, failures={"events": [
            {"t_s": 1, "component": "hbm", "chiplet": 2, "stack": 1}]}))
    assert exc.value.key == "failures.events.0.stack"


def test_link_failure_takes_the_evaluators_rerouted_latency(tmp_path, design):
    data = yaml.safe_load(STUDY.read_text())
    data["faults"] = {"links": True}
    linked = prepare(Study.from_dict(data, base_dir=DATA))
    sc = scenario(tmp_path, failures={"events": [{"t_s": 60, "component": "link", "link": [1, 0], "repair_s": 60}]})
    tl = run_timeline(linked, design, sc)
    report = linked.package_evaluator.link_failure_report(design).set_index("failed_link")["latency_s"]
    assert tl.windows[1]["failed_components"] == ["link 0-1"]
    assert tl.windows[1]["latency_s"] == pytest.approx(report["0-1"], rel=1e-12)
    assert tl.windows[2]["latency_s"] == tl.windows[0]["latency_s"]


def test_link_failures_need_the_rerouted_tables(tmp_path, prepared, design):
    with pytest.raises(StudyError) as exc:
        run_timeline(prepared, design, scenario(tmp_path, failures={"link_mtbf_h": 1.0}))
    assert exc.value.key == "failures"


def test_reconfigurable_chiplet_takes_the_failed_role(prepared, design):
    """No spare: on-failure re-roles reconfigurable chiplet 2, paying its reconfiguration time."""
    def run(reconfigure_s):
        return run_timeline(prepared, design, scenario_from_dict({
            "horizon_s": 600, "window_s": 60, "failures": {"events": [{"t_s": 130, "chiplet": 4}],
                                                           "reconfigurable": [2], "reconfigure_s": reconfigure_s}}),
            "on-failure").windows
    fast, slow = run(5.0), run(50.0)
    assert fast[3]["migrations"] > 0
    assert slow[3]["migration_s"] - fast[3]["migration_s"] == pytest.approx(45.0, rel=1e-9)
    assert slow[3]["served_frac"] < fast[3]["served_frac"]
    plain = run_timeline(prepared, design, scenario_from_dict({
        "horizon_s": 600, "window_s": 60, "failures": {"events": [{"t_s": 130, "chiplet": 4}]}}), "on-failure").windows
    assert plain[3]["migration_s"] < fast[3]["migration_s"]
