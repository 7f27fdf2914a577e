"""A design's timeline before it is costed, as columns (docs/runtime.md, "The runtime as a pipeline"): the
planner (dse.runtime.plan) cuts the horizon into segments at its events (a window's start, where the
policy acts; a failure; a repair; a move landing) and appends them here; `SegmentTable` is the result:

* per segment: its window, length, serving time (its length less migration stalls), offered tokens/s
  (NaN: saturating), the index of its key (what its step depends on) and of what is down in it;
* per distinct key (dse.runtime.mapping.SegmentKey): the mapping it serves (`SegmentMapping`, None when
  nothing survives) and the share of expert selections it serves: the table of distinct mappings that
  one costing call prices (dse.runtime.costing);
* per window: its start and length, the policy's move (dse.runtime.move_price.MoveCost; its bytes and
  joules also as columns) and the imbalance the last segment shows (NaN where not asked for).

The reducer (dse.runtime.totals) sums windows and totals from the table and the keys' step figures."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .failures import Down
from .mapping import SegmentKey
from .move_price import MoveCost


class SegmentTable(NamedTuple):
    """One design's timeline as columns (module docstring)."""

    keys: list
    mappings: list
    selected: np.ndarray
    window: np.ndarray
    length_s: np.ndarray
    serve_s: np.ndarray
    offered_tps: np.ndarray
    key: np.ndarray
    down: np.ndarray
    downs: list
    t_s: np.ndarray
    window_s: np.ndarray
    moves: list
    move_bytes: np.ndarray
    move_energy_j: np.ndarray
    imbalance: np.ndarray

    @property
    def mapped(self) -> np.ndarray:
        """Per key: whether anything survives to serve."""
        return np.array([m is not None for m in self.mappings], bool)


class Rows(NamedTuple):
    """A run of segments as columns (`SegmentTable`'s per-segment fields)."""

    window: np.ndarray
    length_s: np.ndarray
    serve_s: np.ndarray
    offered_tps: np.ndarray
    key: np.ndarray
    down: np.ndarray


Rows.TYPES = (np.int64, float, float, float, np.int64, np.int64)


class Template(NamedTuple):
    """A package shape's segments with the design's own mapping serving and no move in flight (a policy
    that never acts: dse.runtime.shape.static_template): per segment its window, length, offered load,
    key tail's index and what is down (index into ``downs``); per key tail (popularity, failed, links,
    stacks) a window and what is down there (to derive its mapping); per window the chiplets down at
    its start."""

    window: np.ndarray
    length_s: np.ndarray
    offered_tps: np.ndarray
    key: np.ndarray
    down: np.ndarray
    downs: list
    tails: list
    at: list
    start_down: list


class SegmentBuilder:
    """A `SegmentTable` appended event by event (`segment`, `window`) or, for windows at rest, by runs of
    a `Template`'s rows (`rest`); keys in order of first use. Mappings of keys added without one (the
    design's own, at rest) are filled in by the planner before `build` (`pending`)."""

    def __init__(self, starts: list[float], lengths: list[float]):
        self.keys: dict = {}
        self.downs: dict = {}
        self.mappings, self.selected, self.pending = [], [], []
        self.parts: list[tuple] = []
        self.rows: list[tuple] = []             # segments of the policy loop not yet in a part
        self.t_s, self.window_s = np.asarray(starts, float), np.asarray(lengths, float)
        self.moves: list = [None] * len(starts)
        self.move_bytes, self.move_energy_j = np.zeros(len(starts)), np.zeros(len(starts))
        self.imbalance = np.full(len(starts), np.nan)

    def key(self, key, mapping=None, selected: float | None = None, at=None) -> int:
        """The index of ``key``, added with its mapping and share served (or ``at``: (key tail, window,
        what is down), its mapping to derive) on first use."""
        if key not in self.keys:
            self.keys[key] = len(self.keys)
            self.mappings.append(mapping)
            self.selected.append(selected)
            if at is not None:
                self.pending.append((self.keys[key], at))
        return self.keys[key]

    def index(self, key) -> int | None:
        """The index of ``key`` when added (else None)."""
        return self.keys.get(key)

    def down(self, down: Down) -> int:
        if down not in self.downs:
            self.downs[down] = len(self.downs)
        return self.downs[down]

    def segment(self, w: int, length: float, serve: float, offered: float | None, key: int, down: Down) -> None:
        """A segment of window ``w`` cut by the policy loop."""
        self.rows.append((w, length, serve, np.nan if offered is None else offered, key, self.down(down)))

    def window(self, w: int, move: MoveCost, imbalance: float = np.nan) -> None:
        self.moves[w] = move
        self.move_bytes[w], self.move_energy_j[w] = move.bytes, move.energy_j
        self.imbalance[w] = imbalance

    def flush(self) -> None:
        if self.rows:
            cols = list(zip(*self.rows))
            self.parts.append(Rows(*(np.array(c, t) for c, t in zip(cols, Rows.TYPES))))
            self.rows = []

    def rest(self, t: Template, a: int, b: int, spared: frozenset, windows: range, move: MoveCost) -> None:
        """Template rows ``a:b`` (the ``windows`` at rest), the chiplets ``spared`` up (a spare stands in)."""
        self.flush()
        local = np.zeros(len(t.tails), np.int64)
        for j in sorted(set(t.key[a:b].tolist())):         # as np.unique's, without its steps
            tail = t.tails[j]                       # (popularity, failed, links, stacks)
            tail = (tail[0], tail[1] - spared, *tail[2:])
            local[j] = self.key(SegmentKey(0, *tail), at=(tail, *t.at[j]))
        downs = np.array([self.down(d) for d in t.downs], np.int64)
        self.parts.append(Rows(t.window[a:b], t.length_s[a:b], t.length_s[a:b], t.offered_tps[a:b], local[t.key[a:b]],
                               downs[t.down[a:b]] if len(downs) else t.down[a:b]))
        self.moves[windows.start: windows.stop] = [move] * len(windows)
        self.move_bytes[windows.start: windows.stop] = move.bytes
        self.move_energy_j[windows.start: windows.stop] = move.energy_j

    def build(self) -> SegmentTable:
        self.flush()
        cols = [np.concatenate(x) for x in zip(*self.parts)] if self.parts else [np.zeros(0, t) for t in Rows.TYPES]
        return SegmentTable(list(self.keys), self.mappings, np.array(self.selected, float), *cols, list(self.downs),
                            self.t_s, self.window_s, self.moves, self.move_bytes, self.move_energy_j, self.imbalance)
