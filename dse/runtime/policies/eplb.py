"""Load-balanced expert placement after DeepSeek's EPLB (github.com/deepseek-ai/EPLB, the algorithm as its
README describes it; no code taken): per MoE layer, *replicate* the hottest experts into the layer's copy
budget (each extra copy to the expert with the highest load per copy), then *pack* the copies onto the
chiplets by load (heaviest first onto the least loaded chiplet with room, a chiplet holding at most
ceil(copies / chiplets) of the layer and never two copies of one expert). Neighbours stay close: a layer's
copies stay on the live chiplets that already hold the layer (near its attention and its hand-offs).
Packed bins are then matched to those chiplets to keep as many copies where they are as possible
(an assignment problem, solved exactly by the shortest augmenting path method of Crouse, IEEE TAES
52(4), 2016, the method of scipy's linear_sum_assignment, with its tie-breaking), so a rebalance moves
only what it must.

Every layer of a placement is rebalanced at once on arrays (`rebalance_arrays`, one Numba call: issue
36's cost per design); `rebalance` is the same on a placement dictionary."""
from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from ..imbalance import layer_ratio
from ..mapping import ExpertGroups, Placement, placement_arrays
from ..popularity import Popularity
from .assignment import assign_into
from .packing import MASK_BITS, contains, pack, popcount, replicate


class Scratch(NamedTuple):
    """Work arrays of `rebalance_layer`, allocated once per `rebalance_arrays` call: over chiplets
    (``live``, ``where``, ``chips``, the bins' ``count`` / ``weight``, the assignment's vectors), over
    a layer's experts (``r``, ``order``, ``key``, ``n_new``) and matrices."""

    live: np.ndarray
    where: np.ndarray
    chips: np.ndarray
    r: np.ndarray
    order: np.ndarray
    key: np.ndarray
    content: np.ndarray             # [chiplets, copies of a layer]
    count: np.ndarray
    weight: np.ndarray
    held: np.ndarray                # [chiplets, experts of a layer]
    cost: np.ndarray                # [chiplets, chiplets]
    vec: np.ndarray                 # [3, chiplets]: the assignment's u, v, shortest path costs
    ivec: np.ndarray                # [4, chiplets]: its path, col4row, row4col, remaining
    bvec: np.ndarray                # [2, chiplets]: its rows and columns scanned (listed)
    new: np.ndarray                 # [experts of a layer, copies]
    n_new: np.ndarray
    mask: np.ndarray                # [2, chiplets]: the experts each bin and each chiplet holds, as bits


