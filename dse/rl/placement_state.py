"""Which chiplet may take the next unit: the action mask of dse/ChipletMapping-v0.

A placement is feasible for the evaluator when the bytes its chiplets' HBM cannot hold fit the package's
DDR (per chiplet the overflow is max(0, stored - HBM capacity); dse.model.perf_model) and, for a
one-to-one mapping, no two routed experts share a chiplet. A slot is allowed for the next unit when,
after placing it there, the units still to come can be completed feasibly by the greedy rule (each on
the chiplet with the most free HBM, an expert of a one-to-one mapping on a chiplet without one). The
greedy's own choice always keeps the state completable, so every reachable state has an allowed action
and every finished episode is feasible (tests/test_rl.py checks this against the evaluator).
"""
from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True)
def _added_spill(free, size):
    """Overflow bytes a unit of ``size`` adds to a chiplet with ``free`` HBM bytes (negative: overflowing)."""
    return max(size - max(free, 0.0), 0.0)


@nb.njit(cache=True)
def completable(free, spill, ddr, sizes, experts, start, taken, n, one_to_one):
    """Whether units ``start..`` (``sizes``, ``experts``) can follow the greedy rule from HBM ``free`` per
    slot, overflow ``spill`` so far and expert slots ``taken`` with the overflow within ``ddr`` bytes."""
    f = free[:n].copy()
    t = taken[:n].copy()
    s = spill
    for u in range(start, sizes.shape[0]):
        best = -1
        for i in range(n):
            if one_to_one and experts[u] and t[i]:
                continue
            if best < 0 or f[i] > f[best]:
                best = i
        if best < 0:
            return False
        s += _added_spill(f[best], sizes[u])
        f[best] -= sizes[u]
        if one_to_one and experts[u]:
            t[best] = True
        if s > ddr:
            return False
    return s <= ddr


@nb.njit(cache=True)
def mask_for(u, free, spill, ddr, sizes, experts, taken, n, one_to_one, out):
    """``out[i]``: whether slot i may take unit u (module docstring); slots from n on never may."""
    out[:] = False
    for i in range(n):
        if one_to_one and experts[u] and taken[i]:
            continue
        extra = _added_spill(free[i], sizes[u])
        if spill + extra > ddr:
            continue
        free[i] -= sizes[u]
        was = taken[i]
        if one_to_one and experts[u]:
            taken[i] = True
        out[i] = completable(free, spill + extra, ddr, sizes, experts, u + 1, taken, n, one_to_one)
        free[i] += sizes[u]
        taken[i] = was
    return out


class PlacementState:
    """Units placed so far on one package: HBM free per slot, overflow, expert slots, load and bytes."""

    def __init__(self, capacity: np.ndarray, ddr_bytes: float, n: int, sizes: np.ndarray, experts: np.ndarray,
                 one_to_one: bool):
        self.capacity, self.ddr, self.n = capacity.astype(float), float(ddr_bytes), int(n)
        self.sizes, self.experts, self.one_to_one = sizes, experts, bool(one_to_one)
        self.free = self.capacity.copy()
        self.spill = 0.0
        self.taken = np.zeros(len(capacity), np.bool_)
        self.slot_of = np.full(len(sizes), -1, np.int64)
        self.step = 0
        self._mask = np.zeros(len(capacity), np.bool_)

    def feasible_start(self) -> bool:
        return bool(completable(self.free, self.spill, self.ddr, self.sizes, self.experts, 0, self.taken, self.n,
                                self.one_to_one))

    def mask(self) -> np.ndarray:
        return mask_for(self.step, self.free, self.spill, self.ddr, self.sizes, self.experts, self.taken, self.n,
                        self.one_to_one, self._mask).copy()

    def place(self, slot: int) -> None:
        u = self.step
        self.spill += _added_spill(self.free[slot], self.sizes[u])
        self.free[slot] -= self.sizes[u]
        if self.one_to_one and self.experts[u]:
            self.taken[slot] = True
        self.slot_of[u] = slot
        self.step += 1
