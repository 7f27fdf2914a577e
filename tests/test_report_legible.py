"""The report reads as text: routing in words (no object dump), no HBM figure for a chiplet without HBM,
roofline ceilings named clear of their lines."""
from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

import dse
from dse.model.characterize import characterize
from dse.results.plots import plot_floorplan, plot_roofline
from dse.results.report import memory_text, routing_words
from dse.study.schema.workload import RoutingSpec


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    study = dse.changed_study(dse.load_study("tests/data/tiny.yaml"),
                              {"search.population": 8, "search.generations": 2})
    result = dse.run_study(study)
    return result, dse.write_results(result, tmp_path_factory.mktemp("res") / "tiny")


def test_routing_in_words():
    assert routing_words(RoutingSpec(distribution="zipf", s=0.5, seed=0)) == "routing: zipf (s: 0.5, seed: 0)"
    assert routing_words(RoutingSpec()) == "routing: uniform (seed: 0)"
    assert routing_words(RoutingSpec(distribution="dirichlet", alpha=0.3, seed=2)) == \
        "routing: dirichlet (alpha: 0.3, seed: 2)"


def test_report_has_no_object_dumps_or_hbm_of_nothing(written):
    result, out = written
    md = (out / "report.md").read_text()
    assert "routing: uniform (seed: 0)" in md
    for dump in ("distribution=", "trace=None", "=None", "alpha=1.0"):
        assert dump not in md
    for table in md.split("| slot (row, col) |")[1:]:             # each per-chiplet table
        lines = ("| slot (row, col) |" + table).split("\n\n")[0].splitlines()
        column = [c.strip() for c in lines[0].split("|")].index("stored / HBM [GiB]")
        cells = [[c.strip() for c in line.split("|")][column] for line in lines[2:]]
        assert cells and not [c for c in cells if c.endswith(" / 0")], cells
    assert memory_text(10.5, 0.0) == "10.5 / no HBM" and memory_text(1.5, 16.0) == "1.5 / 16"


def test_floorplan_of_a_chiplet_without_hbm(written):
    result, _ = written
    prepared = result.prepare()
    design = prepared.evaluator.designs(prepared.space.lower[None, :])[0]      # the least: no HBM stacks
    assert sum(design.hbm_stacks) == 0
    texts = [t.get_text() for t in plot_floorplan(design, prepared).axes[0].texts]
    assert not [t for t in texts if "HBM x0" in t]
    assert any(t.startswith("no HBM:") for t in texts)


def _overlaps(ax, renderer) -> list[str]:
    """Texts of ``ax`` whose box a line of ``ax`` crosses (lines sampled finely in display space)."""
    hits = []
    for text in ax.texts:
        box = text.get_window_extent(renderer)
        for line in ax.lines:
            xy = line.get_transform().transform(np.asarray(line.get_xydata(), float))
            fine = np.concatenate([np.linspace(a, b, 50) for a, b in zip(xy[:-1], xy[1:])])
            if any(box.contains(x, y) for x, y in fine):
                hits.append(text.get_text())
    return hits


def test_roofline_labels_are_clear_of_their_lines(written):
    result, _ = written
    fig = plot_roofline(characterize(result.prepare()))
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    for ax in fig.axes:
        assert not _overlaps(ax, canvas.get_renderer())
        legend = ax.get_legend()
        if legend is not None:
            labels = [t.get_text() for t in legend.get_texts()]
            assert any("TB/s" in t for t in labels) and any("TFLOP/s" in t for t in labels)
