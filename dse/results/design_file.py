"""Design files (``designs/<design_id>.yaml``, or a hand-written design for ``dse evaluate``): reading them.

`read_design` is the one reader of a design file; everything that loads a design (exports, notebooks,
the report, ``dse evaluate``) goes through it. Every key is type-checked (``placement: all`` or
``chiplets: big`` is an error naming the key, not a traceback or "3 chiplets listed"). Keys the `Design`
does not know are ignored by default, so files written by newer or older versions of the toolkit still
read; ``strict=True`` (``dse evaluate``, whose designs are written by hand) refuses them. Keys the design
has a default for may be missing; a missing required key is a `StudyError` naming the file and the key.
The placement may be written compactly, by role and layer (dse.results.design_yaml, which also writes them).

Design ids name files (``designs/<id>.yaml``, export files): `check_design_id` keeps them to one safe
file name.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ..errors import StudyError
from ..study.schema.common import check_safe_name
from ..study.space import SYSTEM_AXES, Design
from ..study.yaml_input import read_yaml_file
from .design_yaml import expand_placement

_FIELDS = {f.name: f for f in dataclasses.fields(Design)}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _whole(data: dict, key: str, minimum: int, source: str | None) -> int:
    value = data[key]
    if not _is_int(value) or value < minimum:
        raise StudyError(f"must be a whole number >= {minimum}, got {value!r}"[:200], key=key, source=source)
    return value


def _list_of(data: dict, key: str, check, what: str, source: str | None) -> list:
    value = data[key]
    if not isinstance(value, list) or not all(check(v) for v in value):
        raise StudyError(f"must be a list of {what}, got {value!r}"[:200], key=key, source=source)
    return value


def design_from_dict(data: Any, source: str | None = None, strict: bool = False) -> Design:
    """A `Design` from its YAML mapping (unknown keys ignored unless ``strict``, defaults filled in)."""
    if not isinstance(data, dict):
        raise StudyError("a design file is a YAML mapping with keys rows, cols, chiplets, placement, ...",
                         source=source)
    missing = [name for name, f in _FIELDS.items() if name not in data
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise StudyError(f"required key is missing (a design needs {', '.join(_FIELDS)})", key=missing[0],
                         source=source)
    unknown = [k for k in data if k not in _FIELDS]
    if strict and unknown:
        raise StudyError(f"unknown key {str(unknown[0])[:60]!r}; allowed: {', '.join(_FIELDS)}",
                         key=str(unknown[0])[:60], source=source)
    rows, cols = _whole(data, "rows", 1, source), _whole(data, "cols", 1, source)
    n = rows * cols
    chiplets = _list_of(data, "chiplets", lambda v: isinstance(v, str), "chiplet kind names", source)
    if len(chiplets) != n:
        raise StudyError(f"{len(chiplets)} chiplets listed for a {rows} x {cols} mesh ({n} slots)", key="chiplets",
                         source=source)
    stacks = _list_of(data, "hbm_stacks", lambda v: _is_int(v) and v >= 0, "whole numbers >= 0", source)
    ddr = _whole(data, "ddr_channels", 0, source)
    texts = {}
    for key in ("link", "mapping", "topology", "hbm_kind", "ddr_kind", "precision"):
        value = data.get(key)
        if key in data and not isinstance(value, str) and not (value is None and key not in ("link", "mapping")):
            raise StudyError(f"must be a name, got {value!r}"[:200], key=key, source=source)
        if key in data:
            texts[key] = value
    placement = expand_placement(data["placement"], source)
    bad = [(u, s) for u, slots in placement.items() for s in slots if not 0 <= s < n]
    if bad:
        raise StudyError(f"unit {bad[0][0]!r} is placed on slot {bad[0][1]}; slots are 0 .. {n - 1}",
                         key=f"placement.{bad[0][0]}", source=source)
    if data.get("system") is not None:
        texts["system"] = _system(data["system"], source)
    return Design(rows=rows, cols=cols, chiplets=list(chiplets), hbm_stacks=list(stacks), ddr_channels=ddr,
                  placement=placement, **texts)


def _system(value: Any, source: str | None) -> dict[str, int]:
    """A system design's layout across packages: whole numbers >= 1 per axis (pipeline, experts, replicas)."""
    if not isinstance(value, dict) or any(k not in SYSTEM_AXES for k in value):
        raise StudyError(f"must map {', '.join(SYSTEM_AXES)} to whole numbers, got {value!r}"[:200], key="system",
                         source=source)
    for axis, n in value.items():
        if not _is_int(n) or n < 1:
            raise StudyError(f"must be a whole number >= 1, got {n!r}"[:200], key=f"system.{axis}", source=source)
    return dict(value)


def read_design(path: str | Path, strict: bool = False) -> Design:
    """Read one design file (``designs/<id>.yaml``); ``strict``: unknown keys are errors."""
    path = Path(path)
    return design_from_dict(read_yaml_file(path, "design file"), source=str(path), strict=strict)


def check_design_id(design_id: str) -> str:
    """``design_id`` if it can name a file inside a folder and nothing else (no ``/``, ``..``), else a
    `StudyError` naming ``--design``."""
    try:
        return check_safe_name(design_id, "a design id")
    except ValueError as exc:
        raise StudyError(f"{exc}"[:200], key="--design") from None


def design_path(results_dir: str | Path, design_id: str) -> Path:
    """Where a design of a results folder lives; a clear error listing the ids there if it is not."""
    folder = Path(results_dir)
    path = folder / "designs" / f"{check_design_id(design_id)}.yaml"
    if not path.is_file():
        ids = sorted(p.stem for p in (folder / "designs").glob("*.yaml"))
        shown = ", ".join(ids[:8]) + (f", ... ({len(ids)} in all)" if len(ids) > 8 else "")
        raise StudyError(f"no design {design_id!r} in {folder}/designs; available: {shown or 'none'}",
                         key="--design")
    return path