@nb.njit(cache=True)
def rebalance_layer(load, slots, ncopy, home, nhome, failed, max_copies, out, out_n, s, bound):
    """One layer (its experts' rows of the arrays of `rebalance_arrays`; ``s``: its `Scratch`); returns
    whether it is re-packed (otherwise ``out`` is left alone): not when it has no live chiplet, nor when
    its imbalance at ``load`` (`layer_ratio`) is within ``bound`` and no copy is on a failed chiplet."""
    m = len(load)
    if bound > 0.0 and layer_ratio(load, slots, ncopy, failed, s.vec[2]) <= bound:
        return False
    live = s.live
    live[:] = False
    for e in range(m):
        for k in range(ncopy[e]):
            live[slots[e, k]] = not failed[slots[e, k]]
        for k in range(nhome[e]):
            live[home[e, k]] = not failed[home[e, k]]
    bins = 0
    chips, where = s.chips, s.where
    for c in range(len(live)):
        where[c] = -1
        if live[c]:
            chips[bins], where[c] = c, bins
            bins += 1
    if bins == 0:
        return False
    copies = 0
    for e in range(m):
        copies += ncopy[e]
    replicate(load, copies, min(max_copies, bins), s.r)
    content, count = s.content, s.count
    pack(load, s.r, bins, content, count, s.weight, s.order, s.key, s.mask[0])
    cost = s.cost                       # minus the copies bin b would keep on chiplet j (integers)
    if m <= MASK_BITS:                  # the experts bin b and chiplet j share, counted on bits
        bmask, hmask = s.mask[0], s.mask[1]
        hmask[:bins] = 0
        for e in range(m):
            for k in range(ncopy[e]):
                if where[slots[e, k]] >= 0:
                    hmask[where[slots[e, k]]] |= np.int64(1) << e
        for b in range(bins):
            for j in range(bins):
                cost[b, j] = 0.0 - popcount(bmask[b] & hmask[j])
    else:
        held = s.held                   # chiplet (index in chips) x expert it holds now
        held[:bins, :m] = 0
        for e in range(m):
            for k in range(ncopy[e]):
                if where[slots[e, k]] >= 0:
                    held[where[slots[e, k]], e] = 1
        cost[:bins, :bins] = 0.0
        for b in range(bins):
            for k in range(count[b]):
                e = content[b, k]
                if contains(content[b], k, e):      # a second copy of one expert in a bin counts once
                    continue
                for j in range(bins):
                    cost[b, j] -= held[j, e]
    chip_of = s.ivec[1]
    assign_into(cost, bins, s.vec[0], s.vec[1], s.vec[2], s.ivec[0], chip_of, s.ivec[2], s.bvec[0],
                s.bvec[1], s.ivec[3])
    new, n_new = s.new, s.n_new
    n_new[:m] = 0
    for b in range(bins):
        for k in range(count[b]):
            e = content[b, k]
            new[e, n_new[e]] = chips[chip_of[b]]
            n_new[e] += 1
    for e in range(m):          # copies already in place keep their order (no move), then the new ones
        n_out = 0
        for k in range(ncopy[e]):
            if contains(new[e], n_new[e], slots[e, k]):
                out[e, n_out] = slots[e, k]
                n_out += 1
        n_kept = n_out
        for k in range(n_new[e]):
            if not contains(out[e], n_kept, new[e, k]):
                out[e, n_out] = new[e, k]
                n_out += 1
        out_n[e] = n_out
    return True


@nb.njit(cache=True)
def rebalance_arrays(offsets, load, slots, ncopy, home, nhome, failed, max_copies, bound=0.0):
    """Every layer re-packed (module docstring): layer g's experts are rows ``offsets[g]:offsets[g+1]`` of
    ``load`` (observed per-token load), ``slots`` / ``ncopy`` (their chiplets now) and ``home`` / ``nhome``
    (chiplets they may return to); ``failed`` flags failed chiplets; a layer whose imbalance stays within
    ``bound`` (> 0) is left as it is (docs/runtime.md). Returns the new slots and copies."""
    width = slots.shape[1] + max_copies
    out = np.full((len(load), width), -1)
    out_n = ncopy.copy()
    out[:, : slots.shape[1]] = slots
    m = 1
    for g in range(len(offsets) - 1):
        m = max(m, offsets[g + 1] - offsets[g])
    c = len(failed)
    s = Scratch(np.zeros(c, np.bool_), np.full(c, -1), np.zeros(c, np.int64), np.ones(m, np.int64),
                np.zeros(m, np.int64), np.zeros(m), np.full((c, m * max(1, max_copies)), -1),
                np.zeros(c, np.int64), np.zeros(c), np.zeros((c, m), np.int64), np.zeros((c, c)),
                np.zeros((3, c)), np.full((4, c), -1), np.zeros((2, c), np.int64),
                np.full((m, width), -1), np.zeros(m, np.int64), np.zeros((2, c), np.int64))
    for g in range(len(offsets) - 1):
        a, b = offsets[g], offsets[g + 1]
        rebalance_layer(load[a:b], slots[a:b], ncopy[a:b], home[a:b], nhome[a:b], failed, max_copies,
                        out[a:b], out_n[a:b], s, bound)
    return out, out_n


@nb.njit(cache=True)
def scatter(p_slots, p_ncopy, units, new, count):
    """A placement's slots and copies with rows ``units`` replaced by ``new[:, :count]`` (-1 padded,
    as wide as the widest)."""
    width = max(p_slots.shape[1], count.max())
    slots = np.full((len(p_ncopy), width), -1, np.int64)
    slots[:, : p_slots.shape[1]] = p_slots
    ncopy = p_ncopy.copy()
    for i in range(len(units)):
        for k in range(width):
            slots[units[i], k] = new[i, k] if k < count[i] else -1
        ncopy[units[i]] = count[i]
    return slots, ncopy


