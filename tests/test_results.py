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


def test_infeasible_designs_leave_workload_metrics_empty_and_say_why(tmp_path):
    """An infeasible design's latency and energy are the model's penalty, not figures (the audit read
    latency_s 1.07e11 s in evaluations.csv): the CSV leaves them empty and names the broken constraints."""
    study = dse.load_study("tests/data/tiny.yaml")
    free = dse.run_study(study)
    cap = float(free.evaluations["area_mm2"].median())
    tight = study.model_copy(update={"constraints": study.constraints.model_copy(update={"area_mm2": cap})})
    result = dse.run_study(tight)
    assert (~result.evaluations["feasible"]).any() and result.evaluations["feasible"].any()
    out = tmp_path / "res"
    dse.write_results(result, out)
    ev = pd.read_csv(out / "evaluations.csv")
    bad, good = ev[~ev["feasible"]], ev[ev["feasible"]]
    assert bad[["latency_s", "throughput_tok_s", "energy_j_per_token"]].isna().all().all()
    assert bad["area_mm2"].notna().all() and (bad["area_mm2"] > cap).all()
    assert bad["infeasible_because"].str.contains("area_mm2_over").all()
    assert good["latency_s"].notna().all() and good["infeasible_because"].isna().all()
    back = dse.load_results(out)          # the readers take the empty cells
    assert int(back.evaluations["feasible"].sum()) == int(result.evaluations["feasible"].sum())
    assert "designs evaluated" in results_folder.summary_markdown(back)


def test_summary_front_in_the_terminal_unit_one_format_per_column():
    """summary.md showed energy in J/token where `dse run` prints mJ/token, and mixed '486' and '457.5' in
    one column."""
    from dse.results.number_format import column_format
    assert {format(v, column_format(pd.Series([486.0, 457.5]))) for v in (486.0, 457.5)} == {"486.0", "457.5"}
    result = dse.run_study(dse.load_study("tests/data/tiny.yaml"))
    text = results_folder.summary_markdown(result)
    lines = text[text.index("## Pareto front"):].splitlines()[2:]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert "energy [mJ/token]" in head and "latency [ms]" in head
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:] if line.startswith("|")]
    assert len(rows) == len(result.pareto)
    for j, name in enumerate(head):
        if name.startswith(("energy", "latency", "area")):
            decimals = {len(r[j].partition(".")[2]) for r in rows}
            assert len(decimals) == 1, (name, [r[j] for r in rows])
    energy = sorted(float(r[head.index("energy [mJ/token]")].replace(",", "")) for r in rows)
    assert energy == pytest.approx(sorted(result.pareto["energy_j_per_token"] * 1e3), rel=1e-2)
