"""Design files written compactly: the placement by role and layer, YAML by libyaml's C emitter.

A design's ``placement`` maps each unit to the slots holding it (``L3.e12: [6]``). A per-layer study has
tens of thousands of units, so a design file may also use two patterns in its keys, expanded in the
order written (a later entry overrides an earlier one: a role's common placement, then layers and
units that deviate from it):

* ``{a..b}`` stands for every layer a to b: ``L{0..60}.attn: [0]`` is ``L0.attn: [0]`` ... ``L60.attn: [0]``;
* ``#`` makes the value a row, entry i for index i: ``L{3..60}.e#: "6 25 17+4 - 9 ..."`` puts expert i of
  layers 3 to 60 on the slots of entry i: a slot, copies joined by ``+``, or ``-`` for none set here (a
  YAML list, ``[6, 25, [17, 4], null, 9]``, reads the same).

``L{3..60}.e#: ...`` then ``L7.e#: ...`` then ``L9.e12: [3]`` is expert i's slot in every layer, layer 7's
own row and one expert moved: the expert-role encoding with per-layer deviations. Files without
patterns (every file written before them) read exactly as before. `compact_placement` chooses the form
that writes fewest characters for each role; `expand_placement(compact_placement(p)) == p`. A row is one
YAML string, so a 15,000-unit file reads in milliseconds (a YAML list builds a Python node per entry).

YAML goes through libyaml's C emitter and loader where PyYAML was built with it (``yaml.CSafeDumper``),
else the pure-Python ones: a 15,000-unit design takes milliseconds instead of seconds.
"""
from __future__ import annotations

import json
import re
from itertools import chain
from functools import lru_cache
from typing import Any

import numpy as np
import yaml

from ..errors import StudyError

#: units a design file's patterns may expand to (a per-layer DeepSeek-V3 has 14,972)
MAX_EXPANDED_UNITS = 1_000_000
#: characters per line of a written design file (rows wrap after it)
WIDTH = 100

_BRACE = re.compile(r"\{(\d+)\.\.(\d+)\}")
_LAYERED = re.compile(r"^(.*?)L(0|[1-9]\d*)\.(.+)$")          # [member/]L<layer>.<role>
_INDEXED = re.compile(r"^(.*?)L(0|[1-9]\d*)\.(.*\D)(0|[1-9]\d*)$")  # ... .<stem><index>, no leading zeros
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_./{}#+-]*$")
_YAML_WORDS = {"y", "n", "yes", "no", "true", "false", "on", "off", "null"}
_SafeDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Row(list):
    """A list written in flow style (``[6, 25, [17, 4]]``) whatever it holds. ``text``: a placement row's
    entries as the design file writes them (`_flow`), when `_Slots.row` made it from its slots' codes."""

    text: str | None = None


class _RowText(str):
    """A ``#`` row as its text alone (`_Slots.row_text`): what `design_text` writes of a row."""


class Dumper(_SafeDumper):
    """PyYAML's safe dumper (libyaml's C emitter when present) writing `_Row` lists on one flow line."""


Dumper.add_representer(_Row, lambda dumper, value: dumper.represent_sequence("tag:yaml.org,2002:seq", value,
                                                                             flow_style=True))


def dump_yaml(data: Any) -> str:
    """``data`` as YAML: keys in their order, leaf lists in flow style, libyaml's emitter where present."""
    return yaml.dump(data, Dumper=Dumper, sort_keys=False, default_flow_style=None, width=WIDTH,
                     allow_unicode=True)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _slots(value: Any, key: str, source: str | None) -> list[int]:
    slots = value if isinstance(value, list) else [value]
    if not all(_is_int(s) for s in slots):
        raise StudyError(f"slots are whole numbers, got {slots!r}"[:200], key=f"placement.{key}", source=source)
    return list(slots)


def _names(key: str, source: str | None) -> list[str]:
    """The keys a ``{a..b}`` pattern stands for (the key itself when it has none)."""
    braces = _BRACE.findall(key)
    if not braces:
        return [key]
    if len(braces) > 1:
        raise StudyError("one {a..b} layer range per key", key=f"placement.{key[:60]}", source=source)
    low, high = int(braces[0][0]), int(braces[0][1])
    if high < low or high - low >= MAX_EXPANDED_UNITS:
        raise StudyError(f"layer range {{{low}..{high}}} must run upwards and span fewer than "
                         f"{MAX_EXPANDED_UNITS:,} layers", key=f"placement.{key[:60]}", source=source)
    match = _BRACE.search(key)
    return [key[:match.start()] + str(layer) + key[match.end():] for layer in range(low, high + 1)]


