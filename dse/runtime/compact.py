"""The search's timelines as arrays (dse.runtime.search: totals only, no window records): a design's
segments as arrays over its distinct keys, and the totals summed from them in one compiled pass, with the
same operations in the same order as dse.runtime.timeline.summarise (the same floats, bit for bit).

A policy that never acts (`static`) serves the design's own mapping throughout, so its segments (edges,
offered load, what is down, popularity) are those of its package shape's outages (`Planner.outages`) for
every design of that shape: they are built once per shape (`static_template`), and per design only the
distinct keys' mappings are derived (`Planner.effective`: ~12 per design in an hour of drift and one
failure), not 60 windows of segments. A policy with nothing to do while every chiplet is up
(`on-failure`) takes the same segments in every window that starts at rest (the design's own mapping
serving, no move in flight, every chiplet down stood in for by a spare: those chiplets count as up), and
runs the policy loop only in the others (`rest_plan`)."""
from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from .mapping import SegmentKey, SegmentMapping


class CompactPlan(NamedTuple):
    """One design's plan as arrays: per distinct key (``keys``) its `SegmentMapping` (None: nothing
    survives) and share of selections served; per segment its window, length, serving time, offered
    tokens/s (NaN: saturating) and key index; per window the moves' bytes and energy."""

    keys: list
    mappings: list
    selected: np.ndarray
    window: np.ndarray
    length_s: np.ndarray
    serve_s: np.ndarray
    offered_tps: np.ndarray
    key: np.ndarray
    move_bytes: list
    move_energy_j: list


class Template(NamedTuple):
    """A package shape's segments under a policy that never acts: per segment its window, length and
    offered load, and its key tail's index; per key tail (popularity, failed, links, stacks) a window
    and what is down there (to derive its mapping); per window the chiplets down at its start
    (`Planner.chips_down`)."""

    window: np.ndarray
    length_s: np.ndarray
    offered_tps: np.ndarray
    key: np.ndarray
    tails: list
    at: list
    start_down: list


def static_template(planner, design) -> tuple:
    """The segments of ``design``'s package shape under a policy that never acts (module docstring):
    what `Planner.plan` cuts with no move in flight, keyed by what else a segment's key holds; returned
    with the outages it was cut from (kept alive with it: the template is found by their identity)."""
    shape = planner.outages(design)
    key = ("static", id(shape), bool(design.ddr_channels))     # chips_down reads the DDR channels only
    if key in planner.shared:
        return planner.shared[key]
    window, length, offered, index, tails, at = [], [], [], [], {}, []
    for w, (_, _, _, pieces) in enumerate(shape.frames):
        for a, b, now, off in pieces:
            failed = planner.chips_down(now, design)
            tail = (planner.perm_keys[w], failed, now.links, now.stacks)
            if tail not in tails:
                tails[tail] = len(tails)
                at.append((w, now))
            window.append(w)
            length.append(b - a)
            offered.append(np.nan if off is None else off)
            index.append(tails[tail])
    template = Template(np.array(window, np.int64), np.array(length), np.array(offered), np.array(index, np.int64),
                        list(tails), at, [planner.chips_down(frame[2], design) for frame in shape.frames])
    planner.shared[key] = (shape, template)         # the shape kept alive: its id stays its own
    return planner.shared[key]


def static_plan(planner, design) -> CompactPlan:
    """``design``'s plan under a policy that never acts (its `Planner.base` set): the template of its
    shape and each key tail's mapping (version 0: the design's own)."""
    _, t = static_template(planner, design)
    keys = [SegmentKey(0, *tail) for tail in t.tails]
    mappings, selected = own_mappings(planner, [(tail, *t.at[j]) for j, tail in enumerate(t.tails)])
    n = len(planner.scenario.starts())
    return CompactPlan(keys, mappings, np.array(selected), t.window, t.length_s, t.length_s, t.offered_tps, t.key,
                       [0.0] * n, [0.0] * n)


def own_mappings(planner, items: list) -> tuple[list, list]:
    """The `SegmentMapping` of the design's own mapping (version 0) and the share of selections it
    serves, for each (key tail, window, what is down) of ``items``: where nothing failed, a relabelling
    (all at once, `relabelled_all`), else `Planner.effective` (the evaluator's re-mapping)."""
    mappings, selected = [], []
    up = [k for k, (tail, _, _) in enumerate(items) if not tail[1]]
    slots, ncopy = relabelled_all(planner, [planner.perms[items[k][1]] for k in up])
    row = {k: r for r, k in enumerate(up)}
    for k, (tail, w, now) in enumerate(items):
        if k in row:
            stacks = planner.base.stacks[0].copy()
            for c, lost in now.stacks:
                stacks[c] -= lost
            mappings.append(SegmentMapping(slots[row[k]], ncopy[row[k]], stacks, now.links))
            selected.append(1.0)
        else:
            eff, sel = planner.effective(0, planner.home, tail[1], w, now)
            mappings.append(eff)
            selected.append(sel)
    return mappings, selected


def relabelled_all(planner, perms: list) -> tuple[np.ndarray, np.ndarray]:
    """The design's own mapping (`Planner.home`) relabelled to each popularity of ``perms`` at once
    (dse.runtime.mapping.Relabel, row k for ``perms[k]``): slots ``[K, U, C]``, copies ``[K, U]``."""
    home, relabel = planner.home, planner.relabel
    slots = np.repeat(home.slots[None], len(perms), axis=0)
    ncopy = np.repeat(home.ncopy[None], len(perms), axis=0)
    if perms:
        dst = np.stack([relabel.dst(p) for p in perms])
        row = np.arange(len(perms))[:, None]
        slots[row, dst] = home.slots[relabel.src][None]
        ncopy[row, dst] = home.ncopy[relabel.src][None]
    return slots, ncopy


