"""dse evaluate: one hand-written design, every metric and a per-chiplet breakdown; bad designs exit 2."""
import json

import pytest
import yaml

import dse


@pytest.fixture(scope="module")
def prepared():
    return dse.prepare(dse.load_study("tests/data/tiny.yaml"))


def _design(prepared, **changes):
    units = prepared.tables.unit_names
    d = {"rows": 1, "cols": 2, "chiplets": ["big", "small"], "hbm_stacks": [1, 1], "ddr_channels": 1,
         "link": "ucie-advanced", "mapping": "many-to-many",
         "placement": {u: [0] if i % 2 == 0 else [1] for i, u in enumerate(units)}}
    d.update(changes)
    return d


def _write(tmp_path, data):
    path = tmp_path / "design.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_json_holds_every_metric_and_one_row_per_chiplet(dse_cli, tiny_path, tmp_path, prepared):
    data = _design(prepared)
    code, out, err = dse_cli("evaluate", tiny_path, "--design", _write(tmp_path, data), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert set(dse.METRICS) - {"mc_retained_frac", "mc_survival_frac", "packages", "nodes", "comm_fabric_s",
                               "comm_network_s"} | {"mean_power_w"} == set(result["metrics"])   # no Monte Carlo, one package
    assert len(result["chiplets"]) == 2
    expected = prepared.evaluator.evaluate_designs([dse.Design(**data)]).iloc[0]
    assert result["metrics"]["latency_s"] == pytest.approx(expected["latency_s"])
    units_held = sum(row["n_units"] for row in result["chiplets"])
    assert units_held == len(prepared.tables.unit_names)
    # each chiplet's retained_if_lost averages to the design's fault tolerance
    kept = [row["retained_if_lost"] for row in result["chiplets"]]
    assert sum(kept) / len(kept) == pytest.approx(result["metrics"]["fault_tolerance_frac"])


def test_table_output(dse_cli, tiny_path, tmp_path, prepared):
    code, out, err = dse_cli("evaluate", tiny_path, "--design", _write(tmp_path, _design(prepared)))
    assert code == 0, err
    assert "latency_s" in out and "kept if lost" in out


def test_link_failures_are_listed_when_the_study_asks(dse_cli, tiny_dict, tmp_path, prepared):
    """A 1 x 2 package has one link: when it fails the two chiplets, which hand units to each other,
    cannot talk any more, so the design keeps nothing; the fault tolerance averages it in."""
    tiny_dict["faults"] = {"links": True}
    study = tmp_path / "links.yaml"
    study.write_text(yaml.safe_dump(tiny_dict))
    code, out, err = dse_cli("evaluate", study, "--design", _write(tmp_path, _design(prepared)), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert [row["failed_link"] for row in result["link_failures"]] == ["0-1"]
    assert result["link_failures"][0]["retained_frac"] == 0.0 and not result["link_failures"][0]["all_served"]
    kept = [row["retained_if_lost"] for row in result["chiplets"]] + [0.0]
    assert sum(kept) / len(kept) == pytest.approx(result["metrics"]["fault_tolerance_frac"])
    code, out, err = dse_cli("evaluate", study, "--design", _write(tmp_path, _design(prepared)))
    assert code == 0, err
    assert "per link failure" in out and "0-1" in out


@pytest.mark.parametrize("change,key,words", [
    ({"rows": 3, "chiplets": ["big"] * 6, "hbm_stacks": [1] * 6}, "rows", "outside the study's mesh range 1..2"),
    ({"chiplets": ["big", "huge"]}, "chiplets", "chiplet kind 'huge' is not in the study's library"),
    ({"hbm_stacks": [1]}, "hbm_stacks", "needs 2 whole numbers >= 0"),
    ({"placement": {"embed": [0]}}, "placement", "has no chiplet"),
    ({"placement": "extra"}, "placement", "unit 'nonsense' is not in the workload"),
    ({"placement": "slot"}, "placement.embed", "slots are 0 .. 1"),
    ({"placement": "twice"}, "placement.embed", "distinct slots"),
])
def test_bad_designs_exit_2_naming_the_key(dse_cli, tiny_path, tmp_path, prepared, change, key, words):
    data = _design(prepared)
    if change.get("placement") == "extra":
        data["placement"]["nonsense"] = [0]
    elif change.get("placement") == "slot":
        data["placement"]["embed"] = [5]
    elif change.get("placement") == "twice":
        data["placement"]["embed"] = [1, 1]
    else:
        data.update(change)
    code, _, err = dse_cli("evaluate", tiny_path, "--design", _write(tmp_path, data))
    assert code == 2, err
    assert f"{key}: " in err and words in err, err
    assert "Traceback" not in err


def test_missing_design_file(dse_cli, tiny_path, tmp_path):
    code, _, err = dse_cli("evaluate", tiny_path, "--design", tmp_path / "nope.yaml")
    assert code == 2 and "does not exist" in err
