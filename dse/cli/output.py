"""What the CLI prints: tables fitted to the terminal with one number format and unit per column, and the
one-line notice (with a spinner) while the Numba models compile on a command's first run.

Tables: every column's numbers share one scale and one format, its unit in the header (times in ms or s,
memory in GiB, fractions in %, other units with the SI prefix the column's largest value calls for); a
table wider than the terminal is printed as several tables of whole columns, the first ``keep`` columns
(the row names) repeated in each, so that no cell is ever cut.
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
import numbers
import os
import sys
import textwrap
import threading
from dataclasses import dataclass
from pathlib import Path

import numba
from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

#: SI prefixes by power of 1000
PREFIXES = {-4: "p", -3: "n", -2: "µ", -1: "m", 0: "", 1: "k", 2: "M", 3: "G", 4: "T", 5: "P"}
#: units shown as they are, without an SI prefix
FIXED = ("", "text", "%", "GiB", "MB", "ms", "mm²", "$", "mJ/token")
#: a column whose nonzero values span more than this ratio is printed in engineering notation
SPAN = 1e4


@dataclass(frozen=True)
class Col:
    """One column of a table: ``key`` in the rows, its ``header`` (without unit) and the SI ``unit`` of its
    values: ``s`` (shown in ms or s), ``B`` (GiB), ``frac`` (%), ``""`` (a plain number), any other unit
    (W, J, FLOP/s, B/s) with an SI prefix; ``text``: the value as it is."""

    key: str
    header: str
    unit: str = ""
    left: bool = False


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _finite(values) -> list[float]:
    return [abs(float(v)) for v in values if _is_number(v) and math.isfinite(float(v))]


def scale_of(unit: str, values) -> tuple[str, float]:
    """The displayed unit and factor of a column of values in SI ``unit``."""
    if unit == "B":
        return "GiB", 2.0 ** -30
    if unit == "frac":
        return "%", 100.0
    if unit in FIXED:
        return unit if unit != "text" else "", 1.0
    top = max(_finite(values), default=0.0)
    if unit == "s":
        return ("ms", 1e3) if top < 1.0 else ("s", 1.0)
    power = int(math.floor(math.log10(top) / 3)) if top > 0 else 0
    power = min(max(power, min(PREFIXES)), max(PREFIXES))
    return PREFIXES[power] + unit, 1000.0 ** -power


def format_column(values, unit: str) -> tuple[str, list[str]]:
    """(unit shown, cells): numbers scaled to one unit, all with one format: fixed point with the decimals
    that give the largest value three to four significant digits, or engineering notation (``12.3e-6``)
    for all cells when the nonzero values span more than `SPAN`."""
    if unit == "text":
        return "", [str(v) for v in values]
    shown, factor = scale_of(unit, values)
    scaled = [v * factor for v in _finite(values)]
    nonzero = [v for v in scaled if v > 0]
    top = max(scaled, default=0.0)
    whole = factor == 1.0 and all(isinstance(v, numbers.Integral) for v in values if _is_number(v))
    engineering = not whole and bool(nonzero) and top / min(nonzero) > SPAN
    decimals = 0 if top == 0 else min(max(3 - int(math.floor(math.log10(top))), 0), 3)
    if whole:
        decimals = 0                          # counts stay whole
    cells = []
    for v in values:
        if not _is_number(v):
            cells.append("-" if v is None else str(v))
        elif not math.isfinite(float(v)):
            cells.append(str(float(v)))
        elif engineering:
            cells.append(engineering_text(float(v) * factor))
        else:
            cells.append(f"{float(v) * factor:,.{decimals}f}")
    return shown, cells


def engineering_text(value: float, digits: int = 3) -> str:
    """``value`` with an exponent that is a multiple of 3 and ``digits`` significant digits (``12.3e-6``)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    power = int(math.floor(math.log10(abs(value)) / 3)) * 3
    mantissa = value / 10.0 ** power
    text = f"{mantissa:.{max(digits - 1 - int(math.floor(math.log10(abs(mantissa)))), 0)}f}"
    return text if power == 0 else f"{text}e{power}"


def number(value) -> str:
    """One figure alone (a key-value table's value): whole numbers with thousands separators, other numbers
    with four significant digits in fixed point from 0.001 to 1,000,000 and in engineering notation outside."""
    if isinstance(value, str) or isinstance(value, bool) or value is None:
        return str(value)
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    if 1e-3 <= abs(value) < 1e6:
        return f"{value:,.{max(3 - int(math.floor(math.log10(abs(value)))), 0)}f}"
    return engineering_text(value, 4)


def console() -> Console:
    """The console tables print on: the terminal's width (``COLUMNS`` when set, else 80 off a terminal);
    the compile spinner stops first."""
    compile_done()
    return Console()


def print_table(rows, columns: list[Col], title: str = "", keep: int = 1, out: Console | None = None,
                caption: str | None = None) -> None:
    """Print ``rows`` (a DataFrame or a list of dicts) as one table per group of whole columns that fits
    the console, the first ``keep`` columns repeated in each (module docstring)."""
    compile_done()
    out = out or console()
    records = rows.to_dict(orient="records") if hasattr(rows, "to_dict") else list(rows)
    built = [_Built(col, *format_column([r[col.key] for r in records], col.unit)) for col in columns]
    groups = _groups([b.width for b in built], keep, out.width)
    for i, group in enumerate(groups):
        more = f" ({i + 1}/{len(groups)})" if len(groups) > 1 else ""
        table = Table(title=Text(f"{title}{more}") if title else None,
                      caption=caption if i == len(groups) - 1 else None)
        for j in group:
            table.add_column(Text(built[j].header), justify="left" if built[j].col.left else "right",
                             overflow="fold")
        for r in range(len(records)):
            table.add_row(*[Text(built[j].cells[r]) for j in group])
        out.print(table)


