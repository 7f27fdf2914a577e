"""The results folder: written whole or not at all by `write_results`, read back by `load_results`.

Writing goes to a hidden temporary sibling first and is swapped into place at the end, so an interrupted
run (Ctrl-C, or a kill at any moment) leaves the previous results or the new ones, never a half-written
CSV; the next write finishes or rolls back a swap cut short (dse.results.swap). A folder is only ever
replaced if dse wrote it: `check_results_target` refuses any other non-empty folder.

Folder contents: ``pareto.csv`` (non-dominated feasible designs), ``evaluations.csv`` (every evaluated
design, in evaluation order), ``study.yaml`` (the resolved study, defaults filled in), ``summary.md``,
``convergence.csv`` (per generation: designs evaluated, feasible, front size and the normalised
hypervolume of the front so far, see dse.search.hypervolume), ``designs/<design_id>.yaml`` (each Pareto
design, readable by ``dse evaluate``, its placement written compactly: dse.results.design_yaml),
``placements.parquet`` (every evaluated design's placement, one row per unit: dse.results.placement_store;
a CSV cell holds a placement too long for it as a summary), ``baseline.json`` (a search seeded with the
EPLB-style design, dse.search.baseline: its ``design_id`` and its numeric metrics, non-finite as null;
`load_results` reads it back as ``StudyResult.baseline``), ``plots/`` (PNG and SVG figures,
dse.results.plots) and ``report.md`` / ``report.html`` (dse.results.report); in the folder and each
folder under it ``.dse-written``, the manifest of the files dse wrote there (dse.results.ownership: the
CSVs carry no comment line, so they load with ``pandas.read_csv`` defaults, and dse knows them by it).

Design files are read by dse.results.design_file (`read_design`, re-exported here). Every file goes
through libyaml's C emitter and pandas' C CSV writer: writing takes time linear in what the folder holds.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import StudyError
from ..model.objectives import OBJECTIVE_COLUMNS, violations
from ..study.spec import Study
from ..study.yaml_input import load_yaml
from ..system.metrics import SYSTEM_METRICS
from .design_file import check_design_id, design_from_dict, design_path, read_design
from .design_yaml import design_text, dump_yaml
from .placement_store import cap_cells, read_placements, write_placements
from .report import summary_markdown, write_report
from .ownership import foreign_file, record_tree, written_by_dse
from .result import StudyResult
from .swap import DSE_ENTRIES, MARKER, fault_point, new_temporary, read_marker, recover, swap_in, write_marker

__all__ = ["write_results", "load_results", "read_design", "design_from_dict", "design_path", "read_study_file",
           "check_results_target", "prepare_results_target", "baseline_record", "read_baseline"]

BASELINE = "baseline.json"
#: metrics of the hardware itself (and the constraints' inputs): real figures for an infeasible design too
HARDWARE_METRICS = frozenset({"area_mm2", "package_area_mm2", "cost_usd", "peak_power_w", "embodied_kg",
                              "capacity_short_bytes", "unplaced_experts", "max_die_mm2", "units_without_memory",
                              "packages", "nodes"})
BASELINE_SOURCE = "EPLB-style seed (dse.search.baseline)"


def read_study_file(folder: Path) -> Study:
    """The resolved study of results folder ``folder`` (its ``study.yaml``)."""
    path = folder / "study.yaml"
    if not path.is_file():
        raise StudyError(f"{folder} is not a results folder (no study.yaml); run `dse run STUDY.yaml` first")
    return Study.from_dict(load_yaml(path.read_text(), source=str(path)), source=str(path))


def evaluations_table(result) -> pd.DataFrame:
    """``evaluations.csv``'s table: an infeasible design's workload metrics (latency, throughput, energy,
    ...: what the model returns for a design that cannot run is a penalty, not a figure) left empty, and
    ``infeasible_because`` naming the constraints it violates (dse.model.objectives.violations)."""
    ev = result.evaluations.copy()
    bad = ~ev["feasible"].to_numpy(bool)
    ev.insert(ev.columns.get_loc("feasible") + 1, "infeasible_because", "")
    if not bad.any():
        return ev
    why = violations(ev.loc[bad], result.study)
    ev.loc[bad, "infeasible_because"] = ["; ".join(v) or "not feasible" for v in why]
    workload = (set(SYSTEM_METRICS) | set(OBJECTIVE_COLUMNS.values())) - HARDWARE_METRICS
    ev.loc[bad, [c for c in ev.columns if c in workload]] = np.nan
    return ev


def load_results(results_dir: str | Path):
    """A `StudyResult` from a results folder written by ``dse run`` (or `write_results`)."""
    folder = Path(results_dir)
    study = read_study_file(folder)
    # a folder from before peak and mean power were told apart names the peak power_w
    old_names = {"power_w": "peak_power_w", "power_w_over": "peak_power_w_over"}
    pareto = pd.read_csv(folder / "pareto.csv").rename(columns=old_names)
    evaluations = pd.read_csv(folder / "evaluations.csv").rename(columns=old_names)
    designs = {p.stem: read_design(p) for p in sorted((folder / "designs").glob("*.yaml"))}
    screening = folder / "screening.json"
    baseline = read_baseline(folder)
    if baseline is not None and not (evaluations["design_id"] == baseline["design_id"]).any():
        raise StudyError(f"{folder / BASELINE} names design {baseline['design_id']!r}, which evaluations.csv "
                         "does not hold")
    return StudyResult(study=study, evaluations=evaluations, pareto=pareto, designs=designs, out_dir=folder,
                       screening=json.loads(screening.read_text()) if screening.is_file() else None,
                       placements=read_placements(folder),
                       baseline=baseline["design_id"] if baseline is not None else None)


def baseline_record(result: StudyResult) -> dict | None:
    """What ``baseline.json`` holds (module docstring); None when the run was not seeded."""
    if result.baseline is None:
        return None
    rows = result.evaluations.loc[result.evaluations["design_id"] == result.baseline]
    if rows.empty:
        return None
    metrics = {}
    for column, value in rows.iloc[0].items():
        if column != "design_id" and isinstance(value, (int, float, np.integer, np.floating)) \
                and not isinstance(value, bool):
            metrics[str(column)] = float(value) if np.isfinite(value) else None
    return {"design_id": str(result.baseline), "source": BASELINE_SOURCE, "metrics": metrics}


def read_baseline(folder: str | Path) -> dict | None:
    """The ``baseline.json`` of results folder ``folder`` (None: no such file, a run without the seed);
    a `StudyError` naming the file when it is not one dse wrote."""
    path = Path(folder) / BASELINE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise StudyError(f"{path} is unreadable: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("design_id"), str) \
            or not isinstance(data.get("metrics", {}), dict):
        raise StudyError(f"{path} must hold an object with a string design_id and a metrics object")
    check_design_id(data["design_id"])
    return data


def check_results_target(out: Path) -> None:
    """A `StudyError` naming ``--out`` unless ``out`` is missing, an empty folder, or a results folder dse
    wrote (marked, or from before the marker: study.yaml, pareto.csv and evaluations.csv) holding nothing
    but what dse writes: its own entries, and files (or folders of files) any dse command wrote there,
    each dse's by dse.results.ownership's rule (``dse compare --out``'s page, ``dse timeline --out``'s
    figures). The folder is replaced whole, so anything else in it would be lost."""
    if out.is_symlink():
        raise StudyError(f"{out} is a symbolic link; give the folder itself", key="--out")
    if not out.exists():
        return
    if not out.is_dir():
        raise StudyError(f"{out} is a file, not a folder", key="--out")
    try:
        names = sorted(entry.name for entry in out.iterdir())
    except OSError as exc:
        raise StudyError(f"cannot read folder {out}: {exc.strerror}", key="--out") from None
    if not names:
        return
    if read_marker(out) is None and not {"study.yaml", "pareto.csv", "evaluations.csv"} <= set(names):
        raise StudyError(f"{out} is a folder that dse did not write (it holds {names[0]!r}, and no {MARKER}); the "
                         "results folder is replaced whole: give a new or empty folder", key="--out")
    foreign = [n for n in names if n not in DSE_ENTRIES and not _dse_entry(out / n)]
    if foreign:
        raise StudyError(f"{out} holds {foreign[0]!r}, which dse did not write; the results folder is replaced "
                         "whole: move it out first or give another folder", key="--out")


def _dse_entry(path: Path) -> bool:
    """A file dse wrote, or a folder holding only files dse wrote (dse.results.ownership)."""
    if path.is_dir() and not path.is_symlink():
        return foreign_file(path) is None
    return written_by_dse(path)


def prepare_results_target(out_dir: str | Path) -> Path:
    """Make ``out_dir`` ready to receive results: finish or roll back a swap a killed run left
    (dse.results.swap.recover), then `check_results_target`."""
    out = Path(out_dir)
    recover(out)
    check_results_target(out)
    return out


def write_results(result: StudyResult, out_dir: str | Path, report: bool = True, svg: bool = False) -> Path:
    """Write the results folder atomically (see dse.results.swap); returns its path.

    ``out_dir`` must be missing, empty or a results folder dse wrote (`check_results_target`).
    ``report=False`` leaves out the plots and report (the tables alone are much faster to write); ``svg``
    adds an SVG beside each plot's PNG (`dse run --svg`)."""
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    prepare_results_target(out)
    tmp = new_temporary(out)
    try:
        write_marker(tmp, result.study.name, complete=False)
        fault_point("created")
        cap_cells(result.pareto).to_csv(tmp / "pareto.csv", index=False)
        cap_cells(evaluations_table(result)).to_csv(tmp / "evaluations.csv", index=False)
        if result.placements is not None:
            write_placements(result.placements, tmp)
        if result.convergence is not None:
            result.convergence.to_csv(tmp / "convergence.csv", index=False)
        if result.screening is not None:
            (tmp / "screening.json").write_text(json.dumps(result.screening, indent=2) + "\n")
        baseline = baseline_record(result)
        if baseline is not None:
            (tmp / BASELINE).write_text(json.dumps(baseline, indent=1, allow_nan=False) + "\n")
        (tmp / "study.yaml").write_text(dump_yaml(result.study.resolved()))
        (tmp / "summary.md").write_text(summary_markdown(result))
        (tmp / "designs").mkdir()
        for design_id, design in result.designs.items():
            (tmp / "designs" / f"{check_design_id(design_id)}.yaml").write_text(design_text(design))
        if report:
            write_report(result, tmp, result.prepare(), svg=svg)
        record_tree(tmp, skip=(MARKER,))
        fault_point("written")
        write_marker(tmp, result.study.name, complete=True)
        fault_point("complete")
        swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    result.out_dir = out
    return out
