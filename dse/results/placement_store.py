"""Placements in the results folder: CSV cells every spreadsheet and CSV reader accepts, and every evaluated
design's placement whole in ``placements.parquet``.

A ``placement`` cell of ``pareto.csv`` and ``evaluations.csv`` holds the placement itself, ``unit=slot+slot;...``,
when that fits in `MAX_CELL` characters, else a summary of it (`placement_summary`): units and copies,
the copies on each chiplet slot, a digest (`placement_digest`) and the files that hold it whole. Every
other cell is held to the same cap (`cap_cells`). `MAX_CELL` is Excel's limit on the characters of a cell
("Total number of characters that a cell can contain: 32,767", Microsoft, *Excel specifications and
limits*); Python's ``csv`` module refuses fields over 131,072 characters unless told otherwise
(``csv.field_size_limit``), so both read the tables with their defaults.

``placements.parquet`` has one row per (evaluated design, unit): ``design_id``, ``unit`` (both dictionary
encoded) and ``slots`` (the slots holding the unit's copies). `placement_of` reads a design's back.
"""
from __future__ import annotations

import hashlib
from itertools import chain
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

#: the most characters a CSV cell of the results folder holds (Excel's cell limit)
MAX_CELL = 32_767
PLACEMENTS_FILE = "placements.parquet"


def placement_text(placement: dict[str, list[int]]) -> str:
    """The placement in one line, in its own unit order: ``embed=0;L0.attn=0;L3.e0=6+9;...``."""
    return ";".join(f"{u}={'+'.join(map(str, s))}" for u, s in placement.items())


#: unit names of a placement (in its order) -> (the order sorting them, the SHA-256 of their sorted names, each
#: followed by a newline: the start of every `placement_digest` of that order, copied before it goes on)
_SORTED: dict[tuple, tuple] = {}
#: unit names of a placement (in its order) -> the characters of their names (`placement_cell`)
_CHARS: dict[tuple, int] = {}


def flat_placement(placement: dict[str, list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(copies of each unit, every unit's slots one after another), in the placement's order: made once per
    design by dse.results.result for its CSV cell and the placements table."""
    counts = np.fromiter(map(len, placement.values()), "<i4", len(placement))
    return counts, np.fromiter(chain.from_iterable(placement.values()), "<i4", int(counts.sum()))


def placement_digest(placement: dict[str, list[int]], flat: tuple | None = None) -> str:
    """The first 16 hex digits of a SHA-256 over the units sorted by name: their names (each followed by a
    newline), then each unit's copy count, then every unit's slots, as 32-bit little-endian integers. Two
    placements have the same digest when they put every unit on the same slots, whatever their order.
    ``flat``: the placement's `flat_placement` arrays, when already made."""
    names = tuple(placement)
    if names not in _SORTED:
        if len(_SORTED) > 64:
            _SORTED.clear()
        order = np.array(sorted(range(len(names)), key=names.__getitem__), np.int64)
        _SORTED[names] = (order, hashlib.sha256("".join(names[i] + "\n" for i in order).encode()))
    order, names_hash = _SORTED[names]
    counts, slots = flat if flat is not None else flat_placement(placement)
    starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)[:-1]])
    ordered = counts[order]                     # each unit's slots gathered in name order, by whole runs
    begin = np.repeat(starts[order] - np.concatenate([[0], np.cumsum(ordered, dtype=np.int64)[:-1]]), ordered)
    gathered = slots[begin + np.arange(len(slots))]
    digest = names_hash.copy()
    digest.update(ordered.astype("<i4").tobytes())
    digest.update(gathered.astype("<i4").tobytes())
    return digest.hexdigest()[:16]


def placement_summary(placement: dict[str, list[int]], slots: int, files: str, flat: tuple | None = None) -> str:
    """A placement too long for a cell, in a few hundred characters: ``14972 units in 14972 copies; copies
    per slot 0:250 1:233 ...; sha256 1f0c...; whole in designs/d00042.yaml and placements.parquet``.
    ``flat``: its `flat_placement` arrays, when already made."""
    flat = flat if flat is not None else flat_placement(placement)
    counts = np.bincount(flat[1], minlength=slots) if len(flat[1]) else np.zeros(slots, np.int64)
    per_slot = " ".join(f"{s}:{n}" for s, n in enumerate(counts.tolist()))
    return (f"{len(placement)} units in {len(flat[1])} copies; copies per slot {per_slot}; "
            f"sha256 {placement_digest(placement, flat)}; whole in {files}")


