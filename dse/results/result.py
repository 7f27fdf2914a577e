"""What a study run produced: every evaluated design, the Pareto front and the Pareto designs, with
methods to look at them (knee, best per objective, plots, per-chiplet breakdown, what-if evaluation).

The results folder that holds a `StudyResult` on disk is dse.results.folder.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..model.breakdown import chiplet_table
from ..model.objectives import OBJECTIVE_COLUMNS, OBJECTIVES, constraint_matrix
from ..study.space import Design
from ..study.spec import Study
from ..system.metrics import reported_metrics
from ..system.prepare import prepare
from .knee import knee_index
from .placement_store import PLACEMENTS_FILE, flat_placement, placement_cell, placements_table
from .whatif import evaluate


def design_columns(designs: list[Design], kind_names: list[str], files: list[str] | None = None,
                   flats: list[tuple] | None = None) -> pd.DataFrame:
    """Readable decision values of designs, one row each; ``files`` name where each design's placement is
    whole, for a placement too long for a CSV cell (dse.results.placement_store.placement_cell); ``flats``:
    each placement's dse.results.placement_store.flat_placement arrays, when already made."""
    rows = []
    files = files or [PLACEMENTS_FILE] * len(designs)
    for d, where, flat in zip(designs, files, flats or [None] * len(designs)):
        row = dict(rows=d.rows, cols=d.cols, n_chiplets=d.rows * d.cols)
        for name in kind_names:
            row[f"n_{name}"] = d.chiplets.count(name)
        row.update(hbm_stacks=sum(d.hbm_stacks), ddr_channels=d.ddr_channels, link=d.link, mapping=d.mapping,
                   **d.package_choices(), **(d.system or {}),
                   chiplets=",".join(d.chiplets),
                   placement=placement_cell(d.placement, d.rows * d.cols, where, flat))
        rows.append(row)
    return pd.DataFrame(rows)


@dataclass
class StudyResult:
    """What a study run produced. ``pareto`` and ``evaluations`` are pandas DataFrames."""

    study: Study
    evaluations: pd.DataFrame
    pareto: pd.DataFrame
    designs: dict[str, Design] = field(default_factory=dict)   # Pareto designs by id
    out_dir: Path | None = None
    convergence: pd.DataFrame | None = None      # per generation: evaluations, feasible, front_size, hypervolume
    reference_point: dict[str, float] = field(default_factory=dict)   # objective -> bound of the hypervolume
    prepared: object | None = field(default=None, repr=False)  # dse.model.prepare.Prepared, built when first needed
    screening: dict | None = None                # a screened search: dse.search.screening.ScreeningReport
    baseline: str | None = None                  # design_id of the EPLB-style seed (dse.search.baseline), if seeded
    placements: object | None = field(default=None, repr=False)   # pyarrow Table: every evaluated design's
                                                 # placement, one row per unit (dse.results.placement_store)

    def prepare(self):
        """The study's tables and evaluator (dse.system.prepare), built once and kept."""
        if self.prepared is None:
            self.prepared = prepare(self.study)
        return self.prepared

    def design(self, design_id: str) -> Design:
        """A Pareto design by id (``d00042``)."""
        if design_id not in self.designs:
            raise KeyError(f"no Pareto design {design_id!r}; the front holds {len(self.designs)} designs, "
                           f"e.g. {', '.join(list(self.designs)[:5])}")
        return self.designs[design_id]

    def knee(self) -> pd.Series:
        """The balanced Pareto design (dse.results.knee): the least bad in its worst normalised objective."""
        return self.pareto.iloc[knee_index(self.pareto, self.study.search.objectives)]

    def evaluate(self, design: str | Design, changes: dict | None = None, **keyword_changes) -> pd.Series:
        """Metrics of a design (or Pareto design id) under this study, or with study keys changed:
        ``result.evaluate("d00042", {"workload.batch": 32})`` or ``workload__batch=32`` (dse.results.whatif)."""
        d = self.design(design) if isinstance(design, str) else design
        changes = {**(changes or {}), **keyword_changes}
        return evaluate(d, self.study, changes or None, prepared=None if changes else self.prepare())

    def plot_front(self, x: str | None = None, y: str | None = None):
        """Front of two objectives (default: the first two); a matplotlib Figure."""
        from .plots import plot_front
        objectives = self.study.search.objectives
        return plot_front(self, x or objectives[0], y or objectives[1])

    def plot_parallel(self):
        from .plots import plot_parallel
        return plot_parallel(self)

    def plot_convergence(self):
        from .plots import plot_convergence
        return plot_convergence(self)

    def plot_floorplan(self, design: str | Design):
        """Floorplan of a Pareto design (by id) or of any design of this study."""
        from .plots import plot_floorplan
        title = design if isinstance(design, str) else "design"
        d = self.design(design) if isinstance(design, str) else design
        return plot_floorplan(d, self.prepare(), title=title)

    def chiplets(self, design: str | Design) -> pd.DataFrame:
        """Per-chiplet breakdown of a design (dse.model.breakdown.chiplet_table); of a system: its first package,
        over that package's own step."""
        d = self.design(design) if isinstance(design, str) else design
        package = self.prepare().for_design(d).evaluator
        latency = float(package.evaluate_designs([d], with_faults=False)["latency_s"].iloc[0])
        return chiplet_table(d, self.prepare(), latency)

    def best(self, objective: str) -> pd.Series:
        """The Pareto design best in one objective (``latency``, ``energy``, ...)."""
        if objective not in OBJECTIVES:
            raise KeyError(f"unknown objective {objective!r}; allowed: {', '.join(OBJECTIVES)}")
        column, sign = OBJECTIVES[objective]
        ranked = self.pareto.sort_values(column, ascending=sign > 0)
        return ranked.iloc[0]


def build_result(study: Study, X: np.ndarray, metrics: pd.DataFrame, generation: np.ndarray,
                 pareto_index: np.ndarray, designs: list[Design], kind_names: list[str],
                 convergence: pd.DataFrame | None = None, reference_point: dict | None = None,
                 flats: list[tuple] | None = None) -> StudyResult:
    """The `StudyResult` of evaluated designs; ``flats``: each design's placement as
    dse.results.placement_store.flat_placement arrays, when the evaluator gave them (else read from the
    records)."""
    ids = [f"d{i:05d}" for i in range(len(X))]
    G = constraint_matrix(metrics, study)
    front_set = set(int(i) for i in pareto_index)
    files = [f"designs/{ids[i]}.yaml and {PLACEMENTS_FILE}" if i in front_set else PLACEMENTS_FILE
             for i in range(len(ids))]
    if flats is None:               # once per design: its CSV cell and the table
        flats = [flat_placement(d.placement) for d in designs]
    table = pd.concat([pd.DataFrame({"design_id": ids, "generation": generation}),
                       design_columns(designs, kind_names, files, flats), metrics.reset_index(drop=True)[reported_metrics(study, metrics.columns)]],
                      axis=1)
    table["feasible"] = (G <= 0).all(axis=1)
    table["pareto"] = False
    table.loc[pareto_index, "pareto"] = True
    objective_cols = [OBJECTIVE_COLUMNS[o] for o in study.search.objectives]
    pareto = table.loc[pareto_index].sort_values(objective_cols[0]).reset_index(drop=True)
    front = {ids[i]: designs[i] for i in pareto_index}
    return StudyResult(study=study, evaluations=table, pareto=pareto, designs=front, convergence=convergence,
                       reference_point=dict(reference_point or {}),
                       placements=placements_table(ids, [d.placement for d in designs], flats))
