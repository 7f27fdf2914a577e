"""The imbalance a router's counters would show (docs/runtime.md, `threshold`): per MoE layer, max /
mean load of the chiplets that hold the layer's experts (1: balanced), a copy of an expert taking an
equal share of its tokens, averaged over layers; summed as NumPy sums (`pairwise_sum`), so the figure is
the same whether a window's imbalance is computed here or from NumPy arrays."""
from __future__ import annotations

import numba as nb
import numpy as np

from .mapping import ExpertGroups, Placement
from .popularity import Popularity


def placement_imbalance(p: Placement, groups: ExpertGroups, perm: Popularity, chiplets: int) -> float:
    """`imbalance_arrays` of a `Placement` over the experts' rows at popularity ``perm``."""
    return float(imbalance_arrays(p.slots, p.ncopy, groups.flat_units, groups.offsets, groups.load(perm), chiplets))


@nb.njit(cache=True)
def block_sum(a: np.ndarray, lo: int, n: int) -> float:
    """`pairwise_sum` of a run of at most 128: eight running sums (a plain sum below 8)."""
    if n < 8:
        res = -0.0
        for i in range(n):
            res += a[lo + i]
        return res
    r0, r1, r2, r3, r4, r5, r6, r7 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3], a[lo + 4], a[lo + 5], a[lo + 6], \
        a[lo + 7]
    i = 8
    while i < n - n % 8:
        r0, r1, r2, r3 = r0 + a[lo + i], r1 + a[lo + i + 1], r2 + a[lo + i + 2], r3 + a[lo + i + 3]
        r4, r5, r6, r7 = r4 + a[lo + i + 4], r5 + a[lo + i + 5], r6 + a[lo + i + 6], r7 + a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@nb.njit(cache=True)
def pairwise_sum(a: np.ndarray, lo: int, n: int) -> float:
    """``a[lo:lo + n].sum()`` added as NumPy adds a contiguous run (its pairwise summation: runs of up to
    128 by `block_sum`, longer ones as the sum of two halves, the first a multiple of 8), so the result
    is NumPy's to the bit; the halving on an explicit stack (a cached Numba function must not recurse)."""
    if n <= 128:
        return block_sum(a, lo, n)
    start, size, stage, left = np.empty(64, np.int64), np.empty(64, np.int64), np.zeros(64, np.int64), \
        np.zeros(64)
    sp, ret = 0, 0.0
    start[0], size[0] = lo, n
    while sp >= 0:
        m = size[sp]
        half = m // 2 - (m // 2) % 8
        if m <= 128:
            ret = block_sum(a, start[sp], m)
            sp -= 1
        elif stage[sp] == 0:                # first half
            stage[sp] = 1
            start[sp + 1], size[sp + 1], stage[sp + 1] = start[sp], half, 0
            sp += 1
        elif stage[sp] == 1:                # its sum kept; second half
            stage[sp], left[sp] = 2, ret
            start[sp + 1], size[sp + 1], stage[sp + 1] = start[sp] + half, m - half, 0
            sp += 1
        else:
            ret = left[sp] + ret
            sp -= 1
    return ret


@nb.njit(cache=True)
def imbalance_arrays(slots, ncopy, units, offsets, load, chiplets) -> float:
    """`imbalance` on kernel arrays: layer g's experts are units ``units[offsets[g]:offsets[g + 1]]``
    (slots ``[U, C]``, copies ``[U]``) with per-token loads ``load`` (group order); each copy adds its
    share ``load * (1 / copies)`` to its chiplet, expert by expert and copy by copy (np.bincount's
    order), and the sums and the mean over layers are NumPy's (`pairwise_sum`)."""
    loads = np.zeros(chiplets)
    ratio = np.zeros(max(1, len(offsets) - 1))
    n = 0
    for g in range(len(offsets) - 1):
        loads[:] = 0.0
        for e in range(offsets[g], offsets[g + 1]):
            u = units[e]
            w = load[e] * (1.0 / ncopy[u]) if ncopy[u] > 0 else 0.0
            for k in range(ncopy[u]):
                if slots[u, k] < 0 or slots[u, k] >= chiplets:
                    raise ValueError("a copy on a chiplet outside the package")
                loads[slots[u, k]] += w
        held, top = 0, 0.0
        for c in range(chiplets):
            if loads[c] > 0:
                held += 1
            top = max(top, loads[c])
        if held:
            ratio[n] = top / ((0.0 + pairwise_sum(loads, 0, chiplets)) / held)
            n += 1
    return 1.0 if n == 0 else (0.0 + pairwise_sum(ratio, 0, n)) / n


@nb.njit(cache=True)
def layer_ratio(load, slots, ncopy, failed, loads) -> float:
    """One layer's imbalance as dse.runtime.imbalance counts it (max / mean load of the chiplets holding
    its experts, a copy taking an equal share, summed as NumPy sums), over the chiplets of ``failed``
    (``loads``: scratch as long); infinite where a copy is on a failed chiplet (it must move)."""
    loads[:] = 0.0
    for e in range(len(load)):
        w = load[e] * (1.0 / ncopy[e]) if ncopy[e] > 0 else 0.0
        for k in range(ncopy[e]):
            if failed[slots[e, k]]:
                return np.inf
            loads[slots[e, k]] += w
    held, top = 0, 0.0
    for c in range(len(loads)):
        if loads[c] > 0:
            held += 1
        top = max(top, loads[c])
    return top / ((0.0 + pairwise_sum(loads, 0, len(loads))) / held) if held else 1.0
