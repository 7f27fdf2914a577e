"""Export one design of a results folder to the tools architects already trust (one module per format).

``export_design(results_dir, design_id, fmt, out)`` writes the tool's input files and a README whose
first line names the tool version they target. Formats: see `FORMATS`.
"""
from __future__ import annotations

import json
from importlib import import_module
from pathlib import Path

from ..errors import StudyError
from ..results.design_file import check_design_id
from .common import ExportContext, load_context

#: format name -> module under dse.exports holding ``export(ctx, out_dir) -> list[Path]``
FORMATS = {"rapidchiplet": "rapidchiplet", "booksim": "booksim", "gem5": "gem5", "scalesim": "scalesim",
           "chakra": "chakra", "astrasim": "astrasim"}


#: marks a folder an export wrote, so a later export may write into it again
MARKER = ".dse-export"


def export_design(results_dir: str | Path, design_id: str, fmt: str, out: str | Path | None = None) -> list[Path]:
    """Write design ``design_id`` of ``results_dir`` for tool ``fmt`` into ``out``; returns the files.

    ``out`` defaults to ``<results_dir>/exports/<design_id>/<fmt>``. The design id must be a plain file
    name (letters, digits, ``_ . -``; dse.results.design_file.check_design_id), and every file is written
    inside ``out``. A given ``out`` must be missing, empty or a folder an export wrote (it holds `MARKER`):
    files already there are never overwritten otherwise.
    """
    if fmt not in FORMATS:
        raise StudyError(f"unknown export format {fmt!r}; allowed: {', '.join(FORMATS)}", key="--to")
    check_design_id(design_id)
    default = Path(results_dir) / "exports" / design_id / fmt
    target = Path(out) if out is not None else default
    _check_target(target, default=out is None)
    module = import_module(f"{__name__}.{FORMATS[fmt]}")
    ctx = load_context(results_dir, design_id)
    target.mkdir(parents=True, exist_ok=True)
    files = module.export(ctx, target)
    root = target.resolve()
    outside = [f for f in files if root not in Path(f).resolve().parents]
    if outside:                           # cannot happen with a checked id; never leave it unsaid if it does
        raise StudyError(f"the {fmt} export wrote {outside[0]} outside {target}", key="--design")
    (target / MARKER).write_text(json.dumps({"toolkit": "chiplet-dse", "design": design_id, "format": fmt}) + "\n")
    return files


def _check_target(out: Path, default: bool) -> None:
    """An export folder is missing, empty, one an export wrote, or (``default``) inside the results folder."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise StudyError(f"{out} is not a folder", key="--out")
    if default or not out.exists() or (out / MARKER).is_file():
        return
    try:
        names = sorted(p.name for p in out.iterdir())
    except OSError as exc:
        raise StudyError(f"cannot read folder {out}: {exc.strerror}", key="--out") from None
    if names:
        raise StudyError(f"{out} holds {names[0]!r} and was not written by dse export; an export never overwrites "
                         "files it did not write: give a new or empty folder", key="--out")


__all__ = ["FORMATS", "ExportContext", "export_design", "load_context"]
