"""Export one design of a results folder to the tools architects already trust (one module per format).

``export_design(results_dir, design_id, fmt, out)`` writes the tool's input files and a README whose
first line names the tool version they target. Formats: see `FORMATS`. The files follow the rule of every
command that writes (dse.results.ownership): written into a hidden folder inside ``out`` first, then each
renamed into place and recorded in ``out``'s manifest; a file there of the same name that dse did not write
is refused before any is moved, and other files in ``out`` are left alone.
"""
from __future__ import annotations

import os
import secrets
import shutil
from importlib import import_module
from pathlib import Path

from ..errors import StudyError
from ..results.design_file import check_design_id
from ..results.ownership import record_files, written_by_dse
from .common import ExportContext, load_context

#: format name -> module under dse.exports holding ``export(ctx, out_dir) -> list[Path]``
FORMATS = {"rapidchiplet": "rapidchiplet", "booksim": "booksim", "gem5": "gem5", "scalesim": "scalesim",
           "chakra": "chakra", "astrasim": "astrasim"}


def export_design(results_dir: str | Path, design_id: str, fmt: str, out: str | Path | None = None) -> list[Path]:
    """Write design ``design_id`` of ``results_dir`` for tool ``fmt`` into ``out``; returns the files.

    ``out`` defaults to ``<results_dir>/exports/<design_id>/<fmt>``. The design id must be a plain file
    name (letters, digits, ``_ . -``; dse.results.design_file.check_design_id), and every file is written
    inside ``out``. A file already in ``out`` is replaced only if dse wrote it (dse.results.ownership);
    files of other names are left alone.
    """
    if fmt not in FORMATS:
        raise StudyError(f"unknown export format {fmt!r}; allowed: {', '.join(FORMATS)}", key="--to")
    check_design_id(design_id)
    target = Path(out) if out is not None else Path(results_dir) / "exports" / design_id / fmt
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise StudyError(f"{target} is not a folder", key="--out")
    module = import_module(f"{__name__}.{FORMATS[fmt]}")
    ctx = load_context(results_dir, design_id)
    target.mkdir(parents=True, exist_ok=True)
    stage = target / f".dse.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    stage.mkdir()
    try:
        files = module.export(ctx, stage)
        root = stage.resolve()
        outside = [f for f in files if root not in Path(f).resolve().parents]
        if outside:                       # cannot happen with a checked id; never leave it unsaid if it does
            raise StudyError(f"the {fmt} export wrote {outside[0]} outside {target}", key="--design")
        names = [Path(f).resolve().relative_to(root) for f in files]
        for name in names:
            dest = target / name
            if (dest.exists() or dest.is_symlink()) and not written_by_dse(dest):
                raise StudyError(f"{dest} exists and dse did not write it; an export never replaces files it did "
                                 "not write: give another --out", key="--out")
        for name in names:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage / name, target / name)
        record_files([target / name for name in names])
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return [target / name for name in names]


__all__ = ["FORMATS", "ExportContext", "export_design", "load_context"]