@nb.njit(cache=True)
def rebalance_units(offsets, load, p_slots, p_ncopy, h_slots, h_ncopy, units, failed, max_copies, bound):
    """`rebalance_arrays` of a placement's rows ``units`` (their home's ``h_slots`` / ``h_ncopy``; the
    chiplets ``failed``, a list) and the placement with those rows replaced (`scatter`), in one call:
    the failed flags as `dead_mask` sets them."""
    n, w, v = len(units), p_slots.shape[1], h_slots.shape[1]
    slots, ncopy = np.empty((n, w), np.int64), np.empty(n, np.int64)
    home, nhome = np.empty((n, v), np.int64), np.empty(n, np.int64)
    top = -1
    for i in range(n):
        for k in range(w):
            slots[i, k] = p_slots[units[i], k]
            top = max(top, slots[i, k])
        ncopy[i] = p_ncopy[units[i]]
        for k in range(v):
            home[i, k] = h_slots[units[i], k]
            top = max(top, home[i, k])
        nhome[i] = h_ncopy[units[i]]
    for c in failed:
        top = max(top, c)
    dead = np.zeros(1 + top, np.bool_)
    for c in failed:
        dead[c] = True
    new, count = rebalance_arrays(offsets, load, slots, ncopy, home, nhome, dead, max_copies, bound)
    return scatter(p_slots, p_ncopy, units, new, count)


def dead_mask(top: int, failed: frozenset[int]) -> np.ndarray:
    """Failed flags over chiplets ``0..top`` and every one of ``failed``."""
    dead = np.zeros(1 + max(top, max(failed, default=-1)), np.bool_)
    for c in failed:
        dead[c] = True
    return dead


def rebalance_placement(p: Placement, home: Placement, groups: ExpertGroups, observed: Popularity,
                        failed: frozenset[int], max_copies: int, bound: float = 0.0) -> Placement:
    """`rebalance` of a `Placement` (every unit's rows; ``home``: the design's own; ``bound``: layers whose
    imbalance stays within it are left alone, 0: none); a new object always. One compiled call
    (`rebalance_units`: the rows gathered, packed and scattered back); not remembered: the bench's
    packings repeat their inputs 38 times in 590 (docs/runtime.md), fewer than a key costs."""
    units, offsets, _ = groups.flat()
    if not len(units):
        return Placement(p.slots, p.ncopy)
    groups.packed += 1
    return Placement(*rebalance_units(offsets, groups.load(observed), p.slots, p.ncopy, home.slots, home.ncopy,
                                      units, np.array(sorted(failed), np.int64), max_copies, float(bound)))


def rebalance(placement: dict[str, list[int]], groups: ExpertGroups, observed: Popularity,
              failed: frozenset[int], max_copies: int, home: dict[str, list[int]] | None = None
              ) -> dict[str, list[int]]:
    """The placement re-packed from the observed popularity (module docstring; `rebalance_arrays`);
    non-expert units stay, and so do the lists of experts that do not move. ``home``: the design's own
    placement, whose chiplets a layer may also return to (once repaired). The dictionary form the
    search's baseline designs use (dse.search.baseline)."""
    names = [n for g in groups.names for n in g]
    if not names:
        return dict(placement)
    offsets = np.concatenate([[0], np.cumsum([len(g) for g in groups.names])]).astype(np.int64)
    load = np.concatenate([np.asarray(q, float)[p] for q, p in zip(groups.q, observed)])
    slots, ncopy = placement_arrays(placement, names)
    back, nback = placement_arrays({n: (home or {}).get(n, []) for n in names}, names)
    top = max(int(slots.max(initial=-1)), int(back.max(initial=-1)))
    new, count = rebalance_arrays(offsets, load, slots, ncopy, back, nback, dead_mask(top, failed), max_copies)
    out = dict(placement)               # lists are replaced, never changed: unchanged units share theirs
    for e in np.flatnonzero((count != ncopy) | (new[:, : slots.shape[1]] != slots).any(axis=1)
                            | (new[:, slots.shape[1]:] >= 0).any(axis=1)):
        out[names[e]] = new[e, : count[e]].tolist()
    return out