def _row_entries(key: str, value: Any, source: str | None) -> list[list[int] | None]:
    """The entries of a ``#`` row: a string of slots (``"6 25 17+4 -"``) or a list (``[6, 25, [17, 4], null]``)."""
    if key.count("#") > 1 or not isinstance(value, (str, list, int)) or isinstance(value, bool):
        raise StudyError("a row key holds one '#' (the index) and maps to its entries, entry i for index i "
                         f"(\"6 25 17+4 -\"), got {value!r}"[:200], key=f"placement.{key[:60]}", source=source)
    if isinstance(value, list):
        return [None if s is None else _slots(s, key, source) for s in value]
    out = []
    for token in str(value).split():
        if token.isascii() and token.isdigit():
            out.append([int(token)])
        elif token == "-":
            out.append(None)
        elif all(part.isdigit() and part.isascii() for part in token.split("+")):
            out.append([int(part) for part in token.split("+")])
        else:
            raise StudyError(f"row entries are slots, copies joined by '+', or '-', got {token[:40]!r}",
                             key=f"placement.{key[:60]}", source=source)
    return out


def expand_placement(value: Any, source: str | None = None) -> dict[str, list[int]]:
    """A design file's ``placement`` (module docstring: plain unit names, ``{a..b}`` layer ranges and ``#``
    rows, later entries overriding earlier ones) as {unit: slots}; every problem a `StudyError` naming the
    key."""
    if not isinstance(value, dict):
        raise StudyError(f"must map each unit to its slot or list of slots ({{embed: [0], ...}}), got {value!r}"[:200],
                         key="placement", source=source)
    out: dict[str, list[int]] = {}
    for key, slots in value.items():
        key = str(key)
        names = _names(key, source)
        if "#" not in key:
            where = _slots(slots, key, source)
            for name in names:
                out[name] = list(where)
        else:
            row = _row_entries(key, slots, source)
            for name in names:
                head, tail = name.split("#")
                out.update((f"{head}{i}{tail}", list(where)) for i, where in enumerate(row) if where is not None)
        if len(out) > MAX_EXPANDED_UNITS:
            raise StudyError(f"expands to more than {MAX_EXPANDED_UNITS:,} units", key=f"placement.{key[:60]}",
                             source=source)
    return out


@lru_cache(maxsize=1 << 17)            # the designs of a study share their unit names
def _split(name: str):
    """(group, layer, index) of a per-layer unit name: ``L3.e12`` -> (("", "e", True), 3, 12),
    ``L3.attn`` -> (("", "attn", False), 3, None); None for any other name (``embed``, ``L0-31.e3``)."""
    if "#" in name or "{" in name:
        return None
    m = _INDEXED.match(name)
    if m is not None:
        return (m.group(1), m.group(3), True), int(m.group(2)), int(m.group(4))
    m = _LAYERED.match(name)
    if m is None:
        return None
    return (m.group(1), m.group(3), False), int(m.group(2)), None


def _layers_key(group, layers: list[int]) -> str:
    prefix, role, indexed = group
    span = str(layers[0]) if len(layers) == 1 else f"{{{layers[0]}..{layers[-1]}}}"
    return f"{prefix}L{span}.{role}{'#' if indexed else ''}"


@lru_cache(maxsize=4)                  # the designs of a study share their unit names, in one order
def _layout(names: tuple[str, ...]) -> list:
    """What the compact form of a placement with unit names ``names`` (in that order) is made of, from the
    names alone: per item, a name that is not a per-layer unit with its position, or a per-layer role's runs
    (consecutive layers holding the same units of the role: each run can share one ``{a..b}`` key), each
    run as (group, layers, sorted indices, positions of its units: one row per layer, one column per index)."""
    groups: dict[tuple, dict[int, dict]] = {}
    order: list = []
    for position, name in enumerate(names):
        parts = _split(name)
        if parts is None:
            order.append((name, position))
            continue
        group, layer, index = parts
        if group not in groups:
            groups[group] = {}
            order.append(group)
        groups[group].setdefault(layer, {})[index] = position
    out: list = []
    for item in order:
        if len(item) == 2:                          # (name, position)
            out.append(item)
            continue
        rows = groups[item]
        runs: list[list[int]] = []
        for layer in sorted(rows):
            if runs and runs[-1][-1] == layer - 1 and rows[runs[-1][-1]].keys() == rows[layer].keys():
                runs[-1].append(layer)
            else:
                runs.append([layer])
        for run in runs:
            indices = sorted(rows[run[0]])
            positions = np.array([[rows[layer][i] for i in indices] for layer in run], np.int64)
            out.append((item, run, indices, positions))
    return out