@dataclass(frozen=True)
class _Built:
    """A column formatted: its spec, the unit shown and its cells."""

    col: Col
    unit: str
    cells: list

    @property
    def header(self) -> str:
        return f"{self.col.header} [{self.unit}]" if self.unit else self.col.header

    @property
    def width(self) -> int:
        return max([len(self.header)] + [len(c) for c in self.cells])


def _groups(widths: list[int], keep: int, limit: int) -> list[list[int]]:
    """Column indices split into groups whose table (3 characters of border and padding per column, one
    more at the end) fits ``limit``, each starting with the first ``keep`` columns."""
    head = list(range(min(keep, len(widths))))
    base = 1 + sum(widths[i] + 3 for i in head)
    groups, current, used = [], [], base
    for i in range(len(head), len(widths)):
        if current and used + widths[i] + 3 > limit:
            groups.append(head + current)
            current, used = [], base
        current.append(i)
        used += widths[i] + 3
    return groups + [head + current] if current or not groups else groups


def print_pairs(pairs, title: str = "", out: Console | None = None) -> None:
    """A two-column table of (name, value) pairs, each value by `number` (its unit in its name)."""
    compile_done()
    table = Table(title=Text(title) if title else None, show_header=False)
    table.add_column("name", overflow="fold")
    table.add_column("value", justify="right", overflow="fold")
    for name, value in pairs:
        table.add_row(Text(str(name)), Text(value if isinstance(value, str) else number(value)))
    (out or console()).print(table)


# --- the compile notice --------------------------------------------------------------------------------

#: the first-call seconds of each command with a cold Numba cache, measured (README, "First calls"); a data
#: file, so that measuring again does not change the sources the cache is keyed by
COMPILE_TIMES = Path(__file__).with_name("compile_times.json")


def first_call_s(command: str) -> float | None:
    """The measured first-call time of ``command`` (`COMPILE_TIMES`), if measured."""
    try:
        return json.loads(COMPILE_TIMES.read_text())["seconds"].get(command)
    except (OSError, ValueError, KeyError):
        return None


def _marker(command: str) -> Path:
    """The file that says ``command`` finished with the Numba cache of these sources (dse.jit_cache keys
    the cache folder by the sources, so an edit or upgrade starts without it)."""
    return Path(numba.config.CACHE_DIR) / f".compiled-{command}"


def cache_is_warm(command: str) -> bool:
    """Whether ``command`` has run to the end with this version's Numba cache (its kernels are compiled)."""
    return bool(numba.config.CACHE_DIR) and _marker(command).exists()


#: seconds a command runs before the notice shows (bad input fails sooner, in its one line)
NOTICE_AFTER_S = 0.5


class _Notice:
    """The notice and spinner of one `compiling` block, started by a timer and stopped at most once."""

    def __init__(self, err: Console, text: str):
        self.err, self.text, self.lock, self.live = err, text, threading.Lock(), None
        self.timer = threading.Timer(NOTICE_AFTER_S, self.show)
        self.timer.daemon = True

    def show(self) -> None:
        with self.lock:
            if self.timer is None:
                return
            self.err.print(self.text, highlight=False)
            # stdout on the same terminal prints above the spinner; piped, it is left alone
            self.live = Live(Spinner("dots", text="compiling"), console=self.err, transient=True,
                             redirect_stdout=sys.stdout.isatty(), redirect_stderr=False)
            self.live.start()

    def stop(self) -> None:
        with self.lock:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            if self.live is not None:
                self.live.stop()
                self.live = None


#: the notice shown now (at most one)
_NOTICES: list[_Notice] = []


@contextlib.contextmanager
def compiling(command: str, out: Console | None = None):
    """Around the part of ``command`` that may compile the Numba models. When the cache is cold and stderr
    (``out``) is a terminal, one line ``compiling the models (first run only, about N s)...`` and a
    spinner under it from `NOTICE_AFTER_S` into the block until it ends or the command prints
    (`console`, `compile_done`); stdout is left alone. Yields whether the cache was cold."""
    cold = not cache_is_warm(command)
    err = out or Console(stderr=True)
    notice = None
    if cold and err.is_terminal:
        seconds = first_call_s(command)
        about = f", about {seconds:.0f} s" if seconds else ""
        notice = _Notice(err, f"compiling the models (first run only{about})...")
        _NOTICES.append(notice)
        notice.timer.start()
    try:
        yield cold
    finally:
        if notice is not None:
            compile_done()
    _remember(command)


def compile_done() -> None:
    """Stop the compile notice's spinner, if one is shown or due (before a command prints its results)."""
    while _NOTICES:
        _NOTICES.pop().stop()


def compiles(command: str):
    """Decorator: the whole of a CLI command under `compiling`."""
    def wrap(function):
        @functools.wraps(function)
        def run(*args, **kwargs):
            with compiling(command):
                return function(*args, **kwargs)
        return run
    return wrap


def _remember(command: str) -> None:
    marker = _marker(command)
    with contextlib.suppress(OSError):
        if not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(f"{os.getpid()}\n")


def fit(line: str, hang: int, width: int = 80) -> list[str]:
    """``line`` broken at spaces into lines of at most ``width`` columns, the continuations indented by
    ``hang`` (the column where a key-value line's value starts)."""
    return textwrap.wrap(line, width, subsequent_indent=" " * hang, break_long_words=False,
                         break_on_hyphens=False) or [line]

