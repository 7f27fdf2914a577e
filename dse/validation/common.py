"""What every validation suite reports: one `Case` per measured figure, and its error measure.

A case is a published measurement and the model's counterpart, ``ratio`` = modelled / measured; ``set``
says whether the figure chose a parameter (``calibration``) or was never fitted (``validation``). A
set's error is the geometric-mean relative error, exp(mean |log ratio|) - 1 (docs/validation.md), so a
factor 2 too slow and a factor 2 too fast count alike.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

import yaml

DATA = Path(__file__).parent / "data"
SETS = ("calibration", "validation")
#: a figure within this relative distance of the measured one counts as "within 25 %"
WITHIN = 0.25


@dataclass(frozen=True)
class Case:
    """One measured figure and the model's counterpart (``unit`` is that of both figures)."""

    id: str
    metric: str
    unit: str
    measured: float
    modelled: float
    set: str
    source: str

    @property
    def ratio(self) -> float:
        return self.modelled / self.measured

    def as_dict(self) -> dict:
        """The case's fields and ratio as plain Python values (JSON)."""
        return {**asdict(self), "measured": float(self.measured), "modelled": float(self.modelled),
                "ratio": float(self.ratio)}


def read_data(name: str) -> dict:
    """A YAML file of the package's data folder (dse/validation/data/)."""
    return yaml.safe_load((DATA / name).read_text())


def geomean_error(ratios: Iterable[float]) -> float:
    """exp(mean |log ratio|) - 1: the geometric-mean relative error of model / measured ratios."""
    logs = [abs(math.log(r)) for r in ratios]
    return float(math.exp(sum(logs) / len(logs)) - 1.0)


def errors_by_set(cases: list[Case]) -> dict[str, float]:
    """The geometric-mean error of each set that has cases (calibration, validation)."""
    return {name: geomean_error(c.ratio for c in cases if c.set == name)
            for name in SETS if any(c.set == name for c in cases)}


def within(ratios: Iterable[float], tolerance: float = WITHIN) -> int:
    """How many ratios are within ``tolerance`` of 1."""
    return int(sum(abs(r - 1.0) <= tolerance for r in ratios))


def summary_lines(rows: list[dict]) -> list[str]:
    """One line per set of rows (dicts with ``id``, ``set``, ``ratio``): its cases, geometric-mean error,
    worst case, cases within 25 %."""
    summary = []
    for name in SETS:
        part = [r for r in rows if r["set"] == name]
        if part:
            worst = max(part, key=lambda r: abs(math.log(r["ratio"])))
            summary.append(f"- {name}: {len(part)} cases, geometric-mean error "
                           f"{geomean_error(r['ratio'] for r in part):.1%}, "
                           f"worst {worst['id']} (ratio {worst['ratio']:.2f}), "
                           f"{within(r['ratio'] for r in part)} within 25 %")
    return summary


def write_between(path: Path, start: str, end: str | None, text: str) -> None:
    """Replace what follows the marker ``start`` in the markdown file ``path`` (up to the marker ``end``,
    or to the end of the file when ``end`` is None) with ``text``."""
    doc = Path(path).read_text()
    if start not in doc or (end is not None and end not in doc):
        raise ValueError(f"{path} lacks the marker {start if start not in doc else end}")
    head, _, rest = doc.partition(start)
    tail = "" if end is None else end + rest.partition(end)[2]
    Path(path).write_text(f"{head}{start}\n\n{text}" + (f"\n{tail}" if end is not None else ""))


def write_command(description: str, render, doc: str, start: str, end: str | None,
                  argv: list[str] | None = None) -> int:
    """``python -m dse.validation.<suite> [--write DOC]``: print the suite's markdown (``render()``) and with
    ``--write`` put it into the markdown file between the markers ``start`` and ``end`` (`write_between`)."""
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    where = f"between its markers {start} and {end}" if end is not None else f"after its marker {start}"
    parser.add_argument("--write", type=Path, help=f"also write the tables into this markdown file ({doc}), {where}")
    args = parser.parse_args(argv)
    text = render()
    print(text)
    if args.write:
        write_between(args.write, start, end, text)
    return 0
