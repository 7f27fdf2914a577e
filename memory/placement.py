"""Placement of data items (weights, KV cache, activations) into memory tiers under hard capacities.

Each item j has a size s_j (bytes it occupies) and a read rate r_j (bytes read per step). Tiers are
ordered fastest first (on-chip SRAM, the chiplet's HBM, ...) with capacities C_t; the package's shared
DDR is the last, shared tier; what even that cannot hold is *unplaced* and reported as a shortfall (a
constraint violation, never an exception).

Rule: fill the fastest tier first with the items of highest access density r_j / s_j, splitting the
item at the boundary. Because any byte of item j costs r_j / s_j reads per step wherever it sits, and
the cost of a read rises from tier to tier, this greedy order is optimal for the linear cost
sum_j sum_t c_t (r_j / s_j) x_jt under the capacity constraints (the fractional knapsack problem,
Dantzig 1957; Cormen et al., *Introduction to Algorithms*, 3rd ed., 16.2); in particular it minimises
the bytes read from DDR. tests/test_memory_placement.py checks it against scipy's LP solver.

Array API (Numba, whole designs or populations per call):

* ``place_by_density(size, read, capacity[T]) -> frac[n, T + 1]``: one chiplet; column T is the part
  no local tier could hold (it goes to the shared tier).
* ``place_design(seg_start, size, read, capacity[S, T], shared_capacity) -> (frac[n, T + 2], short)``:
  S chiplets of one design, items ``seg_start[s]:seg_start[s + 1]`` belong to chiplet s; their overflow
  competes for the shared tier (column T) by the same density order; column T + 1 is unplaced and
  ``short`` its bytes.
* ``place_population(design_start, seg_start, size, read, capacity, shared_capacity[P])``: P designs.
* ``spill_by_density(size, read, capacity, density, order, spill)``: one chiplet, one local tier,
  scratch arrays from the caller (above `MERGE_MIN` items the merge sort allocates its own, `merge_runs`):
  the fraction of each item that overflows. The same rule as `place_by_density` with T = 1, for
  evaluators that re-place single chiplets many times.
"""
from __future__ import annotations

import numba as nb
import numpy as np

# `spill_first_n` indexes with ``nowrap(i)``: Numba skips the negative-index wrap-around of an unsigned index.
nowrap = nb.uintp


@nb.njit(cache=True)
def _density_order(size: np.ndarray, read: np.ndarray) -> np.ndarray:
    """Item indices by falling read density (bytes read per byte stored); stable on ties."""
    density = np.empty(size.shape[0])
    for j in range(size.shape[0]):
        density[j] = read[j] / size[j] if size[j] > 0.0 else np.inf
    return np.argsort(-density, kind="mergesort")


@nb.njit(cache=True)
def _fill(order, size, frac, left, capacity, first_col):
    """Pour the ``left`` bytes of items in ``order`` into tiers ``capacity`` (columns from ``first_col``)."""
    T = capacity.shape[0]
    t = 0
    free = capacity[0] if T > 0 else 0.0
    for j in order:
        while left[j] > 0.0 and t < T:
            take = min(left[j], free)
            frac[j, first_col + t] += take / size[j]
            left[j] -= take
            free -= take
            if free <= 0.0:
                t += 1
                free = capacity[t] if t < T else 0.0


