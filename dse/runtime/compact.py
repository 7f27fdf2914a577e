"""The search's timelines as arrays (dse.runtime.search: totals only, no window records): a design's
segments as arrays over its distinct keys, and the totals summed from them in one compiled pass, with the
same operations in the same order as dse.runtime.timeline.summarise (the same floats, bit for bit).

A policy that never acts (`static`) serves the design's own mapping throughout, so its segments (edges,
offered load, what is down, popularity) are those of its package shape's outages (`Planner.outages`) for
every design of that shape: they are built once per shape (`static_template`), and per design only the
distinct keys' mappings are derived (`Planner.effective`: ~12 per design in an hour of drift and one
failure), not 60 windows of segments. A policy with nothing to do while every chiplet is up
(`on-failure`) takes the same segments until a window starts with a chiplet down, and runs the policy
loop from there (`joined_plan`)."""
from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from .mapping import SegmentMapping


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
    and what is down there (to derive its mapping)."""

    window: np.ndarray
    length_s: np.ndarray
    offered_tps: np.ndarray
    key: np.ndarray
    tails: list
    at: list


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
                        list(tails), at)
    planner.shared[key] = (shape, template)         # the shape kept alive: its id stays its own
    return planner.shared[key]


def static_plan(planner, design) -> CompactPlan:
    """``design``'s plan under a policy that never acts (its `Planner.base` set): the template of its
    shape and each key tail's mapping (version 0: the design's own)."""
    _, t = static_template(planner, design)
    keys = [(0, *tail) for tail in t.tails]
    mappings, selected = own_mappings(planner, t, range(len(keys)))
    n = len(planner.scenario.starts())
    return CompactPlan(keys, mappings, np.array(selected), t.window, t.length_s, t.length_s, t.offered_tps, t.key,
                       [0.0] * n, [0.0] * n)


def own_mappings(planner, t: Template, tails) -> tuple[list, list]:
    """The `SegmentMapping` of the design's own mapping (version 0) and the share of selections it
    serves, for the key tails ``tails`` of template ``t``: where nothing failed, a relabelling (all at
    once, `relabelled_all`), else `Planner.effective` (the evaluator's re-mapping)."""
    mappings, selected = [], []
    up = [j for j in tails if not t.tails[j][1]]
    slots, ncopy = relabelled_all(planner, [planner.perms[t.at[j][0]] for j in up])
    row = {j: k for k, j in enumerate(up)}
    for j in tails:
        w, now = t.at[j]
        if j in row:
            stacks = planner.base.stacks[0].copy()
            for c, lost in now.stacks:
                stacks[c] -= lost
            mappings.append(SegmentMapping(slots[row[j]], ncopy[row[j]], stacks, now.links))
            selected.append(1.0)
        else:
            eff, sel = planner.effective(0, planner.home, t.tails[j][1], w, now)
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


def quiet_windows(planner, design) -> int:
    """The windows before the first that starts with a chiplet down: a policy with nothing to do while
    all is up (`on-failure`: ``quiet``) serves the design's own mapping through them, as `static` does."""
    for w, (_, _, now, _) in enumerate(planner.outages(design).frames):
        if planner.chips_down(now, design):
            return w
    return len(planner.outages(design).frames)


def joined_plan(planner, design, start: int, rest: list) -> CompactPlan:
    """The windows before ``start`` from the shape's template (as `static_plan`), then the `WindowPlan`
    records ``rest`` of the windows from ``start`` on, as one `CompactPlan`."""
    _, t = static_template(planner, design)
    n = int(np.searchsorted(t.window, start))
    used = np.unique(t.key[:n])
    keys = {(0, *t.tails[j]): k for k, j in enumerate(used)}
    mappings, selected = own_mappings(planner, t, used.tolist())
    local = np.zeros(len(t.tails), np.int64)
    local[used] = np.arange(len(used))
    back = compact_of(rest)
    for key, m, sel in zip(back.keys, back.mappings, back.selected):
        if key not in keys:
            keys[key] = len(keys)
            mappings.append(m)
            selected.append(sel)
    index = np.array([keys[k] for k in back.keys], np.int64)
    return CompactPlan(list(keys), mappings, np.array(selected, float), np.concatenate([t.window[:n], back.window]),
                       np.concatenate([t.length_s[:n], back.length_s]), np.concatenate([t.length_s[:n], back.serve_s]),
                       np.concatenate([t.offered_tps[:n], back.offered_tps]),
                       np.concatenate([local[t.key[:n]], index[back.key]]), [0.0] * start + back.move_bytes,
                       [0.0] * start + back.move_energy_j)


def compact_of(plan: list) -> CompactPlan:
    """A plan of `WindowPlan` records as a `CompactPlan` (keys in order of first use)."""
    keys: dict = {}
    mappings, selected, window, length, serve, offered, index = [], [], [], [], [], [], []
    for win in plan:
        for seg in win.segments:
            if seg.key not in keys:
                keys[seg.key] = len(keys)
                mappings.append(seg.mapping)
                selected.append(seg.selected)
            window.append(seg.window)
            length.append(seg.length_s)
            serve.append(seg.serve_s)
            offered.append(np.nan if seg.offered_tps is None else seg.offered_tps)
            index.append(keys[seg.key])
    return CompactPlan(list(keys), mappings, np.array(selected, float), np.array(window, np.int64),
                       np.array(length, float), np.array(serve, float), np.array(offered, float),
                       np.array(index, np.int64), [w.move.bytes for w in plan], [w.move.energy_j for w in plan])


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
