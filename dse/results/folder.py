"""The results folder: written whole or not at all by `write_results`, read back by `load_results`.

Writing goes to a hidden temporary sibling first and is swapped into place at the end, so an interrupted
run (Ctrl-C) leaves the previous results untouched and never a half-written CSV.

Folder contents: ``pareto.csv`` (non-dominated feasible designs), ``evaluations.csv`` (every evaluated
design, in evaluation order), ``study.yaml`` (the resolved study, defaults filled in), ``summary.md``,
``convergence.csv`` (per generation: designs evaluated, feasible, front size and the normalised
hypervolume of the front so far, see dse.search.hypervolume), ``designs/<design_id>.yaml`` (each Pareto
design, readable by ``dse evaluate``), ``plots/`` (PNG and SVG figures, dse.results.plots) and
``report.md`` / ``report.html`` (dse.results.report).

`read_design` is the one reader of a design file; everything that loads a design (exports, notebooks,
the report) goes through it. It is tolerant of files written by newer or older versions of the
toolkit: keys the `Design` does not know are ignored, keys it has a default for may be missing, and a
missing required key is a `StudyError` naming the file and the key.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import yaml

from ..errors import StudyError
from ..study.space import Design
from ..study.spec import Study
from .report import summary_markdown, write_report
from .result import StudyResult

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)     # libyaml when present: 262 designs in 0.1 s


def design_from_dict(data: dict, source: str | None = None) -> Design:
    """A `Design` from its YAML mapping (unknown keys ignored, defaults filled in)."""
    if not isinstance(data, dict):
        raise StudyError("a design file is a YAML mapping with keys rows, cols, chiplets, placement, ...",
                         source=source)
    known = {f.name: f for f in dataclasses.fields(Design)}
    missing = [name for name, f in known.items() if name not in data
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise StudyError(f"required key is missing (a design needs {', '.join(known)})", key=missing[0],
                         source=source)
    values = {k: v for k, v in data.items() if k in known}
    values["placement"] = {str(u): [int(s) for s in (slots if isinstance(slots, list) else [slots])]
                           for u, slots in (values["placement"] or {}).items()}
    design = Design(**values)
    n = design.rows * design.cols
    if len(design.chiplets) != n:
        raise StudyError(f"{len(design.chiplets)} chiplets listed for a {design.rows} x {design.cols} mesh "
                         f"({n} slots)", key="chiplets", source=source)
    bad = [(u, s) for u, slots in design.placement.items() for s in slots if not 0 <= s < n]
    if bad:
        raise StudyError(f"unit {bad[0][0]!r} is placed on slot {bad[0][1]}; slots are 0 .. {n - 1}",
                         key=f"placement.{bad[0][0]}", source=source)
    return design


def read_design(path: str | Path) -> Design:
    """Read one ``designs/<id>.yaml`` file."""
    path = Path(path)
    try:
        data = yaml.load(path.read_text(), Loader=_LOADER)
    except FileNotFoundError:
        raise StudyError(f"design file {path} does not exist") from None
    except yaml.YAMLError as exc:
        raise StudyError(f"not valid YAML: {exc}", source=str(path)) from None
    return design_from_dict(data, source=str(path))


def design_path(results_dir: str | Path, design_id: str) -> Path:
    """Where a design of a results folder lives; a clear error listing the ids there if it is not."""
    folder = Path(results_dir)
    path = folder / "designs" / f"{design_id}.yaml"
    if not path.exists():
        ids = sorted(p.stem for p in (folder / "designs").glob("*.yaml"))
        shown = ", ".join(ids[:8]) + (f", ... ({len(ids)} in all)" if len(ids) > 8 else "")
        raise StudyError(f"no design {design_id!r} in {folder}/designs; available: {shown or 'none'}",
                         key="--design")
    return path


def load_results(results_dir: str | Path):
    """A `StudyResult` from a results folder written by ``dse run`` (or `write_results`)."""
    folder = Path(results_dir)
    if not (folder / "study.yaml").exists():
        raise StudyError(f"{folder} is not a results folder (no study.yaml); run `dse run STUDY.yaml` first")
    study = Study.from_dict(yaml.safe_load((folder / "study.yaml").read_text()), source=str(folder / "study.yaml"))
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