@nb.njit(cache=True)
def place_by_density(size: np.ndarray, read: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Fractions of each item in each tier, densest items in the fastest tiers; column T is overflow."""
    n = size.shape[0]
    T = capacity.shape[0]
    frac = np.zeros((n, T + 1))
    left = size.copy()
    _fill(_density_order(size, read), size, frac, left, capacity, 0)
    for j in range(n):
        if size[j] <= 0.0:
            frac[j, 0 if T > 0 else T] = 1.0      # occupies nothing
        elif left[j] > 0.0:
            frac[j, T] += left[j] / size[j]
    return frac


#: items above which `spill_first_n` orders by merge sort (O(n log n)) rather than by insertion (O(n^2))
MERGE_MIN = 32


@nb.njit(cache=True, inline="always")
def merge_order(n, density, order):
    """``order[:n]``: item indices by falling ``density``, equal densities in index order: the order the
    insertion sort of `spill_first_n` gives (a stable sort; Knuth, *The Art of Computer Programming* vol. 3,
    5.2.4, bottom-up merging), in O(n log n) rather than O(n^2). ``density`` must hold no NaN (NaN is
    unordered; `spill_first_n` keeps the insertion sort then). Allocates scratch arrays of n (`merge_runs`)."""
    for j in range(n):
        order[nowrap(j)] = j
    merge_runs(n, density, order)


#: items `merge_runs` puts in order by insertion before it merges (runs of this many)
RUN = 8


@nb.njit(cache=True, inline="always")
def merge_runs(n, density, order):
    """Sort the item indices ``order[:n]`` by falling ``density`` in place, equal densities keeping their
    given order (the bottom-up merge of `merge_order`, which starts it from 0, 1, ..., n - 1). ``density``
    must hold no NaN. Allocates three scratch arrays of n.

    Runs of `RUN` items are put in order by insertion, then merged in pairs, doubling, as (density, index)
    pairs held side by side: a merge step reads the next key of each run where it lies rather than through
    its index, and picks with a select rather than a branch. On runs of 150-1,500 random densities (with
    and without ties) that takes 0.43-0.57 of the time of merging single items by their indices, each
    key read through its index (docs/performance.md, "Issue 52, sixteenth round"). A stable sort's
    order is unique, so the order is the same."""
    key = np.empty(n, np.float64)
    key2 = np.empty(n, np.float64)
    other = np.empty(n, np.int64)
    for lo in range(0, n, RUN):             # an item moves past smaller densities only: stable
        hi = min(lo + RUN, n)
        for j in range(lo, hi):
            x = order[nowrap(j)]
            kx = density[nowrap(x)]
            k = j
            while k > lo and key[nowrap(k - 1)] < kx:
                key[nowrap(k)] = key[nowrap(k - 1)]
                order[nowrap(k)] = order[nowrap(k - 1)]
                k -= 1
            key[nowrap(k)] = kx
            order[nowrap(k)] = x
    width = RUN
    in_order = True             # which pair of arrays holds the runs merged so far
    while width < n:
        from_key = key if in_order else key2
        to_key = key2 if in_order else key
        from_item = order if in_order else other
        to_item = other if in_order else order
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            a, b, k = lo, mid, lo
            while a < mid and b < hi:
                key_a, key_b = from_key[nowrap(a)], from_key[nowrap(b)]
                right = key_b > key_a           # ties: the left run's (lower index) first
                to_key[nowrap(k)] = key_b if right else key_a
                to_item[nowrap(k)] = from_item[nowrap(b)] if right else from_item[nowrap(a)]
                b += np.int64(right)
                a += 1 - np.int64(right)
                k += 1
            while a < mid:
                to_key[nowrap(k)] = from_key[nowrap(a)]
                to_item[nowrap(k)] = from_item[nowrap(a)]
                a += 1
                k += 1
            while b < hi:
                to_key[nowrap(k)] = from_key[nowrap(b)]
                to_item[nowrap(k)] = from_item[nowrap(b)]
                b += 1
                k += 1
        in_order = not in_order
        width *= 2
    if not in_order:
        for j in range(n):
            order[nowrap(j)] = other[nowrap(j)]


@nb.njit(cache=True)
def spill_by_density(size, read, capacity, density, order, spill):
    """Fill one tier of ``capacity`` bytes densest-first; ``spill[j]`` gets the fraction of item j left over.

    Items of equal density keep their given order (a stable sort: insertion, or `merge_order` above
    `MERGE_MIN` items). ``density`` and ``order``
    are scratch arrays at least as long as ``size``. Returns the bytes that overflow. When everything
    fits, or nothing can, no order is needed and none is computed.
    """
    return spill_first_n(size.shape[0], size, read, capacity, density, order, spill)


@nb.njit(cache=True, inline="always")
def spill_first_n(n, size, read, capacity, density, order, spill):
    """`spill_by_density` on the first n items of the arrays (no slicing, for hot loops; inlined, so a
    kernel calling it stays free of calls that take arrays)."""
    total = 0.0
    for j in range(n):
        total += size[nowrap(j)]
    if total <= capacity or capacity <= 0.0:
        spill_all = capacity <= 0.0 and total > capacity
        for j in range(n):
            spill[nowrap(j)] = 1.0 if spill_all and size[nowrap(j)] > 0.0 else 0.0
        return total if spill_all else 0.0
    ordered = True
    for j in range(n):
        density[nowrap(j)] = read[nowrap(j)] / size[nowrap(j)] if size[nowrap(j)] > 0.0 else np.inf
        ordered = ordered and density[nowrap(j)] == density[nowrap(j)]
    if n > MERGE_MIN and ordered:
        merge_order(n, density, order)
    else:
        for j in range(n):
            k = j
            while k > 0 and density[nowrap(order[nowrap(k - 1)])] < density[nowrap(j)]:
                order[nowrap(k)] = order[nowrap(k - 1)]
                k -= 1
            order[nowrap(k)] = j
    return fill_by_order(n, order, size, capacity, spill)


@nb.njit(cache=True, inline="always")
def fill_by_order(n, order, size, capacity, spill):
    """Fill ``capacity`` with the first n items in ``order`` (densest first): each item's ``spill`` is the
    fraction of it beyond what is left (0 for a size of 0); returns the bytes that do not fit. The fill of
    `spill_first_n`, shared with a re-placement that merged its order (dse.model.hbm_placement)."""
    free = capacity
    overflow = 0.0
    for x in range(n):
        j = order[nowrap(x)]
        if size[nowrap(j)] <= 0.0:
            spill[nowrap(j)] = 0.0
        elif free >= size[nowrap(j)]:
            spill[nowrap(j)] = 0.0
            free -= size[nowrap(j)]
        else:
            left = size[nowrap(j)] - max(free, 0.0)
            spill[nowrap(j)] = left / size[nowrap(j)]
            overflow += left
            free = 0.0
    return overflow


@nb.njit(cache=True)
def place_design(seg_start: np.ndarray, size: np.ndarray, read: np.ndarray, capacity: np.ndarray,
                 shared_capacity: float):
    """One design: local tiers per chiplet, then the shared tier for every chiplet's overflow.

    Returns (frac[n, T + 2], short_bytes): columns 0..T-1 local tiers, T shared, T+1 unplaced.
    """
    n = size.shape[0]
    T = capacity.shape[1]
    frac = np.zeros((n, T + 2))
    for s in range(seg_start.shape[0] - 1):
        a, b = seg_start[s], seg_start[s + 1]
        if b > a:
            local = place_by_density(size[a:b], read[a:b], capacity[s])
            frac[a:b, : T + 1] = local
    overflow = np.zeros(n)
    for j in range(n):
        overflow[j] = frac[j, T] * size[j]
        frac[j, T] = 0.0
    shared = np.array([shared_capacity])
    left = overflow.copy()
    _fill(_density_order(size, read), size, frac[:, T:], left, shared, 0)
    short = 0.0
    for j in range(n):
        if left[j] > 0.0:
            frac[j, T + 1] = left[j] / size[j]
            short += left[j]
    return frac, short


@nb.njit(cache=True)
def place_population(design_start: np.ndarray, seg_start: np.ndarray, size: np.ndarray, read: np.ndarray,
                     capacity: np.ndarray, shared_capacity: np.ndarray):
    """`place_design` for P designs: design p owns segments ``design_start[p]:design_start[p + 1]``.

    ``seg_start`` (global item offsets, length S + 1) and ``capacity[S, T]`` list every design's
    chiplets one after another. Returns (frac[n, T + 2], short_bytes[P]).
    """
    P = design_start.shape[0] - 1
    T = capacity.shape[1]
    frac = np.zeros((size.shape[0], T + 2))
    short = np.zeros(P)
    for p in range(P):
        s0, s1 = design_start[p], design_start[p + 1]
        a, b = seg_start[s0], seg_start[s1]
        local_start = seg_start[s0 : s1 + 1] - a
        f, short[p] = place_design(local_start, size[a:b], read[a:b], capacity[s0:s1], shared_capacity[p])
        frac[a:b] = f
    return frac, short


@nb.njit(cache=True)
def proportional_spill(size: np.ndarray, capacity: float) -> np.ndarray:
    """The naive rule: every item spills the same fraction ``(stored - capacity) / stored``.

    Returns frac[n, 2] (column 0 the fast tier, column 1 the overflow); the baseline hot-first
    placement is compared against.
    """
    n = size.shape[0]
    stored = size.sum()
    spill = (stored - capacity) / stored if stored > capacity and stored > 0.0 else 0.0
    frac = np.empty((n, 2))
    for j in range(n):
        frac[j, 0] = 1.0 - spill
        frac[j, 1] = spill
    return frac


@nb.njit(cache=True)
def tier_bytes(frac: np.ndarray, amount: np.ndarray) -> np.ndarray:
    """Per tier, the sum over items of ``amount[j] x frac[j, t]`` (bytes stored, or bytes read per step)."""
    out = np.zeros(frac.shape[1])
    for j in range(frac.shape[0]):
        for t in range(frac.shape[1]):
            out[t] += amount[j] * frac[j, t]
    return out
