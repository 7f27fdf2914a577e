"""Export one design of a results folder to the tools architects already trust (one module per format).

``export_design(results_dir, design_id, fmt, out)`` writes the tool's input files and a README whose
first line names the tool version they target. Formats: see `FORMATS`.
"""
from __future__ import annotations

from importlib import import_module
from pathlib import Path

from ..errors import StudyError
from .common import ExportContext, load_context

#: format name -> module under dse.exports holding ``export(ctx, out_dir) -> list[Path]``
FORMATS = {"rapidchiplet": "rapidchiplet", "booksim": "booksim", "gem5": "gem5", "scalesim": "scalesim",
           "chakra": "chakra", "astrasim": "astrasim"}


def export_design(results_dir: str | Path, design_id: str, fmt: str, out: str | Path | None = None) -> list[Path]:
    """Write design ``design_id`` of ``results_dir`` for tool ``fmt`` into ``out``; returns the files.

    ``out`` defaults to ``<results_dir>/exports/<design_id>/<fmt>``.
    """
    if fmt not in FORMATS:
        raise StudyError(f"unknown export format {fmt!r}; allowed: {', '.join(FORMATS)}", key="--to")
    module = import_module(f"{__name__}.{FORMATS[fmt]}")
    ctx = load_context(results_dir, design_id)
    out = Path(out) if out is not None else Path(results_dir) / "exports" / design_id / fmt
    out.mkdir(parents=True, exist_ok=True)
    return module.export(ctx, out)


__all__ = ["FORMATS", "ExportContext", "export_design", "load_context"]
