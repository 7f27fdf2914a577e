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

import numba as nb
import numpy as np

from ..mapping import ExpertGroups, Placement, placement_arrays

PACKINGS = 4096         # packings remembered per study's experts (then forgotten, all at once)


@nb.njit(cache=True)
def replicate(load: np.ndarray, copies: int, cap: int) -> np.ndarray:
    """Copies of each expert: one each, the rest one at a time to the highest load per copy (the first
    such expert; at most ``cap`` each)."""
    m = len(load)
    r = np.ones(m, np.int64)
    for _ in range(max(0, min(copies, cap * m) - m)):
        best, pick = -np.inf, 0
        for e in range(m):
            per = load[e] / r[e] if r[e] < cap else -np.inf
            if per > best:
                best, pick = per, e
        r[pick] += 1
    return r


@nb.njit(cache=True)
def pack(load: np.ndarray, r: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Each bin's experts (``content[b, :count[b]]``): copies heaviest first onto the least loaded bin
    with room (load, then copies, then index), a bin holding the expert only when no other has room."""
    total = r.sum()
    room = (total + bins - 1) // bins
    order = np.argsort(-(load / r), kind="mergesort")
    content = np.full((bins, room), -1, np.int64)
    count = np.zeros(bins, np.int64)
    weight = np.zeros(bins)
    for e in order:
        w = load[e] / r[e]
        for _ in range(r[e]):
            pick, pick_has = -1, True
            for b in range(bins):
                if count[b] >= room:
                    continue
                has = contains(content[b], count[b], e)
                if pick < 0 or (pick_has and not has) or (has == pick_has and (
                        weight[b] < weight[pick] or (weight[b] == weight[pick] and count[b] < count[pick]))):
                    pick, pick_has = b, has
            content[pick, count[pick]] = e
            count[pick] += 1
            weight[pick] += w
    return content, count


@nb.njit(cache=True)
def assign_max(gain: np.ndarray) -> np.ndarray:
    """Column of each row maximising the total ``gain`` (square): the shortest augmenting path method
    (Crouse 2016) as scipy.optimize.linear_sum_assignment runs it, ties broken alike."""
    n = gain.shape[0]
    cost = -gain.astype(np.float64)
    u, v, spc = np.zeros(n), np.zeros(n), np.zeros(n)
    path, col4row, row4col = np.full(n, -1), np.full(n, -1), np.full(n, -1)
    sr, sc, remaining = np.zeros(n, np.bool_), np.zeros(n, np.bool_), np.zeros(n, np.int64)
    for cur in range(n):
        min_val, left = 0.0, n
        for it in range(n):
            remaining[it] = n - it - 1
        sr[:], sc[:], spc[:] = False, False, np.inf
        sink, i = -1, cur
        while sink == -1:
            index, lowest = -1, np.inf
            sr[i] = True
            for it in range(left):
                j = remaining[it]
                reduced = min_val + cost[i, j] - u[i] - v[j]
                if reduced < spc[j]:
                    path[j], spc[j] = i, reduced
                if spc[j] < lowest or (spc[j] == lowest and row4col[j] == -1):
                    lowest, index = spc[j], it
            min_val = lowest
            j = remaining[index]
            if row4col[j] == -1:
                sink = j
            else:
                i = row4col[j]
            sc[j] = True
            left -= 1
            remaining[index] = remaining[left]
        u[cur] += min_val
        for i in range(n):
            if sr[i] and i != cur:
                u[i] += min_val - spc[col4row[i]]
        for j in range(n):
            if sc[j]:
                v[j] -= min_val - spc[j]
        j = sink
        while True:
            i = path[j]
            row4col[j] = i
            col4row[i], j = j, col4row[i]
            if i == cur:
                break
    return col4row


@nb.njit(cache=True, inline="always")
def contains(row: np.ndarray, n: int, x: int) -> bool:
    for k in range(n):
        if row[k] == x:
            return True
    return False


@nb.njit(cache=True)
def rebalance_layer(load, slots, ncopy, home, nhome, failed, max_copies, out, out_n):
    """One layer (its experts' rows of the arrays of `rebalance_arrays`); returns whether it has a live
    chiplet (otherwise ``out`` is left alone)."""
    m = len(load)
    live = np.zeros(len(failed), np.bool_)
    for e in range(m):
        for k in range(ncopy[e]):
            live[slots[e, k]] = not failed[slots[e, k]]
        for k in range(nhome[e]):
            live[home[e, k]] = not failed[home[e, k]]
    chips = np.nonzero(live)[0]
    bins = len(chips)
    if bins == 0:
        return False
    r = replicate(load, ncopy.sum(), min(max_copies, bins))
    content, count = pack(load, r, bins)
    held = np.zeros((bins, m), np.int64)            # chiplet (index in chips) x expert it holds now
    where = np.full(len(failed), -1)
    for j in range(bins):
        where[chips[j]] = j
    for e in range(m):
        for k in range(ncopy[e]):
            if where[slots[e, k]] >= 0:
                held[where[slots[e, k]], e] = 1
    gain = np.zeros((bins, bins), np.int64)         # copies bin b would keep on chiplet j
    for b in range(bins):
        for k in range(count[b]):
            e = content[b, k]
            if contains(content[b], k, e):          # a second copy of one expert in a bin counts once
                continue
            for j in range(bins):
                gain[b, j] += held[j, e]
    chip_of = assign_max(gain)
    new = np.full((m, out.shape[1]), -1)
    n_new = np.zeros(m, np.int64)
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
def rebalance_arrays(offsets, load, slots, ncopy, home, nhome, failed, max_copies):
    """Every layer re-packed (module docstring): layer g's experts are rows ``offsets[g]:offsets[g+1]`` of
    ``load`` (observed per-token load), ``slots`` / ``ncopy`` (their chiplets now) and ``home`` / ``nhome``
    (chiplets they may return to); ``failed`` flags failed chiplets. Returns the new slots and copies."""
    width = slots.shape[1] + max_copies
    out = np.full((len(load), width), -1)
    out_n = ncopy.copy()
    out[:, : slots.shape[1]] = slots
    for g in range(len(offsets) - 1):
        a, b = offsets[g], offsets[g + 1]
        rebalance_layer(load[a:b], slots[a:b], ncopy[a:b], home[a:b], nhome[a:b], failed, max_copies,
                        out[a:b], out_n[a:b])
    return out, out_n


def dead_mask(slots: np.ndarray, home: np.ndarray, failed: frozenset[int]) -> np.ndarray:
    """Failed flags over every chiplet ``slots``, ``home`` or ``failed`` name."""
    dead = np.zeros(1 + max(int(slots.max(initial=-1)), int(home.max(initial=-1)), max(failed, default=-1)),
                    np.bool_)
    dead[list(failed)] = True
    return dead


def rebalance_placement(p: Placement, home: Placement, groups: ExpertGroups, observed: list[np.ndarray],
                        failed: frozenset[int], max_copies: int) -> Placement:
    """`rebalance` of a `Placement` (every unit's rows; ``home``: the design's own); a new object always.
    The packing is remembered by its inputs' content (the experts' rows now and at home, the observed
    popularity, the failed set), in ``groups`` (one study's experts): a hot set that cycles, and designs
    of a population that share their experts' placement, pack once."""
    units, offsets, _ = groups.flat()
    if not len(units):
        return Placement(p.slots, p.ncopy)
    now, back = p.rows(units), home.rows(units)
    key = (now.slots.shape, now.slots.tobytes(), now.ncopy.tobytes(), back.slots.shape, back.slots.tobytes(),
           back.ncopy.tobytes(), id(observed), failed, max_copies)
    memo = groups.packings
    hit = memo.get(key)
    if hit is None or hit[0] is not observed:
        if len(memo) >= PACKINGS:
            memo.clear()
        hit = memo[key] = (observed, *rebalance_arrays(offsets, groups.load(observed), now.slots, now.ncopy,
                                                       back.slots, back.ncopy,
                                                       dead_mask(now.slots, back.slots, failed), max_copies))
        groups.packed += 1
    _, new, count = hit
    width = max(p.slots.shape[1], int(count.max()))
    slots = np.full((len(p.ncopy), width), -1, np.int64)
    slots[:, : p.slots.shape[1]] = p.slots
    slots[units] = np.where(np.arange(width)[None, :] < count[:, None], new[:, :width], -1)
    ncopy = p.ncopy.copy()
    ncopy[units] = count
    return Placement(slots, ncopy)


def rebalance(placement: dict[str, list[int]], groups: ExpertGroups, observed: list[np.ndarray],
              failed: frozenset[int], max_copies: int, home: dict[str, list[int]] | None = None,
              memo: dict | None = None) -> dict[str, list[int]]:
    """The placement re-packed from the observed popularity (module docstring; `rebalance_arrays`);
    non-expert units stay, and so do the lists of experts that do not move. ``home``: the design's own
    placement, whose chiplets a layer may also return to (once repaired); ``memo``: unused (kept for
    callers that share one)."""
    names = [n for g in groups.names for n in g]
    if not names:
        return dict(placement)
    offsets = np.concatenate([[0], np.cumsum([len(g) for g in groups.names])]).astype(np.int64)
    load = np.concatenate([np.asarray(q, float)[p] for q, p in zip(groups.q, observed)])
    slots, ncopy = placement_arrays(placement, names)
    back, nback = placement_arrays({n: (home or {}).get(n, []) for n in names}, names)
    new, count = rebalance_arrays(offsets, load, slots, ncopy, back, nback, dead_mask(slots, back, failed),
                                  max_copies)
    out = dict(placement)               # lists are replaced, never changed: unchanged units share theirs
    for e in np.flatnonzero((count != ncopy) | (new[:, : slots.shape[1]] != slots).any(axis=1)
                            | (new[:, slots.shape[1]:] >= 0).any(axis=1)):
        out[names[e]] = new[e, : count[e]].tolist()
    return out
