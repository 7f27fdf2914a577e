"""Study results: tables of evaluated designs and the Pareto front, and the results folder.

The folder is written whole or not at all: everything goes to a hidden temporary sibling first and is
swapped into place at the end, so an interrupted run (Ctrl-C) leaves the previous results untouched and
never a half-written CSV.

Folder contents: ``pareto.csv`` (non-dominated feasible designs), ``evaluations.csv`` (every evaluated
design, in evaluation order), ``study.yaml`` (the resolved study, defaults filled in), ``summary.md``,
``convergence.csv`` (per generation: designs evaluated, feasible, front size and the normalised
hypervolume of the front so far, see dse.hypervolume), ``designs/<design_id>.yaml`` (each Pareto
design, readable by ``dse evaluate``), ``plots/`` (PNG and SVG figures, dse.plots) and
``report.md`` / ``report.html`` (dse.report).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from .objectives import OBJECTIVES, constraint_matrix
from .space import Design
from .study import Study

#: metric columns shown for each objective, in the order objectives are listed
OBJECTIVE_COLUMNS = {name: column for name, (column, _) in OBJECTIVES.items()}


def design_columns(designs: list[Design], kind_names: list[str]) -> pd.DataFrame:
    """Readable decision values of designs, one row each."""
    rows = []
    for d in designs:
        row = dict(rows=d.rows, cols=d.cols, n_chiplets=d.rows * d.cols)
        for name in kind_names:
            row[f"n_{name}"] = d.chiplets.count(name)
        row.update(hbm_stacks=sum(d.hbm_stacks), ddr_channels=d.ddr_channels, link=d.link, mapping=d.mapping,
                   **d.package_choices(),
                   chiplets=",".join(d.chiplets),
                   placement=";".join(f"{u}={'+'.join(map(str, s))}" for u, s in d.placement.items()))
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
    prepared: object | None = field(default=None, repr=False)  # dse.runner.Prepared, built when first needed

    def prepare(self):
        """The study's tables and evaluator (dse.runner.prepare), built once and kept."""
        if self.prepared is None:
            from .runner import prepare
            self.prepared = prepare(self.study)
        return self.prepared

    def design(self, design_id: str) -> Design:
        """A Pareto design by id (``d00042``)."""
        if design_id not in self.designs:
            raise KeyError(f"no Pareto design {design_id!r}; the front holds {len(self.designs)} designs, "
                           f"e.g. {', '.join(list(self.designs)[:5])}")
        return self.designs[design_id]

    def knee(self) -> pd.Series:
        """The balanced Pareto design (dse.knee): the least bad in its worst normalised objective."""
        from .knee import knee_index
        return self.pareto.iloc[knee_index(self.pareto, self.study.search.objectives)]

    def evaluate(self, design: str | Design, changes: dict | None = None, **keyword_changes) -> pd.Series:
        """Metrics of a design (or Pareto design id) under this study, or with study keys changed:
        ``result.evaluate("d00042", {"workload.batch": 32})`` or ``workload__batch=32`` (dse.whatif)."""
        from .whatif import evaluate
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
        """Per-chiplet breakdown of a design (dse.breakdown.chiplet_table)."""
        from .breakdown import chiplet_table
        d = self.design(design) if isinstance(design, str) else design
        latency = float(self.prepare().evaluator.evaluate_designs([d], with_faults=False)["latency_s"].iloc[0])
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
                 convergence: pd.DataFrame | None = None, reference_point: dict | None = None) -> StudyResult:
    ids = [f"d{i:05d}" for i in range(len(X))]
    G = constraint_matrix(metrics, study)
    table = pd.concat([pd.DataFrame({"design_id": ids, "generation": generation}),
                       design_columns(designs, kind_names), metrics.reset_index(drop=True)], axis=1)
    table["feasible"] = (G <= 0).all(axis=1)
    table["pareto"] = False
    table.loc[pareto_index, "pareto"] = True
    objective_cols = [OBJECTIVE_COLUMNS[o] for o in study.search.objectives]
    pareto = table.loc[pareto_index].sort_values(objective_cols[0]).reset_index(drop=True)
    front = {ids[i]: designs[i] for i in pareto_index}
    return StudyResult(study=study, evaluations=table, pareto=pareto, designs=front, convergence=convergence,
                       reference_point=dict(reference_point or {}))


def summary_markdown(result: StudyResult) -> str:
    s = result.study
    ev = result.evaluations
    cols = ["design_id", "n_chiplets", "hbm_stacks", "ddr_channels"] + \
        [OBJECTIVE_COLUMNS[o] for o in s.search.objectives]
    lines = [f"# Study `{s.name}`", "",
             f"- workload: {s.workload.label}, {s.workload.phase}, batch {s.workload.batch}, "
             f"context {s.workload.context}, {s.workload.precision}",
             f"- search: {s.search.algorithm}, population {s.search.population}, "
             f"{s.search.generations} generations, seed {s.search.seed}",
             f"- designs evaluated: {len(ev)}, feasible: {int(ev['feasible'].sum())}, "
             f"on the Pareto front: {len(result.pareto)}", "",
             "## Pareto front", "", _markdown_table(result.pareto[cols]), ""]
    if len(result.pareto):
        lines += ["## Best design per objective", ""]
        for objective in s.search.objectives:
            best = result.best(objective)
            column = OBJECTIVE_COLUMNS[objective]
            lines.append(f"- {objective}: `{best['design_id']}` ({column} = {best[column]:.4g})")
    if result.convergence is not None and len(result.convergence):
        last = result.convergence.iloc[-1]
        ref = ", ".join(f"{OBJECTIVE_COLUMNS[o]} {v:.4g}" for o, v in result.reference_point.items())
        lines += ["", "## Convergence", "",
                  f"- normalised hypervolume of the front: {last['hypervolume']:.4f} after "
                  f"{int(last['generation']) + 1} generations (convergence.csv has every generation)",
                  f"- reference point: {ref}"]
    return "\n".join(lines) + "\n"


def _markdown_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "_no feasible design found_"
    head = "| " + " | ".join(df.columns) + " |"
    rule = "|" + "---|" * len(df.columns)
    body = ["| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row) + " |"
            for row in df.itertuples(index=False)]
    return "\n".join([head, rule] + body)


def write_results(result: StudyResult, out_dir: str | Path, report: bool = True) -> Path:
    """Write the results folder atomically (see module docstring); returns its path.

    ``report=False`` leaves out the plots and report (the tables alone are much faster to write)."""
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        result.pareto.to_csv(tmp / "pareto.csv", index=False)
        result.evaluations.to_csv(tmp / "evaluations.csv", index=False)
        if result.convergence is not None:
            result.convergence.to_csv(tmp / "convergence.csv", index=False)
        (tmp / "study.yaml").write_text(yaml.safe_dump(result.study.resolved(), sort_keys=False))
        (tmp / "summary.md").write_text(summary_markdown(result))
        (tmp / "designs").mkdir()
        for design_id, design in result.designs.items():
            (tmp / "designs" / f"{design_id}.yaml").write_text(yaml.safe_dump(design.to_dict(), sort_keys=False))
        if report:
            from .report import write_report
            write_report(result, tmp, result.prepare())
        _swap_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    result.out_dir = out
    return out


def _swap_into_place(tmp: Path, out: Path) -> None:
    """Replace ``out`` by ``tmp``; the old folder is removed only once the new one is in place."""
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, out)
