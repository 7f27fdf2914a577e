"""EPLB's two steps before the assignment (dse.runtime.policies.eplb, after DeepSeek's EPLB README,
github.com/deepseek-ai/EPLB; no code taken): *replicate* a layer's hottest experts into its copy budget,
then *pack* the copies onto bins by load. A bin's experts are kept as bits where the layer has at most
`MASK_BITS` experts (one shift asks whether a bin holds one; `popcount` counts what two sets share)."""
from __future__ import annotations

import numba as nb
import numpy as np

MASK_BITS = 63          # a layer of at most this many experts keeps its bins' and chiplets' experts as bits


@nb.njit(cache=True)
def replicate(load: np.ndarray, copies: int, cap: int, r: np.ndarray) -> None:
    """``r[:m]``: copies of each expert: one each, the rest one at a time to the highest load per copy
    (the first such expert; at most ``cap`` each)."""
    m = len(load)
    r[:m] = 1
    for _ in range(max(0, min(copies, cap * m) - m)):
        best, pick = -np.inf, 0
        for e in range(m):
            per = load[e] / r[e] if r[e] < cap else -np.inf
            if per > best:
                best, pick = per, e
        r[pick] += 1


@nb.njit(cache=True)
def pack(load: np.ndarray, r: np.ndarray, bins: int, content: np.ndarray, count: np.ndarray,
         weight: np.ndarray, order: np.ndarray, key: np.ndarray, mask: np.ndarray) -> None:
    """Each bin's experts (``content[b, :count[b]]``): copies heaviest first (a stable sort of the load
    per copy) onto the least loaded bin with room (load, then copies, then index), a bin holding the
    expert only when no other has room. ``order`` and ``key``: scratch of the layer's size; ``mask[b]``:
    the experts bin b holds as bits (a layer of at most `MASK_BITS` experts; else unused)."""
    m = len(load)
    bits = m <= MASK_BITS
    total = 0
    for e in range(m):
        total += r[e]
        key[e] = -(load[e] / r[e])
    room = (total + bins - 1) // bins
    for i in range(m):                  # insertion sort: stable, as the mergesort it stands for
        j = i
        while j > 0 and key[order[j - 1]] > key[i]:
            order[j] = order[j - 1]
            j -= 1
        order[j] = i
    count[:bins] = 0
    weight[:bins] = 0.0
    mask[:bins] = 0
    for i in range(m):
        e = order[i]
        w = load[e] / r[e]
        for _ in range(r[e]):
            pick, pick_has = -1, True
            for b in range(bins):
                if count[b] >= room:
                    continue
                has = ((mask[b] >> e) & 1) != 0 if bits else contains(content[b], count[b], e)
                if pick < 0 or (pick_has and not has) or (has == pick_has and (
                        weight[b] < weight[pick] or (weight[b] == weight[pick] and count[b] < count[pick]))):
                    pick, pick_has = b, has
            content[pick, count[pick]] = e
            count[pick] += 1
            weight[pick] += w
            if bits:
                mask[pick] |= np.int64(1) << e


@nb.njit(cache=True, inline="always")
def popcount(x: np.int64) -> int:
    n = 0
    while x:
        x &= x - 1
        n += 1
    return n


@nb.njit(cache=True, inline="always")
def contains(row: np.ndarray, n: int, x: int) -> bool:
    for k in range(n):
        if row[k] == x:
            return True
    return False
