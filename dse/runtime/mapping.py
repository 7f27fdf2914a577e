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

    @classmethod
    def from_tables(cls, tables: EvalTables) -> "ExpertGroups":
        groups: dict[str, list[int]] = defaultdict(list)
        for u, (name, kind) in enumerate(zip(tables.unit_names, tables.unit_kind)):
            if kind == EXPERT:
                groups[name.rpartition(".")[0]].append(u)
        idx = list(groups.values())
        return cls(names=[[tables.unit_names[u] for u in g] for g in idx],
                   q=[np.asarray(tables.unit_selection[g], float) for g in idx],
                   weight_bytes=[np.asarray(tables.unit_capacity_bytes[g], float) for g in idx])

    def identity(self) -> list[np.ndarray]:
        """The study's own popularity: no expert relabelled."""
        return [np.arange(len(n)) for n in self.names]


def with_placement(design: Design, placement: dict[str, list[int]]) -> Design:
    """``design`` with another unit placement (same package)."""
    return dataclasses.replace(design, chiplets=list(design.chiplets), hbm_stacks=list(design.hbm_stacks),
                               placement={u: list(s) for u, s in placement.items()})


def relabelled(design: Design, groups: ExpertGroups, perm: list[np.ndarray]) -> Design:
    """The design that, at the study's popularity, costs what ``design`` costs at popularity ``perm``."""
    placement = {u: list(s) for u, s in design.placement.items()}
    for names, p in zip(groups.names, perm):
        for i, name in enumerate(names):
            placement[names[p[i]]] = list(design.placement[name])
    return with_placement(design, placement)


def chiplet_loads(placement: dict[str, list[int]], groups: ExpertGroups, perm: list[np.ndarray],
                  chiplets: int) -> np.ndarray:
    """``[G, chiplets]``: expected tokens-selections per token each chiplet serves of each layer (a copy of
    an expert takes an equal share of its tokens), at popularity ``perm``."""
    out = np.zeros((len(groups.names), chiplets))
    for g, (names, q, p) in enumerate(zip(groups.names, groups.q, perm)):
        for i, name in enumerate(names):
            where = placement[name]
            for s in where:
                out[g, s] += q[p[i]] / len(where)
    return out


def imbalance(placement: dict[str, list[int]], groups: ExpertGroups, perm: list[np.ndarray],
              chiplets: int) -> float:
    """Mean over MoE layers of max / mean load of the chiplets holding the layer's experts (1: balanced)."""
    loads = chiplet_loads(placement, groups, perm, chiplets)
    ratios = []
    for row in loads:
        held = row[row > 0]
        if held.size:
            ratios.append(held.max() / held.mean())
    return float(np.mean(ratios)) if ratios else 1.0


def moved_copies(old: dict[str, list[int]], new: dict[str, list[int]]) -> list[tuple[str, int, list[int]]]:
    """Copies ``new`` places where ``old`` had none: (unit, destination slot, slots it can be copied
    from: the unit's copies in ``old``)."""
    out = []
    for unit, slots in new.items():
        before = old.get(unit, [])
        out.extend((unit, s, list(before)) for s in slots if s not in before)
    return out
