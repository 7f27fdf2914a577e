"""dse evaluate's cost parts (arch.packaging) and its peak and mean power (issue 34, items 3 and 4)."""
import json

import pytest
import yaml

import dse
from dse.system.metrics import mean_power_w

PARTS = ("cost_dies_usd", "cost_memory_usd", "cost_substrate_usd", "cost_bonding_usd", "cost_yield_loss_usd")


@pytest.fixture(scope="module")
def prepared():
    return dse.prepare(dse.load_study("tests/data/tiny.yaml"))


def _design_file(prepared, tmp_path):
    units = prepared.tables.unit_names
    d = {"rows": 1, "cols": 2, "chiplets": ["big", "small"], "hbm_stacks": [1, 1], "ddr_channels": 1,
         "link": "ucie-advanced", "mapping": "many-to-many",
         "placement": {u: [0] if i % 2 == 0 else [1] for i, u in enumerate(units)}}
    path = tmp_path / "design.yaml"
    path.write_text(yaml.safe_dump(d))
    return path, d


def test_json_splits_the_cost_and_gives_peak_and_mean_power(dse_cli, tiny_path, tmp_path, prepared):
    path, data = _design_file(prepared, tmp_path)
    code, out, err = dse_cli("evaluate", tiny_path, "--design", path, "--json")
    assert code == 0, err
    result = json.loads(out)
    metrics, cost = result["metrics"], result["cost"]
    assert "power_w" not in metrics and metrics["peak_power_w"] > metrics["mean_power_w"] > 0
    assert metrics["mean_power_w"] == pytest.approx(metrics["energy_j_per_token"] * metrics["throughput_tok_s"])
    assert (cost["packaging"], cost["bond_yield_per_die"], cost["packages"]) == ("silicon-interposer", 0.99, 1)
    assert all(cost[k] > 0 for k in PARTS)
    assert sum(cost[k] for k in PARTS) == pytest.approx(metrics["cost_usd"], rel=1e-12)
    assert cost["cost_usd"] == pytest.approx(metrics["cost_usd"], rel=1e-12)
    # the parts are the package evaluator's: two dies, two stacks and the DDR
    parts = prepared.package_evaluator.cost_parts([dse.Design(**data)]).iloc[0]
    assert cost["cost_dies_usd"] == pytest.approx(parts["cost_dies_usd"])


def test_table_shows_the_cost_parts_and_both_powers(dse_cli, tiny_path, tmp_path, prepared):
    path, _ = _design_file(prepared, tmp_path)
    code, out, err = dse_cli("evaluate", tiny_path, "--design", path)
    assert code == 0, err
    for words in ("peak_power_w", "mean_power_w", "known-good dies", "interposer / substrate", "bonding (bumps)",
                  "yield loss", "silicon-interposer"):
        assert words in out, words


def test_mean_power_is_below_the_peak_at_two_and_one_stack(prepared, tmp_path):
    _, data = _design_file(prepared, tmp_path)
    frame = prepared.evaluator.evaluate_designs([dse.Design(**data), dse.Design(**{**data, "hbm_stacks": [1, 0]})])
    watts = mean_power_w(frame)
    assert (watts > 0).all() and (watts < frame["peak_power_w"]).all()


def test_an_old_study_naming_power_w_reads_it_as_peak_power_w(tiny_dict, dse_cli, tmp_path):
    tiny_dict["constraints"] = {"power_w": 1500.0}
    assert dse.Study.from_dict(tiny_dict).constraints.peak_power_w == 1500.0
    tiny_dict["constraints"] = {"power_w": 1500.0, "peak_power_w": 1000.0}
    study = tmp_path / "both.yaml"
    study.write_text(yaml.safe_dump(tiny_dict))
    code, _, err = dse_cli("validate", study)
    assert code == 2 and "power_w" in err and len(err.strip().splitlines()) == 1


def test_a_results_folder_naming_power_w_reads_back_as_peak_power_w(tiny_dict, tmp_path):
    tiny_dict["search"].update(population=4, generations=1)
    out = dse.write_results(dse.Study.from_dict(tiny_dict).run(), tmp_path / "old")
    for name in ("pareto.csv", "evaluations.csv"):           # as a folder written before the rename
        path = out / name
        path.write_text(path.read_text().replace("peak_power_w", "power_w"))
    result = dse.load_results(out)
    assert "peak_power_w" in result.evaluations and "power_w" not in result.evaluations
    assert "peak_power_w" in result.pareto


def test_a_serving_studys_mean_power_is_at_its_request_rate():
    """A serving study's energy per token is the server's at ``request_rate`` (dse.serving.package): its mean
    power is that energy times the output tokens per second the rate brings (capped at saturation), never
    above the peak and never below the package's idle power (dse.serving.steps.package_idle_w), which the
    server draws between steps."""
    from dse.serving.steps import package_idle_w
    study = dse.load_study("tests/data/timeline_serve.yaml")
    prepared = dse.prepare(study)
    frame = prepared.evaluator.evaluate_designs(prepared.evaluator.designs(prepared.space.seeds[:1]))
    row = frame.iloc[0]
    served = min(study.serving.request_rate, row["saturation_req_s"])
    watts = float(mean_power_w(row, study))
    assert watts == pytest.approx(row["energy_j_per_token"] * served * study.serving.output_len, rel=1e-12)
    d = prepared.evaluator.decode(prepared.space.seeds[:1])
    idle = float(package_idle_w(prepared.package_evaluator.tables, d.kind, d.chiplets)[0])
    assert idle < watts < row["peak_power_w"], (idle, watts, row["peak_power_w"])