def _common(codes: np.ndarray) -> np.ndarray:
    """Per column of ``codes`` (layers x indices; codes are `_Slots.codes`, unit positions, so at most as
    many as units) its most frequent code, the one first met on a tie (as `collections.Counter.most_common`
    counts). Counted on tables indexed by code, without sorting: a code's count and first row in a column
    give it one score, distinct for distinct codes of a column."""
    if len(codes) == 1:
        return codes[0]
    n_rows, n_cols = codes.shape
    present = np.zeros(int(codes.max()) + 1, bool)
    present[codes.ravel()] = True
    values = np.flatnonzero(present)                 # the distinct codes, ascending (as np.unique gives them)
    k = len(values)
    inverse = (np.cumsum(present) - 1)[codes]
    keys = (np.arange(n_cols)[None, :] * k + inverse).ravel()
    counts = np.bincount(keys, minlength=n_cols * k)
    first = np.full(n_cols * k, n_rows, np.int64)    # row-major: the last write, reversed, is the earliest layer
    first[keys[::-1]] = np.arange(len(keys) - 1, -1, -1) // n_cols
    score = (counts * (n_rows + 1) - first).reshape(n_cols, k)
    return values[score.argmax(axis=1)]


#: the most distinct codes per unit `_Slots` looks up in a table indexed by code (past it: NumPy's sort)
_TABLE_PER_UNIT = 4


class _Slots:
    """A placement's slots coded: ``codes[k]`` the code of the k-th unit's slots, the position of the first unit
    holding the same slots; ``slots[c]`` those slots, ``entry[c]`` a row's entry for them, ``multi[c]``
    whether that entry is a list (copies, or none). Where the slots read as few integers (at most
    `_TABLE_PER_UNIT` per unit: a package's slots, one or two copies) a table indexed by them finds each
    one's first unit; else NumPy's ``unique``."""

    def __init__(self, values: list):
        self.slots = values
        n = len(values)
        counts = np.fromiter(map(len, values), np.int64, n)
        flat = np.fromiter(chain.from_iterable(values), np.int64, int(counts.sum()))
        width = int(counts.max(initial=0))
        held = np.zeros((n, width), np.int64)            # a unit's slots + 1, then 0 past its copies
        copy = np.arange(len(flat)) - np.repeat(np.cumsum(counts) - counts, counts)     # copy k of its unit
        held[np.repeat(np.arange(n), counts), copy] = flat + 1
        base = int(held.max(initial=0)) + 1
        if width * np.log2(base) < 62 and base ** width <= _TABLE_PER_UNIT * n + 1024:
            code = held @ base ** np.arange(width - 1, -1, -1, dtype=np.int64)    # its slots in base `base`
            table = np.full(base ** width, n, np.int64)     # the first unit of each code (the last write, reversed)
            table[code[::-1]] = np.arange(n - 1, -1, -1)
            self.codes = table[code]
            first = table[table < n]
        else:
            if width * np.log2(base) < 62:
                _, first, inverse = np.unique(held @ base ** np.arange(width - 1, -1, -1, dtype=np.int64),
                                              return_index=True, return_inverse=True)
            else:
                _, first, inverse = np.unique(held, axis=0, return_index=True, return_inverse=True)
            self.codes = first[inverse.ravel()]         # return_index: each distinct row's first unit
        self.multi = np.zeros(n, bool)
        self.multi[first[counts[first] != 1]] = True
        self.entry = np.empty(n, object)        # a code's entry: its slot, or its list of slots (copied by `row`)
        self.text = np.empty(n, object)         # a code's entry as a row writes it (`_entry_text`)
        for c in first.tolist():
            self.entry[c] = values[c] if self.multi[c] else values[c][0]
            self.text[c] = _entry_text(self.entry[c])

    def row(self, codes: np.ndarray, indices: list[int]) -> _Row:
        """A ``#`` row: entry i the slots of index i (``null`` where the role has no unit of that index)."""
        entries = self.entry[codes].tolist()
        for j in np.flatnonzero(self.multi[codes]).tolist():
            entries[j] = list(entries[j])
        texts = self.text[codes].tolist()
        if indices[-1] + 1 == len(indices):
            row = _Row(entries)
        else:
            row = _Row([None] * (indices[-1] + 1))
            full = ["-"] * len(row)
            for i, entry, text in zip(indices, entries, texts):
                row[i] = entry
                full[i] = text
            texts = full
        row.text = " ".join(texts)
        return row

    def row_text(self, codes: np.ndarray, indices: list[int]) -> _RowText:
        """The text of `row` alone (what a design file writes), without its entries."""
        texts = self.text[codes].tolist()
        if indices[-1] + 1 != len(indices):
            full = ["-"] * (indices[-1] + 1)
            for i, text in zip(indices, texts):
                full[i] = text
            texts = full
        return _RowText(" ".join(texts))


