"""A design's expert mapping as the runtime sees it: the experts of each MoE layer (a group), popularity
as a relabelling of the study's experts, and mappings as kernel arrays (`Placement`, `SegmentMapping`);
the imbalance a router's counters would show is dse.runtime.imbalance.

Popularity drift keeps each layer's popularity shape and moves which experts carry it (dse.runtime.
popularity): window w's popularity is ``q_w[i] = q[perm_w[i]]`` with ``q`` the study's per-token
selection probabilities (`EvalTables.unit_selection`). Since a layer's experts are identical units
except for their popularity, costing mapping D at ``q_w`` is costing, at the study's own popularity,
the design that puts expert ``perm_w[i]`` where D puts expert ``i`` (`relabelled`): the study's evaluator,
unchanged, prices every window, and all windows are one population. Popularities are values
(dse.runtime.popularity.Popularity): what is remembered per popularity is keyed by it."""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from itertools import chain
from typing import NamedTuple

import numpy as np

from ..model.tables import UNIT_KINDS, EvalTables
from .popularity import Popularity

EXPERT = UNIT_KINDS.index("expert")


@dataclasses.dataclass
class ExpertGroups:
    """The routed experts of a study by MoE layer: ``names[g]`` the unit names of group g in expert
    order, ``q[g]`` their per-token selection probabilities, ``weight_bytes[g]`` each one's weights,
    ``units[g]`` their unit indices in the tables; flattened in group order: ``flat_units``, the layers'
    ``offsets`` into them and ``flat_q``."""

    names: list[list[str]]
    q: list[np.ndarray]
    weight_bytes: list[np.ndarray]
    units: list[np.ndarray]
    flat_units: np.ndarray = dataclasses.field(init=False, repr=False)
    offsets: np.ndarray = dataclasses.field(init=False, repr=False)
    flat_q: np.ndarray = dataclasses.field(init=False, repr=False)
    loads: dict = dataclasses.field(default_factory=dict, repr=False)     # Popularity -> `load`
    packed: int = 0                     # EPLB's packings computed (policies.eplb)

    def __post_init__(self):
        sizes = [len(n) for n in self.names]
        self.flat_units = np.concatenate(self.units).astype(np.int64) if self.units else np.zeros(0, np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.flat_q = np.concatenate(self.q).astype(float) if self.q else np.zeros(0)

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
        """Every expert's unit index, the layers' offsets into them and their selection probabilities."""
        return self.flat_units, self.offsets, self.flat_q

    def load(self, perm: Popularity) -> np.ndarray:
        """Each expert's selections per token at popularity ``perm``, in group order (once per value)."""
        if perm not in self.loads:
            self.loads[perm] = self.flat_q[np.concatenate([p + o for p, o in zip(perm, self.offsets[:-1])])] \
                if perm else self.flat_q
        return self.loads[perm]

    def identity(self) -> Popularity:
        """The study's own popularity: no expert relabelled."""
        return Popularity.identity([len(n) for n in self.names])


class Relabel:
    """A popularity as a relabelling of kernel arrays (slots ``[U, C]``, copies ``[U]``): unit
    ``units[g][perm[i]]`` takes what unit ``units[g][i]`` holds; ``dst(perm)`` the destination unit
    indices (``src`` the sources), once per popularity (a value). Costing a mapping at popularity ``perm``
    is costing its relabelling at the study's (module docstring)."""

    def __init__(self, groups: ExpertGroups):
        self.groups = groups
        self.src = groups.flat_units
        self.memo: dict[Popularity, np.ndarray] = {}
        self.rows: dict[tuple, np.ndarray] = {}
        self.many: dict[tuple, np.ndarray] = {}

    def dst(self, perm: Popularity) -> np.ndarray:
        if perm not in self.memo:
            self.memo[perm] = np.concatenate([u[p] for u, p in zip(self.groups.units, perm)]) if perm \
                else np.zeros(0, np.int64)
        return self.memo[perm]

    def source(self, perm: Popularity, n_units: int) -> np.ndarray:
        """The relabelling of ``n_units`` rows as one gather: row ``u`` of the result is row
        ``source(perm, n)[u]`` of the mapping (``src`` at ``dst``, every other unit its own), once per
        popularity."""
        if (perm, n_units) not in self.rows:
            rows = np.arange(n_units)
            rows[self.dst(perm)] = self.src
            self.rows[perm, n_units] = rows
        return self.rows[perm, n_units]

    def sources(self, perms: tuple, n_units: int) -> np.ndarray:
        """`source` of each popularity of ``perms`` as rows ``[K, n_units]``, once per value of these."""
        if (perms, n_units) not in self.many:
            self.many[perms, n_units] = np.stack([self.source(p, n_units) for p in perms]) if perms \
                else np.zeros((0, n_units), np.int64)
        return self.many[perms, n_units]

    def __call__(self, slots: np.ndarray, ncopy: np.ndarray, perm: Popularity) -> tuple[np.ndarray, np.ndarray]:
        rows = self.source(perm, len(ncopy))
        return slots[rows], ncopy[rows]


class SegmentKey(NamedTuple):
    """What a segment's step depends on (equal keys, equal steps; dse.runtime.plan): the version of the
    mapping serving (0: the design's own), the popularity (a `Popularity`), the chiplets counted failed (down
    with no spare in, or out of HBM), the links down, and the (chiplet, stacks lost) pairs."""

    version: int
    popularity: Popularity
    failed: frozenset
    links: frozenset
    stacks: frozenset


class Placement(NamedTuple):
    """A mapping as kernel arrays: unit slots ``[U, C]`` (-1 padded) and copies ``[U]``. The runtime
    numbers the mappings that serve (dse.runtime.run_state.RunState.version): a policy's new mapping is
    a new version, even when equal."""

    slots: np.ndarray
    ncopy: np.ndarray

    def rows(self, units: np.ndarray) -> "Placement":
        return Placement(self.slots[units], self.ncopy[units])

    def to_dict(self, unit_names: list[str]) -> dict[str, list[int]]:
        return {u: s[:c] for u, s, c in zip(unit_names, self.slots.tolist(), self.ncopy.tolist())}


class SegmentMapping(NamedTuple):
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
        np.fromiter(chain.from_iterable(lists), np.int64, int(n.sum()))
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
