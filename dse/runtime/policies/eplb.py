"""Load-balanced expert placement after DeepSeek's EPLB (github.com/deepseek-ai/EPLB, the algorithm as its
README describes it; no code taken): per MoE layer, *replicate* the hottest experts into the layer's copy
budget (each extra copy to the expert with the highest load per copy), then *pack* the copies onto the
chiplets by load (heaviest first onto the least loaded chiplet with room, a chiplet holding at most
ceil(copies / chiplets) of the layer and never two copies of one expert). Neighbours stay close: a layer's
copies stay on the live chiplets that already hold the layer (near its attention and its hand-offs).
Packed bins are then matched to those chiplets to keep as many copies where they are as possible
(an assignment problem), so a
rebalance moves only what it must."""
from __future__ import annotations

import heapq
import math

import numpy as np
from scipy.optimize import linear_sum_assignment

from ..mapping import ExpertGroups


def replicate(load: np.ndarray, copies: int, cap: int) -> np.ndarray:
    """Copies of each expert: one each, the rest one at a time to the highest load per copy (at most
    ``cap`` each)."""
    r = np.ones(len(load), np.int64)
    for _ in range(max(0, min(copies, cap * len(load)) - len(load))):
        per = np.where(r < cap, load / r, -np.inf)
        r[int(np.argmax(per))] += 1
    return r


def pack(load: np.ndarray, r: np.ndarray, bins: int) -> list[list[int]]:
    """Each bin's experts: copies heaviest first onto the least loaded bin with room (balanced packing)."""
    room = math.ceil(int(r.sum()) / bins)
    order = np.argsort(-(load / r), kind="stable")
    content: list[list[int]] = [[] for _ in range(bins)]
    heap = [(0.0, 0, b) for b in range(bins)]          # (load, copies, bin): the least loaded first
    for e in order:
        w = load[e] / r[e]
        for _ in range(r[e]):
            skipped = []
            while heap and e in content[heap[0][2]]:
                skipped.append(heapq.heappop(heap))
            if not heap:                                # only bins holding e have room: the least loaded
                weight, n, b = skipped.pop(0)
            else:
                weight, n, b = heapq.heappop(heap)
            content[b].append(int(e))
            if n + 1 < room:
                heapq.heappush(heap, (weight + w, n + 1, b))
            for item in skipped:
                heapq.heappush(heap, item)
    return content


def match(content: list[list[int]], chiplets: list[int], held: dict[int, set[int]]) -> dict[int, int]:
    """Bin -> chiplet keeping the most copies in place (``held``: chiplet -> experts it holds): the
    assignment problem, solved exactly (scipy's linear_sum_assignment)."""
    experts = 1 + max([e for c in content for e in c] + [e for h in held.values() for e in h] + [0])
    B = np.zeros((len(content), experts), np.int64)      # integers: no BLAS threads for a small product
    H = np.zeros((len(chiplets), experts), np.int64)
    for b, c in enumerate(content):
        B[b, c] = 1
    for j, s in enumerate(chiplets):
        H[j, list(held.get(s, ()))] = 1
    bins, chips = linear_sum_assignment(B @ H.T, maximize=True)
    return {int(b): chiplets[j] for b, j in zip(bins, chips)}


def packed(load: np.ndarray, copies: int, cap: int, bins: int, memo: dict | None, key) -> list[list[int]]:
    """`replicate` then `pack`, remembered in ``memo`` under ``key`` (the layer and its observed
    popularity): the same for every design and window that asks with the same copies, cap and bins."""
    full = (key, copies, cap, bins)
    if memo is not None and full in memo:
        return memo[full]
    content = pack(load, replicate(load, copies, cap), bins)
    if memo is not None:
        memo[full] = content
    return content


def rebalance(placement: dict[str, list[int]], groups: ExpertGroups, observed: list[np.ndarray],
              failed: frozenset[int], max_copies: int, home: dict[str, list[int]] | None = None,
              memo: dict | None = None) -> dict[str, list[int]]:
    """The placement re-packed from the observed popularity (module docstring); non-expert units stay.
    ``home``: the design's own placement, whose chiplets a layer may also return to (once repaired);
    ``memo``: packings and layers' results shared across calls (`packed`; a layer's result is remembered
    under its observed popularity, its copies and home chiplets and the failed set: designs of a
    population that share a layer's mapping re-pack it once)."""
    out = dict(placement)               # lists are replaced, never changed: unchanged units share theirs
    for g, (names, q, perm) in enumerate(zip(groups.names, groups.q, observed)):
        key = ("layer", g, perm.tobytes(), failed, tuple(tuple(placement[n]) for n in names),
               tuple(tuple((home or {}).get(n, ())) for n in names))
        if memo is not None and key in memo:
            for n, slots in zip(names, memo[key]):
                out[n] = placement[n] if tuple(placement[n]) == slots else list(slots)
            continue
        chips = sorted({s for n in names for s in placement[n] + (home or {}).get(n, []) if s not in failed})
        if not chips:
            continue
        load = q[perm]
        copies = sum(len(placement[n]) for n in names)
        content = packed(load, copies, min(max_copies, len(chips)), len(chips), memo, (g, perm.tobytes()))
        held: dict[int, set[int]] = {}
        for e, n in enumerate(names):
            for s in placement[n]:
                held.setdefault(s, set()).add(e)
        where = match(content, chips, held)
        new = {n: [] for n in names}
        for b, experts in enumerate(content):
            for e in experts:
                new[names[e]].append(where[b])
        for e, n in enumerate(names):       # copies already in place keep their order (no move)
            keep = [s for s in placement[n] if s in new[n]]
            moved = keep + [s for s in new[n] if s not in keep]
            out[n] = placement[n] if moved == placement[n] else moved
        if memo is not None:
            memo[key] = tuple(tuple(out[n]) for n in names)
    return out