def _compact_run(group, run: list[int], indices: list, codes: np.ndarray, slots: _Slots,
                 texts: bool = False) -> dict[str, Any]:
    """One run of layers of a role (``codes``: the slots' code of each layer's units, layers x indices): its
    most common placement over the run (when that writes less), then layers that deviate in many units
    whole, else their deviating units by name; consecutive layers written whole with the same placement
    share one ``{a..b}`` key. ``texts``: rows as their text alone (`_Slots.row_text`)."""
    prefix, role, indexed = group
    row = slots.row_text if texts else slots.row

    def whole(codes_of):
        return row(codes_of, indices) if indexed else list(slots.slots[int(codes_of[0])])
    common = _common(codes)
    deviating = codes != common[None, :]
    counts = deviating.sum(axis=1).tolist()
    row_chars = 4 * len(indices) + 16
    shared = row_chars + sum(min(row_chars, 16 * n) for n in counts)
    out: dict[str, Any] = {}
    own = list(range(len(run)))                     # layers written whole (positions in the run)
    if len(run) > 1 and shared < row_chars * len(run):
        out[_layers_key(group, run)] = whole(common)
        own = [r for r, n in enumerate(counts) if n and (not indexed or 16 * n > row_chars)]
        if indexed:
            kept = set(own)
            for r, layer in enumerate(run):
                if r not in kept:
                    out.update({f"{prefix}L{layer}.{role}{indices[j]}": list(slots.slots[codes[r, j]])
                                for j in np.flatnonzero(deviating[r]).tolist()})
    spans: list[list[int]] = []
    same = [False] + (codes[1:] == codes[:-1]).all(axis=1).tolist()      # a layer placed as the one before
    for r in own:
        if spans and spans[-1][-1] == r - 1 and same[r]:
            spans[-1].append(r)
        else:
            spans.append([r])
    out.update((_layers_key(group, [run[r] for r in span]), whole(codes[span[0]])) for span in spans)
    return out


def compact_placement(placement: dict[str, list[int]], texts: bool = False) -> dict[str, Any]:
    """``placement`` in the design file's compact form (module docstring): names that are not per-layer
    units as they are, each per-layer role at the place of its first unit, by layer runs and rows. The
    work per unit is a code for its slots; a role's common placement and deviations are array operations.
    ``texts``: each row as its text alone (`_RowText`, what `placement_yaml` writes), not its entries."""
    values = list(placement.values())
    slots = _Slots(values)
    out: dict[str, Any] = {}
    for item in _layout(tuple(placement)):
        if len(item) == 2:
            out[item[0]] = list(values[item[1]])
        else:
            out.update(_compact_run(item[0], item[1], item[2], slots.codes[item[3]], slots, texts))
    return out


def _key(key: str) -> str:
    """A mapping key as YAML: plain where it reads back as the same text, else double-quoted (JSON's
    string syntax is YAML's)."""
    return key if _PLAIN_KEY.match(key) and key.lower() not in _YAML_WORDS else json.dumps(key)


def _entry_text(entry) -> str:
    """A row's entry as written: ``-`` for none, copies joined by ``+``, else the slot."""
    return "-" if entry is None else "+".join(map(str, entry)) if isinstance(entry, list) else str(entry)


def _flow(value) -> str:
    """A placement value: a row as one quoted string (``"6 25 17+4 -"``), slots as a flow list (``[6, 9]``).
    A row `_Slots.row` made carries that text already (one string per distinct placement, joined)."""
    if isinstance(value, _RowText):
        return f'"{value}"'
    if isinstance(value, _Row):
        if value.text is not None:
            return f'"{value.text}"'
        return '"' + " ".join(map(_entry_text, value)) + '"'
    return "[" + ", ".join(map(str, value)) + "]"


def placement_yaml(compact: dict[str, Any]) -> str:
    """The ``placement:`` block of a design file from its compact form, written directly (whole numbers,
    lists and rows of them need no emitter), long rows wrapped at `WIDTH` characters with a deeper indent
    (a quoted YAML string folds a line break into one space)."""
    lines = ["placement:"]
    for key, value in compact.items():
        head = f"  {_key(key)}: "
        line, floor = head + _flow(value), len(head)
        while len(line) > WIDTH:
            cut = line.rfind(" ", floor, WIDTH)
            if cut < 0:
                break
            lines.append(line[:cut])
            line, floor = "    " + line[cut + 1:], 4
        lines.append(line)
    return "\n".join(lines) + "\n"


def design_text(design) -> str:
    """A `Design` (dse.study.space) as the YAML of its design file, placement in the compact form: the
    fields of `Design.to_dict` in its order, the placement written from the design's own mapping (not copied)."""
    data = dict(rows=design.rows, cols=design.cols, chiplets=_Row(design.chiplets), hbm_stacks=_Row(design.hbm_stacks),
                ddr_channels=design.ddr_channels, link=design.link, mapping=design.mapping, **design.package_choices())
    if design.system:
        data["system"] = dict(design.system)
    return dump_yaml(data) + placement_yaml(compact_placement(design.placement, texts=True))
