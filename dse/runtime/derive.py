"""The design a segment costs, derived from the mapping serving it (docs/runtime.md): the mapping
relabelled to the window's popularity (dse.runtime.mapping.Relabel), after the package evaluator's
re-mapping when chiplets are down (`Evaluator.remapped_arrays`: surviving replicas take over, orphans on
the survivor with most free HBM), on the HBM stacks left, with the links down; and the share of expert
selections it serves (units with no live copy lose theirs: a lost non-expert unit serves nothing).

`DesignMappings` holds one design's: its kernel arrays (``base``, given by the caller or built from the
record), its own mapping (``home``) and what it derived, by value (mapping version, failed set, stacks)."""
from __future__ import annotations

import numpy as np

from ..model.contract import DecodedDesigns
from ..model.records import design_arrays
from ..study.space import Design
from .failures import Down
from .mapping import Placement, SegmentMapping, on_chips
from .popularity import Popularity


def orphans(slots: np.ndarray, ncopy: np.ndarray, failed: frozenset[int], experts: np.ndarray) -> np.ndarray | None:
    """Units with no live copy with the chiplets ``failed`` down; None when a non-expert unit is among them."""
    width = np.arange(slots.shape[1])[None, :] < ncopy[:, None]
    live = (width & ~on_chips(slots, failed)).any(axis=1)
    orphan = ~live & (ncopy > 0)
    return None if (orphan & ~experts).any() else orphan


class DesignMappings:
    """One design's segment mappings (module docstring); ``planner``: its package variant's
    (dse.runtime.plan.Planner: evaluator, experts, relabelling, scratch)."""

    def __init__(self, planner, design: Design, base: DecodedDesigns | None = None):
        self.planner, self.design = planner, design
        self.base = base if base is not None else \
            design_arrays([design], planner.tables, planner.ev.space.max_slots, planner.max_copies)
        self.home = Placement(self.base.slots[0], self.base.ncopy[0])
        self.memo: dict = {}

    def stacks(self, down: Down) -> np.ndarray:
        """The HBM stacks per chiplet left with ``down``'s lost (the design's own array, never changed, when
        none is lost)."""
        if not down.stacks:
            return self.base.stacks[0]
        stacks = self.base.stacks[0].copy()
        for c, k in down.stacks:
            stacks[c] -= k
        return stacks

    def effective(self, version: int, serving: Placement, failed: frozenset[int], perm: Popularity,
                  down: Down) -> tuple[SegmentMapping | None, float]:
        """The design a segment costs (`SegmentMapping`, relabelled to ``perm``; None: nothing survives)
        and the share of selections it serves; the re-mapping once per mapping version, failed set and
        stacks (popularity only relabels it and weighs the units lost)."""
        (mapping,), (share,) = self.effective_all(version, serving, failed, [perm], down)
        return mapping, share

    def effective_all(self, version: int, serving: Placement, failed: frozenset[int], perms: list[Popularity],
                      down: Down) -> tuple[list, list[float]]:
        """`effective` at each popularity of ``perms`` (the same mapping, failed set and what is down): the
        re-mapping once, the relabellings as one gather (`relabelled`)."""
        p = self.planner
        slots, ncopy = serving
        stacks = self.stacks(down)
        if failed:
            held = ("holds", version, failed)
            if held not in self.memo:
                valid = np.arange(slots.shape[1])[None, :] < ncopy[:, None]
                self.memo[held] = bool((valid & on_chips(slots, failed)).any())
        if not failed or not self.memo[held]:
            rel_slots, rel_ncopy = self.relabelled(slots, ncopy, perms)
            return [SegmentMapping(a, b, stacks, down.links) for a, b in zip(rel_slots, rel_ncopy)], [1.0] * len(perms)
        key = ("remap", version, failed, down.stacks)
        if key not in self.memo:
            self.memo[key] = self.remapped(slots, ncopy, stacks, failed)
        ok, new_slots, new_ncopy = self.memo[key]
        if not ok:
            return [None] * len(perms), [0.0] * len(perms)
        gone = ("orphans", version, failed)
        if gone not in self.memo:
            self.memo[gone] = orphans(slots, ncopy, failed, p.is_expert)
        orphan, shares = self.memo[gone], []
        for perm in perms:
            q_unit = p.q_unit(perm)
            lost = 1.0 if orphan is None else (float(q_unit[orphan].sum() / q_unit.sum()) if q_unit.sum() else 0.0)
            shares.append(1.0 - lost)
        rel_slots, rel_ncopy = self.relabelled(new_slots, new_ncopy, perms)
        return [SegmentMapping(a, b, stacks, down.links) for a, b in zip(rel_slots, rel_ncopy)], shares

    def remapped(self, slots: np.ndarray, ncopy: np.ndarray, stacks: np.ndarray, failed: frozenset) -> tuple:
        """`Evaluator.remapped_arrays` of the design with mapping ``slots`` / ``ncopy`` on HBM ``stacks``
        after the chiplets ``failed`` die, once per value of these (a segment's re-mapping and the policy's
        of the same placement are one)."""
        key = ("remapped", slots.shape, slots.tobytes(), ncopy.tobytes(), stacks.tobytes(), failed)
        if key not in self.memo:
            p = self.planner
            one = self.base._replace(slots=slots[None], ncopy=ncopy[None], stacks=stacks[None])
            self.memo[key] = p.ev.remapped_arrays(one, sorted(failed), p.workspace(slots.shape[1]))
        return self.memo[key]

    def remap(self, placement: Placement, failed: frozenset) -> Placement | None:
        """``placement`` after the chiplets ``failed`` die (`Evaluator.remapped_arrays` on the design's own
        HBM stacks, `remapped`); None when nothing survives. The policies' re-mapping."""
        ok, slots, ncopy = self.remapped(placement.slots, placement.ncopy, self.base.stacks[0], failed)
        return Placement(slots.copy(), ncopy.copy()) if ok else None

    def own(self, items: list) -> tuple[list, list]:
        """The `SegmentMapping` of the design's own mapping (version 0) and the share of selections it
        serves, for each (key tail, window, what is down) of ``items``: `effective_all` per failed set and
        what is down (a relabelling where nothing failed), all popularities of each at once."""
        mappings, selected = [None] * len(items), [1.0] * len(items)
        groups: dict[tuple, list[int]] = {}
        for k, (tail, _, now) in enumerate(items):
            groups.setdefault((tail[1], now), []).append(k)
        for (failed, now), ks in groups.items():
            got, share = self.effective_all(0, self.home, failed, [items[k][0][0] for k in ks], now)
            for k, m, sel in zip(ks, got, share):
                mappings[k], selected[k] = m, sel
        return mappings, selected

    def relabelled(self, slots: np.ndarray, ncopy: np.ndarray, perms: list[Popularity]) -> tuple:
        """The mapping ``slots`` / ``ncopy`` relabelled to each popularity of ``perms`` (row k for
        ``perms[k]``; dse.runtime.mapping.Relabel): slots ``[K, U, C]``, copies ``[K, U]``, one gather."""
        relabel, n = self.planner.relabel, len(ncopy)
        if len(perms) == 1:
            rows = relabel.source(perms[0], n)[None]
        else:
            rows = np.stack([relabel.source(p, n) for p in perms]) if perms else np.zeros((0, n), np.int64)
        return slots[rows], ncopy[rows]
