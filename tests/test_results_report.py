"""Plots, report, results-folder reading and the Jupyter API on the tiny study."""
import dataclasses

import numpy as np
import pandas as pd
import pytest
import yaml

import dse
from dse.errors import StudyError
from dse.results.number_format import column_format
from dse.results.knee import knee_index
from dse.results.plots import convergence_table, hypervolume_by_generation
from dse.results.folder import load_results, read_design


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    result = dse.load_study("tests/data/tiny.yaml").run(seed=5)
    out = dse.write_results(result, tmp_path_factory.mktemp("res") / "tiny")
    return result, out


def test_run_writes_plots_and_report(written):
    result, out = written
    objectives = result.study.search.objectives
    plots = out / "plots"
    for x, y in [("latency", "energy"), ("latency", "area"), ("energy", "area")]:
        assert (plots / f"front_{x}_{y}.png").stat().st_size > 1000
    for name in ("scatter_matrix", "parallel_coordinates", "convergence"):
        assert (plots / f"{name}.png").exists()
    assert not list(plots.glob("*.svg"))           # SVG on request only (dse run --svg)
    knee = result.knee()["design_id"]
    assert (plots / f"floorplan_{knee}.png").exists()
    md = (out / "report.md").read_text()
    for o in objectives:
        assert f"best {o}" in md
        assert f"floorplan_{result.best(o)['design_id']}.png" in md
    assert "balanced design" in md and knee in md
    assert "units held" in md and "busy [% of step]" in md
    html = (out / "report.html").read_text()
    assert "<table>" in html and 'src="data:image/png;base64,' in html and 'src="plots/' not in html


def test_report_front_table_holds_the_front(written):
    result, out = written
    md = (out / "report.md").read_text()
    front = md.split("## The Pareto front")[1]
    ms = result.pareto["latency_s"] * 1e3
    fmt = column_format(ms)                 # one format for the whole column
    for design_id, latency in zip(result.pareto["design_id"], ms):
        assert f"| {design_id} |" in front
        assert f" {format(latency, fmt)} |" in front


def test_load_results_round_trip(written):
    result, out = written
    loaded = load_results(out)
    pd.testing.assert_frame_equal(loaded.pareto, result.pareto.reset_index(drop=True), check_dtype=False)
    assert loaded.designs == result.designs
    d = loaded.design(result.pareto["design_id"].iloc[0])
    again = loaded.evaluate(d)
    assert again["latency_s"] == pytest.approx(result.pareto["latency_s"].iloc[0])


