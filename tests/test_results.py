"""The results folder is written whole or not at all."""
import pandas as pd
import pytest

import dse
from dse.results import folder as results_folder


def test_interrupted_write_keeps_previous_results(tmp_path, monkeypatch):
    study = dse.load_study("tests/data/tiny.yaml")
    result = dse.run_study(study)
    out = tmp_path / "res"
    dse.write_results(result, out)
    before = (out / "pareto.csv").read_text()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(results_folder, "summary_markdown", interrupted)
    with pytest.raises(KeyboardInterrupt):
        dse.write_results(result, out)
    assert (out / "pareto.csv").read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["res"]      # no temporary folder left behind


def test_python_api(tmp_path):
    study = dse.load_study("tests/data/tiny.yaml")
    result = study.run(seed=5)
    assert isinstance(result.pareto, pd.DataFrame) and len(result.pareto) >= 1
    best = result.best("latency")
    assert best["latency_s"] == result.pareto["latency_s"].min()
    assert result.evaluations["pareto"].sum() == len(result.pareto)
    # same study and seed, same front
    again = study.run(seed=5)
    pd.testing.assert_frame_equal(result.pareto, again.pareto)


def test_monte_carlo_columns_only_when_monte_carlo_is_on():
    """Issue 15: mc_retained_frac and mc_survival_frac were NaN in every row without Monte Carlo."""
    study = dse.load_study("tests/data/tiny.yaml")
    mc = {"mc_retained_frac", "mc_survival_frac"}
    off = dse.run_study(study)
    assert not mc & set(off.evaluations) and not mc & set(off.pareto)
    on = study.model_copy(update={"faults": study.faults.model_copy(
        update={"monte_carlo": study.faults.monte_carlo.model_copy(update={"samples": 4})})})
    result = dse.run_study(on)
    assert mc <= set(result.evaluations) and result.evaluations[sorted(mc)].notna().all().all()
    design = next(iter(result.designs.values()))
    assert mc <= set(result.evaluate(design).index) and not mc & set(off.evaluate(design).index)
