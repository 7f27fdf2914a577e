"""A design's expert mapping as the runtime sees it: the experts of each MoE layer (a group), what
each chiplet carries of a layer's tokens, the imbalance a router's counters would show, popularity as a
relabelling of the study's experts, and the copies one mapping moves against another.

Popularity drift keeps each layer's popularity shape and moves which experts carry it (dse.runtime.
popularity): window w's popularity is ``q_w[i] = q[perm_w[i]]`` with ``q`` the study's per-token
selection probabilities (`EvalTables.unit_selection`). Since a layer's experts are identical units
except for their popularity, costing mapping D at ``q_w`` is costing, at the study's own popularity,
the design that puts expert ``perm_w[i]`` where D puts expert ``i`` (`relabelled`): the study's evaluator,
unchanged, prices every window, and all windows are one population."""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import NamedTuple

import numba as nb
import numpy as np

from ..model.tables import UNIT_KINDS, EvalTables
from ..study.space import Design

EXPERT = UNIT_KINDS.index("expert")


@dataclasses.dataclass
class ExpertGroups:
    """The routed experts of a study by MoE layer: ``names[g]`` the unit names of group g in expert
    order, ``q[g]`` their per-token selection probabilities, ``weight_bytes[g]`` each one's weights."""

    names: list[list[str]]
    q: list[np.ndarray]
    weight_bytes: list[np.ndarray]
    units: list[np.ndarray] = dataclasses.field(default_factory=list)    # each one's unit index in the tables
    packings: dict = dataclasses.field(default_factory=dict, repr=False)  # EPLB's, by content (policies.eplb)
    packed: int = 0                     # packings computed (the rest were remembered)
    perm_keys: dict = dataclasses.field(default_factory=dict, repr=False)    # id(perm) -> (perm, its key)

    @classmethod
    def from_tables(cls, tables: EvalTables) -> "ExpertGroups":
        groups: dict[str, list[int]] = defaultdict(list)
        for u, (name, kind) in enumerate(zip(tables.unit_names, tables.unit_kind)):
            if kind == EXPERT:
                groups[name.rpartition(".")[0]].append(u)
        idx = list(groups.values())
        return cls(names=[[tables.unit_names[u] for u in g] for g in idx],
                   q=[np.asarray(tables.unit_selection[g], float) for g in idx],
                   weight_bytes=[np.asarray(tables.unit_capacity_bytes[g], float) for g in idx],
                   units=[np.asarray(g, np.int64) for g in idx])

    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every expert's unit index, the layers' offsets into them and their selection probabilities,
        in group order (built once)."""
        if not hasattr(self, "_flat"):
            sizes = [len(n) for n in self.names]
            self._flat = (np.concatenate(self.units) if self.units else np.zeros(0, np.int64),
                          np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
                          np.concatenate(self.q).astype(float) if self.q else np.zeros(0))
        return self._flat

    def load(self, perm: list[np.ndarray]) -> np.ndarray:
        """Each expert's selections per token at popularity ``perm`` (a relabelling), in group order;
        remembered per ``perm`` object (a scenario's popularities are built once and never changed)."""
        if not hasattr(self, "_loads"):
            self._loads: dict[int, tuple[list, np.ndarray]] = {}
        hit = self._loads.get(id(perm))
        if hit is not None and hit[0] is perm:
            return hit[1]
        _, offsets, q = self.flat()
        out = q[np.concatenate([p + o for p, o in zip(perm, offsets[:-1])])] if perm else q
        self._loads[id(perm)] = (perm, out)
        return out

    def key(self, perm: list[np.ndarray]) -> bytes:
        """`perm_key` of ``perm``, remembered per ``perm`` object (as `load`)."""
        hit = self.perm_keys.get(id(perm))
        if hit is None or hit[0] is not perm:
            hit = self.perm_keys[id(perm)] = (perm, perm_key(perm))
        return hit[1]

    def identity(self) -> list[np.ndarray]:
        """The study's own popularity: no expert relabelled."""
        return [np.arange(len(n)) for n in self.names]


def with_placement(design: Design, placement: dict[str, list[int]]) -> Design:
    """``design`` with another unit placement (same package; the placement's lists are shared, never
    changed in place)."""
    return dataclasses.replace(design, chiplets=list(design.chiplets), hbm_stacks=list(design.hbm_stacks),
                               placement=dict(placement))


def relabelled(design: Design, groups: ExpertGroups, perm: list[np.ndarray]) -> Design:
    """The design that, at the study's popularity, costs what ``design`` costs at popularity ``perm``."""
    placement = dict(design.placement)
    for names, p in zip(groups.names, perm):
        for i, name in enumerate(names):
            placement[names[p[i]]] = design.placement[name]
    return with_placement(design, placement)


class Relabel:
    """`relabelled` on kernel arrays (slots ``[U, C]``, copies ``[U]``): unit ``units[g][perm[i]]`` takes
    what unit ``units[g][i]`` holds; ``at(perm)`` the (source, destination) unit indices, built once per
    popularity."""

    def __init__(self, groups: ExpertGroups):
        self.groups = groups
        self.src = np.concatenate(groups.units) if groups.units else np.zeros(0, np.int64)
        self.memo: dict[bytes, np.ndarray] = {}
        self.by_id: dict[int, tuple[list, np.ndarray]] = {}

    def dst(self, perm: list[np.ndarray]) -> np.ndarray:
        hit = self.by_id.get(id(perm))          # a scenario's popularities are built once, never changed
        if hit is not None and hit[0] is perm:
            return hit[1]
        key = perm_key(perm)
        if key not in self.memo:
            self.memo[key] = np.concatenate([u[p] for u, p in zip(self.groups.units, perm)]) if perm \
                else np.zeros(0, np.int64)
        self.by_id[id(perm)] = (perm, self.memo[key])
        return self.memo[key]

    def __call__(self, slots: np.ndarray, ncopy: np.ndarray, perm: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        dst = self.dst(perm)
        s2, n2 = slots.copy(), ncopy.copy()
        s2[dst], n2[dst] = slots[self.src], ncopy[self.src]
        return s2, n2


def perm_key(perm: list[np.ndarray]) -> bytes:
    """A popularity relabelling as a hashable key."""
    return np.concatenate(perm).astype(np.int32).tobytes() if perm else b""


class SegmentKey(NamedTuple):
    """What a segment's step depends on (equal keys, equal steps; dse.runtime.plan): the version of the
    mapping serving (0: the design's own), the popularity (`perm_key`), the chiplets counted failed (down
    with no spare in, or out of HBM), the links down, and the (chiplet, stacks lost) pairs."""

    version: int
    popularity: bytes
    failed: frozenset
    links: frozenset
    stacks: frozenset


class Placement(NamedTuple):
    """A mapping as kernel arrays: unit slots ``[U, C]`` (-1 padded) and copies ``[U]``. The runtime tells
    mappings apart by identity (a policy's new mapping is a new object, even when equal)."""

    slots: np.ndarray
    ncopy: np.ndarray

    def rows(self, units: np.ndarray) -> "Placement":
        return Placement(self.slots[units], self.ncopy[units])

    def to_dict(self, unit_names: list[str]) -> dict[str, list[int]]:
        return {u: s[:c] for u, s, c in zip(unit_names, self.slots.tolist(), self.ncopy.tolist())}


@dataclasses.dataclass(frozen=True)
class SegmentMapping:
    """The design a segment costs as kernel arrays: unit slots ``[U, C]``, copies ``[U]``, HBM stacks per
    chiplet ``[S]`` (less failed stacks), and the links down (priced by the evaluator's re-routing)."""

    slots: np.ndarray
    ncopy: np.ndarray
    stacks: np.ndarray
    links: frozenset


def placement_arrays(placement: dict[str, list[int]], unit_names: list[str], width: int = 1) -> Placement:
    """``placement`` (every unit of ``unit_names``) as a `Placement` at least ``width`` copies wide."""
    lists = [placement[u] for u in unit_names]
    n = np.fromiter(map(len, lists), np.int64, len(lists))
    slots = np.full((len(lists), max(width, int(n.max(initial=1)))), -1, np.int64)
    slots[np.arange(len(lists)).repeat(n), np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)] = \
        [s for x in lists for s in x]
    return Placement(slots, n)


def on_chips(slots: np.ndarray, chips) -> np.ndarray:
    """Where ``slots`` names one of ``chips`` (a few: `np.isin` costs more)."""
    out = np.zeros(slots.shape, bool)
    for c in chips:
        out |= slots == c
    return out


def live_copies(p: Placement, failed: frozenset[int]) -> Placement:
    """``p`` with the copies on ``failed`` chiplets dropped (order kept)."""
    if not failed:
        return p
    valid = (np.arange(p.slots.shape[1])[None, :] < p.ncopy[:, None]) & ~on_chips(p.slots, failed)
    order = np.argsort(~valid, axis=1, kind="stable")
    slots = np.where(np.take_along_axis(valid, order, 1), np.take_along_axis(p.slots, order, 1), -1)
    return Placement(slots, valid.sum(axis=1))


def placement_imbalance(p: Placement, groups: ExpertGroups, perm: list[np.ndarray], chiplets: int,
                        memo: dict | None = None) -> float:
    """`imbalance` of a `Placement` (`imbalance_arrays` over the experts' rows); ``memo``: its imbalance
    per popularity while the placement stays the same object."""
    memo = {} if memo is None else memo
    if memo.get("placement") is not p:
        memo.clear()
        memo["placement"] = p
    key = groups.key(perm)
    if key not in memo:
        units, offsets, _ = groups.flat()
        memo[key] = float(imbalance_arrays(p.slots, p.ncopy, units, offsets, groups.load(perm), chiplets))
    return memo[key]


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


def imbalance(placement: dict[str, list[int]], groups: ExpertGroups, perm: list[np.ndarray],
              chiplets: int) -> float:
    """Mean over MoE layers of max / mean load of the chiplets holding the layer's experts (1: balanced),
    at popularity ``perm``: a copy of an expert takes an equal share of its tokens."""
    names = [n for g in groups.names for n in g]
    p = placement_arrays(placement, names)
    return float(imbalance_arrays(p.slots, p.ncopy, np.arange(len(names)), groups.flat()[1], groups.load(perm),
                                  chiplets))


def moved_copies(old: dict[str, list[int]], new: dict[str, list[int]]) -> list[tuple[str, int, list[int]]]:
    """Copies ``new`` places where ``old`` had none: (unit, destination slot, slots it can be copied
    from: the unit's copies in ``old``)."""
    out = []
    for unit, slots in new.items():
        before = old.get(unit, [])
        if slots is before:             # placements share the lists of units they leave alone
            continue
        out.extend((unit, s, before) for s in slots if s not in before)
    return out