def test_read_design_is_tolerant_and_clear(written, tmp_path):
    _, out = written
    path = next((out / "designs").glob("*.yaml"))
    data = yaml.safe_load(path.read_text())
    data["topology"] = "mesh"                      # a key from a newer toolkit is ignored
    (tmp_path / "new.yaml").write_text(yaml.safe_dump(data))
    assert read_design(tmp_path / "new.yaml") == read_design(path)
    del data["rows"]
    (tmp_path / "old.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(StudyError, match="rows"):
        read_design(tmp_path / "old.yaml")


def test_what_if_changes_a_study_key(written):
    result, _ = written
    d = result.design(result.pareto["design_id"].iloc[0])
    base = result.evaluate(d)
    bigger = result.evaluate(d, {"workload.batch": 16})
    fresh = dse.load_study("tests/data/tiny.yaml")
    fresh = fresh.model_copy(update={"workload": fresh.workload.model_copy(update={"batch": 16})})
    assert bigger["latency_s"] == pytest.approx(dse.prepare(fresh).evaluator.evaluate_designs([d])["latency_s"][0])
    assert bigger["throughput_tok_s"] != pytest.approx(base["throughput_tok_s"])
    more_ddr = result.evaluate(dataclasses.replace(d, ddr_channels=d.ddr_channels + 1))
    assert more_ddr["cost_usd"] > base["cost_usd"]
    with pytest.raises(StudyError, match="workload.batchsize|batchsize"):
        result.evaluate(d, workload__batchsize=3)


def test_knee_is_the_balanced_design():
    """Of (0, 1), (0.45, 0.5), (1, 0) and (0.2, 0.9) the knee is the middle one (worst objective least bad)."""
    front = pd.DataFrame({"latency_s": [0.0, 0.45, 1.0, 0.2], "energy_j_per_token": [1.0, 0.5, 0.0, 0.9]})
    assert knee_index(front, ["latency", "energy"]) == 1
    # throughput is better high: the same front expressed as throughput picks the same design
    front["throughput_tok_s"] = -front["latency_s"]
    assert knee_index(front, ["throughput", "energy"]) == 1


class _Result:
    def __init__(self, evaluations, objectives, out_dir=None):
        self.evaluations = evaluations
        self.study = type("S", (), {"search": type("Q", (), {"objectives": objectives})(), "name": "t"})()
        self.out_dir = out_dir


def test_hypervolume_of_a_known_front():
    """Normalised to the run's range the designs are (0, 0.5), (0.5, 0) and (1, 1); reference point 1.1.
    Generation 0 has the box 1.1 x 0.6; generation 1 adds (0.5, 0): 2 x (1.1 x 0.6) - 0.6 x 0.6 = 0.96."""
    ev = pd.DataFrame({"latency_s": [0.0, 1.0, 2.0], "energy_j_per_token": [1.0, 0.0, 2.0],
                       "generation": [0, 1, 1], "feasible": [True, True, True]})
    hv = hypervolume_by_generation(_Result(ev, ["latency", "energy"]))
    assert list(hv["generation"]) == [0, 1]
    assert hv["hypervolume"].tolist() == pytest.approx([0.66, 0.96])


def test_convergence_table_written_by_the_search_is_preferred(tmp_path):
    ev = pd.DataFrame({"latency_s": [0.0, 1.0], "energy_j_per_token": [1.0, 0.0], "generation": [0, 1],
                       "feasible": [True, True]})
    pd.DataFrame({"generation": [0, 1], "hypervolume": [0.3, 0.4], "n_front": [1, 2]}).to_csv(
        tmp_path / "convergence.csv", index=False)
    table, origin = convergence_table(_Result(ev, ["latency", "energy"], out_dir=tmp_path))
    assert origin == "search" and table["hypervolume"].tolist() == [0.3, 0.4]
    table, origin = convergence_table(_Result(ev, ["latency", "energy"]))
    assert origin == "computed" and np.all(np.diff(table["hypervolume"]) >= 0)


def test_report_of_a_study_without_feasible_designs(tiny_dict, tmp_path):
    tiny_dict["constraints"] = {"peak_power_w": 1.0}
    tiny_dict["search"].update(population=4, generations=1)
    result = dse.Study.from_dict(tiny_dict).run()
    assert result.pareto.empty
    out = dse.write_results(result, tmp_path / "none")
    md = (out / "report.md").read_text()
    assert "No feasible design was found" in md and "0 on the Pareto front" in md
    assert (out / "report.html").exists() and not list((out / "plots").glob("*.png"))


def test_svg_on_request(written, tmp_path):
    from dse.results.plots import plot_front, save
    result, _ = written
    paths = save(plot_front(result, "latency", "energy"), tmp_path / "a", "front", svg=True)
    assert [p.suffix for p in paths] == [".png", ".svg"]
    assert paths[1].read_text().lstrip().startswith("<?xml")
    again = save(plot_front(result, "latency", "energy"), tmp_path / "b", "front", svg=True)
    assert again[1].read_bytes() == paths[1].read_bytes()        # no date, salted ids: same bytes
    assert save(plot_front(result, "latency", "energy"), tmp_path / "c", "front") == [tmp_path / "c" / "front.png"]


def test_floorplan_skips_data_limits_with_the_same_pixels(written, monkeypatch):
    """A floorplan sets its own limits, so its patches go in without add_patch's data-limit updates (a third
    of an 8 x 8 floorplan's build; docs/performance.md): the same pixels as through add_patch."""
    from matplotlib.axes import Axes
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.patches import Patch
    from dse.results.plots import plot_floorplan
    result, _ = written
    prepared = result.prepare()
    design = result.designs[result.knee()["design_id"]]

    def pixels(fig):
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        return np.asarray(canvas.buffer_rgba()).copy()
    fig = plot_floorplan(design, prepared)
    assert not np.isfinite(fig.axes[0].dataLim.bounds).all()      # no patch extended the data limits
    fast = pixels(fig)
    add_artist = Axes.add_artist
    monkeypatch.setattr(Axes, "add_artist", lambda ax, a: Axes.add_patch(ax, a) if isinstance(a, Patch)
                        else add_artist(ax, a))
    slow = plot_floorplan(design, prepared)
    assert np.isfinite(slow.axes[0].dataLim.bounds).all()
    assert np.array_equal(pixels(slow), fast)


def test_floorplans_saved_with_their_own_text_hinting(written, monkeypatch, tmp_path):
    """The floorplans' PNGs are drawn with `FLOORPLAN_RC`'s hinting (FreeType's auto-hinter: docs/performance.md,
    "Issue 52, eighth round (the floorplans)"); every other figure with matplotlib's, and the setting does not
    outlive the floorplan."""
    import matplotlib
    from dse.results import plots
    result, _ = written
    hinting: dict[str, str] = {}

    def save(fig, folder, name, svg=False):
        hinting[name] = matplotlib.rcParams["text.hinting"]
        return [folder / f"{name}.png"]
    monkeypatch.setattr(plots, "save", save)
    before = matplotlib.rcParams["text.hinting"]
    plots.write_plots(result, tmp_path / "plots")
    floorplans = {name: h for name, h in hinting.items() if name.startswith("floorplan_")}
    assert floorplans and set(floorplans.values()) == {plots.FLOORPLAN_RC["text.hinting"]} != {before}
    assert {h for name, h in hinting.items() if name not in floorplans} == {before}
    assert matplotlib.rcParams["text.hinting"] == before


def test_floorplan_axes_hidden_with_the_same_pixels(written):
    """A floorplan's axes are off and their x and y axes hidden too (`axes_off`), so the title's placement
    does not compute and measure the y axis's ticks: the same pixels as with the axes left visible (the old way)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from dse.results.plots import FLOORPLAN_RC, plot_floorplan
    result, _ = written
    prepared = result.prepare()

    def pixels(fig):
        canvas = FigureCanvasAgg(fig)
        fig.set_dpi(150)
        with matplotlib.rc_context(FLOORPLAN_RC):
            canvas.draw()
        return np.asarray(canvas.buffer_rgba()).copy()
    for design_id in result.pareto["design_id"].iloc[:3]:
        design = result.designs[design_id]
        new = plot_floorplan(design, prepared, title=f"design {design_id}")
        old = plot_floorplan(design, prepared, title=f"design {design_id}")
        assert not new.axes[0].xaxis.get_visible() and not new.axes[0].yaxis.get_visible()
        for axis in (old.axes[0].xaxis, old.axes[0].yaxis):     # the old way: switched off, left visible
            axis.set_visible(True)
        assert np.array_equal(pixels(new), pixels(old))
