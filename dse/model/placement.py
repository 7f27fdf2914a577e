"""Decode decision vectors into package and mapping arrays (a repair: every vector is valid).

* The unit's primary slot is its gene modulo N (the mesh may be smaller than the largest one).
* c copies (or shards) of a unit sit ``N // c`` slots apart, so they are always on distinct chiplets.
* one-to-one: experts must not share a chiplet; a taken slot moves the expert to the next free slot,
  and experts left without a chiplet are counted (a constraint violation, not an exception).
* HBM stacks are spread evenly over the M slots whose kind has an HBM interface (``kind_hbm_phy``), first
  such slot first: ``H // M + (j < H % M)`` for the j-th; none where M = 0 (a package of Groq LPUs holds no
  HBM whatever the gene says). Where every kind has one, M = N, the spread of old.
"""
from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, inline="always")
def modulo(x, n):
    """x mod n (n > 0) without an integer division in the usual case 0 <= x < 2n."""
    if 0 <= x < n:
        return x
    if n <= x < 2 * n:
        return x - n
    return x % n


def spread_stacks(hbm: int, kinds, kind_hbm_phy) -> list[int]:
    """``hbm`` stacks over slots of ``kinds`` as `decode_population` spreads them (module docstring)."""
    takes = [bool(kind_hbm_phy[k]) for k in kinds]
    m = sum(takes)
    out, j = [], 0
    for t in takes:
        out.append(hbm // m + (1 if j < hbm % m else 0) if t else 0)
        j += t
    return out


@nb.njit(cache=True, inline="always")
def decode_package(X, p, o_rows, o_cols, o_kind, o_hbm, o_ddr, max_slots, kind_hbm_phy, rows, cols, kind, stacks, ddr):
    """Design p's package (mesh, kinds, HBM stacks spread as the module docstring says, DDR channels) into row
    p of the arrays (``stacks`` zero beforehand); returns its chiplet count."""
    rows[p] = X[p, o_rows]
    cols[p] = X[p, o_cols]
    n = rows[p] * cols[p]
    for s in range(max_slots):
        kind[p, s] = X[p, o_kind + s]
    h = X[p, o_hbm]
    m = 0
    for s in range(n):
        if kind_hbm_phy[kind[p, s]]:
            m += 1
    j = 0
    for s in range(n):
        if kind_hbm_phy[kind[p, s]]:
            stacks[p, s] = h // m + (1 if j < h % m else 0)
            j += 1
    ddr[p] = X[p, o_ddr]
    return n


@nb.njit(cache=True)
def decode_packages(X, o_rows, o_cols, o_kind, o_hbm, o_ddr, max_slots, kind_hbm_phy):
    """The packages of `decode_population` alone (rows, cols, kind, stacks, ddr), without the units' slots:
    for a caller that reads only the package (dse.system.evaluator's carbon; a population's slots are
    [P, U, copies], most of a decoding's time and memory)."""
    P = X.shape[0]
    rows = np.empty(P, np.int64)
    cols = np.empty(P, np.int64)
    kind = np.zeros((P, max_slots), np.int64)
    stacks = np.zeros((P, max_slots), np.int64)
    ddr = np.empty(P, np.int64)
    for p in range(P):
        decode_package(X, p, o_rows, o_cols, o_kind, o_hbm, o_ddr, max_slots, kind_hbm_phy, rows, cols, kind, stacks,
                       ddr)
    return rows, cols, kind, stacks, ddr


@nb.njit(cache=True)
def decode_population(X, o_rows, o_cols, o_kind, o_hbm, o_ddr, o_place, o_copies, max_slots, n_units, max_copies,
                      unit_is_expert, exclusive_experts, kind_hbm_phy):
    """The packages (`decode_package`) and unit slots of the decision vectors ``X`` (module docstring).

    Each design's residues ``x mod n`` for x < 2 x ``max_slots`` are tabled first (``mod``): a gene and a
    copy's slot (``first + r x stride`` < 2n) are then read from the table, not by `modulo`'s branches, which a
    random population mispredicts; every copy index up to ``max_copies`` is written (-1 past the unit's
    count) rather than looped over the count. The same arrays as taking `modulo` of each (issue 52, ninth
    round: 3.3 -> 1.5 us a design for issue 7's benchmark, tests/test_decode_tables.py)."""
    P = X.shape[0]
    rows = np.empty(P, np.int64)
    cols = np.empty(P, np.int64)
    kind = np.zeros((P, max_slots), np.int64)
    stacks = np.zeros((P, max_slots), np.int64)
    ddr = np.empty(P, np.int64)
    slots = np.empty((P, n_units, max_copies), np.int64)
    ncopy = np.empty((P, n_units), np.int64)
    unplaced = np.zeros(P, np.int64)
    taken = np.zeros(max_slots, np.bool_)
    stride_of = np.ones(max_copies + 1, np.int64)       # slots between copies, per copy count
    M = 2 * max_slots
    mod = np.empty(M, np.int64)                         # x mod n for 0 <= x < M
    for p in range(P):
        n = decode_package(X, p, o_rows, o_cols, o_kind, o_hbm, o_ddr, max_slots, kind_hbm_phy, rows, cols, kind,
                           stacks, ddr)
        taken[:] = False
        for c in range(1, max_copies + 1):
            stride_of[c] = max(n // c, 1)
        for x in range(M):
            mod[x] = modulo(x, n)
        for u in range(n_units):
            g = X[p, o_place + u]
            first = mod[g] if 0 <= g < M else modulo(g, n)
            c = min(X[p, o_copies + u], n, max_copies)
            if exclusive_experts and unit_is_expert[u]:
                c = 1
                probe = 0
                while probe < n and taken[modulo(first + probe, n)]:
                    probe += 1
                if probe == n:
                    unplaced[p] += 1
                else:
                    first = modulo(first + probe, n)
                    taken[first] = True
            ncopy[p, u] = c
            stride = stride_of[c]
            for r in range(max_copies):         # every index written: no loop exit that depends on c
                y = first + r * stride
                z = mod[y] if y < M else modulo(y, n)
                slots[p, u, r] = z if r < c else -1
    return rows, cols, kind, stacks, ddr, slots, ncopy, unplaced
