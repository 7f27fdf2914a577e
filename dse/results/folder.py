"""The results folder: written whole or not at all by `write_results`, read back by `load_results`.

Writing goes to a hidden temporary sibling first and is swapped into place at the end, so an interrupted
run (Ctrl-C) leaves the previous results untouched and never a half-written CSV.

Folder contents: ``pareto.csv`` (non-dominated feasible designs), ``evaluations.csv`` (every evaluated
design, in evaluation order), ``study.yaml`` (the resolved study, defaults filled in), ``summary.md``,
``convergence.csv`` (per generation: designs evaluated, feasible, front size and the normalised
hypervolume of the front so far, see dse.search.hypervolume), ``designs/<design_id>.yaml`` (each Pareto
design, readable by ``dse evaluate``), ``plots/`` (PNG and SVG figures, dse.results.plots) and
``report.md`` / ``report.html`` (dse.results.report).

Design files are read by dse.results.design_file (`read_design`, re-exported here).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import yaml

from ..errors import StudyError
from ..study.spec import Study
from ..study.yaml_input import load_yaml
from .design_file import design_from_dict, design_path, read_design
from .report import summary_markdown, write_report
from .result import StudyResult

__all__ = ["write_results", "load_results", "read_design", "design_from_dict", "design_path", "read_study_file"]

def read_study_file(folder: Path) -> Study:
    """The resolved study of results folder ``folder`` (its ``study.yaml``)."""
    path = folder / "study.yaml"
    if not path.is_file():
        raise StudyError(f"{folder} is not a results folder (no study.yaml); run `dse run STUDY.yaml` first")
    return Study.from_dict(load_yaml(path.read_text(), source=str(path)), source=str(path))


def load_results(results_dir: str | Path):
    """A `StudyResult` from a results folder written by ``dse run`` (or `write_results`)."""
    folder = Path(results_dir)
    study = read_study_file(folder)
    pareto = pd.read_csv(folder / "pareto.csv")
    evaluations = pd.read_csv(folder / "evaluations.csv")
    designs = {p.stem: read_design(p) for p in sorted((folder / "designs").glob("*.yaml"))}
    return StudyResult(study=study, evaluations=evaluations, pareto=pareto, designs=designs, out_dir=folder)


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