def rest_plan(planner, design, windows: list) -> CompactPlan:
    """A quiet policy's plan (module docstring) from ``windows``, one item each: a window at rest (a
    frozenset: the chiplets spares stand in for, `Planner.at_rest`) takes its shape's template segments
    with those chiplets up; any other (a `WindowPlan` of the policy loop) its own segments and moves."""
    _, t = static_template(planner, design)
    bounds = np.searchsorted(t.window, np.arange(len(windows) + 1))
    out = PlanBuilder()
    w = 0
    while w < len(windows):
        end = w + 1
        if isinstance(windows[w], frozenset):       # a run of windows at rest with the same spares in
            while end < len(windows) and isinstance(windows[end], frozenset) and windows[end] == windows[w]:
                end += 1
            out.rest(t, bounds[w], bounds[end], windows[w], end - w)
        else:                                       # a run of the policy loop's windows
            while end < len(windows) and not isinstance(windows[end], frozenset):
                end += 1
            out.loop(windows[w:end])
        w = end
    return out.build(planner)


class Segments(NamedTuple):
    """A run of segments as arrays (`CompactPlan`'s per-segment fields)."""

    window: np.ndarray
    length_s: np.ndarray
    serve_s: np.ndarray
    offered_tps: np.ndarray
    key: np.ndarray


class PlanBuilder:
    """A `CompactPlan` assembled run by run of windows (`rest_plan`), keys in order of first use; the
    design's own mappings of the runs at rest derived at the end, at once (`own_mappings`)."""

    def __init__(self):
        self.keys: dict = {}
        self.mappings, self.selected, self.parts, self.move_b, self.move_e, self.todo = [], [], [], [], [], []

    def index(self, key, mapping=None, share=None) -> int:
        if key not in self.keys:
            self.keys[key] = len(self.keys)
            self.mappings.append(mapping)
            self.selected.append(share)
        return self.keys[key]

    def rest(self, t: Template, a: int, b: int, spared: frozenset, windows: int) -> None:
        """Template segments ``a:b`` (``windows`` windows at rest), the chiplets ``spared`` up."""
        local = np.zeros(len(t.tails), np.int64)
        for j in np.unique(t.key[a:b]).tolist():
            tail = t.tails[j]                       # (popularity, failed, links, stacks)
            tail = (tail[0], tail[1] - spared, *tail[2:])
            key = SegmentKey(0, *tail)
            fresh = key not in self.keys
            local[j] = self.index(key)
            if fresh:
                self.todo.append((local[j], (tail, *t.at[j])))
        self.parts.append(Segments(t.window[a:b], t.length_s[a:b], t.length_s[a:b], t.offered_tps[a:b],
                                   local[t.key[a:b]]))
        self.move_b += [0.0] * windows
        self.move_e += [0.0] * windows

    def loop(self, plans: list) -> None:
        """The segments and moves of the `WindowPlan` records ``plans``."""
        segs = [seg for win in plans for seg in win.segments]
        self.parts.append(Segments(np.array([s.window for s in segs], np.int64),
                                   np.array([s.length_s for s in segs], float), np.array([s.serve_s for s in segs], float),
                                   np.array([np.nan if s.offered_tps is None else s.offered_tps for s in segs], float),
                                   np.array([self.index(s.key, s.mapping, s.selected) for s in segs], np.int64)))
        self.move_b += [win.move.bytes for win in plans]
        self.move_e += [win.move.energy_j for win in plans]

    def build(self, planner) -> CompactPlan:
        own, share = own_mappings(planner, [item for _, item in self.todo])
        for (k, _), m, sel in zip(self.todo, own, share):
            self.mappings[k], self.selected[k] = m, sel
        seg = Segments._make(np.concatenate(x) for x in zip(*self.parts))
        return CompactPlan(list(self.keys), self.mappings, np.array(self.selected, float), seg.window, seg.length_s,
                           seg.serve_s, seg.offered_tps, seg.key, self.move_b, self.move_e)


class SegmentSums(NamedTuple):
    """`segment_sums`' result: per costed segment the tokens served, latency and p99 (s); the energy (J)
    and the tokens demanded over the horizon."""

    served: np.ndarray
    latency: np.ndarray
    p99: np.ndarray
    energy_j: float
    demand: float


@nb.njit(cache=True)
def segment_sums(window, length, serve, offered, key, mapped, selected, latency, p99, e_tok, tokens_per_step,
                 move_energy):
    """Per costed segment: tokens served, latency and p99; and the energy and demand over the horizon
    (dse.runtime.timeline.summarise's loop, its operations in its order): a `SegmentSums`' fields."""
    n = window.shape[0]
    served_all, lat_all, p99_all = np.empty(n), np.empty(n), np.empty(n)
    count = 0
    energy = demand_total = 0.0
    s = 0
    for w in range(move_energy.shape[0]):
        served = demand = 0.0
        while s < n and window[s] == w:
            k = key[s]
            off = offered[s]
            if not mapped[k]:
                demand += (0.0 if np.isnan(off) else off) * length[s]
            else:
                rate = tokens_per_step / latency[k]
                cap = rate * selected[k] * serve[s]
                if np.isnan(off):
                    x, d = cap, rate * length[s]
                else:
                    o = off * length[s]
                    x, d = (o if o < cap else cap), o
                served, demand = served + x, demand + d
                energy += x * e_tok[k]
                served_all[count], lat_all[count], p99_all[count] = x, latency[k], p99[k]
                count += 1
            s += 1
        demand_total += demand
        energy += move_energy[w]
    return served_all[:count], lat_all[:count], p99_all[:count], energy, demand_total