def placement_cell(placement: dict[str, list[int]], slots: int, files: str, flat: tuple | None = None) -> str:
    """The ``placement`` cell of a design: the placement itself when it fits in `MAX_CELL` characters, else
    `placement_summary` naming ``files`` (``flat``: the `flat_placement` arrays, when already made)."""
    names = tuple(placement)
    if names not in _CHARS:
        if len(_CHARS) > 64:
            _CHARS.clear()
        _CHARS[names] = sum(map(len, names))
    if _CHARS[names] + 3 * len(names) <= MAX_CELL:      # "u=s;" at least: no need to write what cannot fit
        text = placement_text(placement)
        if len(text) <= MAX_CELL:
            return text
    return placement_summary(placement, slots, files, flat)


def cap_cells(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with every text cell over `MAX_CELL` characters cut to its start, its length and digest."""
    out = table
    for name in table.columns:
        if not (table[name].dtype == object or pd.api.types.is_string_dtype(table[name])):
            continue
        lengths = [len(v) if isinstance(v, str) else 0 for v in table[name]]
        if max(lengths, default=0) <= MAX_CELL:
            continue
        out = out.copy() if out is table else out
        out[name] = [v if n <= MAX_CELL else
                     f"{v[:1000]} ... ({n} characters, sha256 {hashlib.sha256(v.encode()).hexdigest()[:16]})"
                     for v, n in zip(table[name], lengths)]
    return out


def placements_table(design_ids: list[str], placements: list[dict[str, list[int]]],
                     flats: list[tuple] | None = None) -> pa.Table:
    """One row per (design, unit): ``design_id``, ``unit`` (dictionary encoded), ``slots`` (list of int32).
    ``flats``: each placement's `flat_placement` arrays, when already made."""
    index: dict[str, int] = {}
    parts: dict[str, list[np.ndarray]] = {"unit": [], "count": [], "slot": [], "design": []}
    first: list[str] = []
    for p, placement in enumerate(placements):
        names = list(placement)
        if names == first:                          # the units in the order of the design before: no lookups
            parts["unit"].append(parts["unit"][-1])
        else:
            parts["unit"].append(np.fromiter((index.setdefault(u, len(index)) for u in names), np.int32, len(names)))
            first = names
        counts, slots = flats[p] if flats is not None else flat_placement(placement)
        parts["count"].append(counts)
        parts["slot"].append(slots)
        parts["design"].append(np.full(len(placement), p, np.int32))
    flat = {name: np.concatenate(arrays) if arrays else np.zeros(0, np.int32) for name, arrays in parts.items()}
    offsets = np.concatenate([[0], np.cumsum(flat["count"])]).astype(np.int32)
    return pa.table({
        "design_id": pa.DictionaryArray.from_arrays(flat["design"], pa.array(design_ids, pa.string())),
        "unit": pa.DictionaryArray.from_arrays(flat["unit"], pa.array(list(index), pa.string())),
        "slots": pa.ListArray.from_arrays(offsets, pa.array(flat["slot"], pa.int32()))})


def write_placements(table: pa.Table, folder: Path) -> None:
    """``placements.parquet`` in ``folder`` (zstd-compressed: slots repeat), with column statistics (min and
    max per row group, for readers that skip row groups) on ``design_id`` only: those of ``unit`` (15,000
    names) and ``slots`` took half the writing time and no filter uses them."""
    pq.write_table(table, folder / PLACEMENTS_FILE, compression="zstd", write_statistics=["design_id"])


def read_placements(folder: Path) -> pa.Table | None:
    """The placements table of a results folder, None for a folder written before it."""
    path = Path(folder) / PLACEMENTS_FILE
    return pq.read_table(path) if path.is_file() else None


def placement_of(table: pa.Table, design_id: str) -> dict[str, list[int]]:
    """The whole placement of one evaluated design from a placements table ({} if it holds none)."""
    rows = table.filter(pc.equal(table["design_id"].cast(pa.string()), design_id))
    return dict(zip(rows["unit"].cast(pa.string()).to_pylist(), rows["slots"].to_pylist()))
