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
        p = self.planner
        slots, ncopy = serving
        stacks = self.stacks(down)
        if failed:
            held = ("holds", version, failed)
            if held not in self.memo:
                valid = np.arange(slots.shape[1])[None, :] < ncopy[:, None]
                self.memo[held] = bool((valid & on_chips(slots, failed)).any())
        if not failed or not self.memo[held]:
            return SegmentMapping(*p.relabel(slots, ncopy, perm), stacks, down.links), 1.0
        key = ("remap", version, failed, down.stacks)
        if key not in self.memo:
            self.memo[key] = self.remapped(slots, ncopy, stacks, failed)
        ok, new_slots, new_ncopy = self.memo[key]
        if not ok:
            return None, 0.0
        gone = ("orphans", version, failed)
        if gone not in self.memo:
            self.memo[gone] = orphans(slots, ncopy, failed, p.is_expert)
        orphan, q_unit = self.memo[gone], p.q_unit(perm)
        lost = 1.0 if orphan is None else (float(q_unit[orphan].sum() / q_unit.sum()) if q_unit.sum() else 0.0)
        return SegmentMapping(*p.relabel(new_slots, new_ncopy, perm), stacks, down.links), 1.0 - lost

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
        serves, for each (key tail, window, what is down) of ``items``: where nothing failed, a relabelling
        (all at once, `relabelled_all`), else `effective` (the evaluator's re-mapping)."""
        mappings, selected = [], []
        up = [k for k, (tail, _, _) in enumerate(items) if not tail[1]]
        slots, ncopy = self.relabelled_all([items[k][0][0] for k in up])
        row = {k: r for r, k in enumerate(up)}
        for k, (tail, w, now) in enumerate(items):
            if k in row:
                mappings.append(SegmentMapping(slots[row[k]], ncopy[row[k]], self.stacks(now), now.links))
                selected.append(1.0)
            else:
                eff, sel = self.effective(0, self.home, tail[1], tail[0], now)
                mappings.append(eff)
                selected.append(sel)
        return mappings, selected

    def relabelled_all(self, perms: list[Popularity]) -> tuple[np.ndarray, np.ndarray]:
        """The design's own mapping relabelled to each popularity of ``perms`` at once (row k for
        ``perms[k]``): slots ``[K, U, C]``, copies ``[K, U]``."""
        home, relabel = self.home, self.planner.relabel
        n = len(home.ncopy)
        rows = np.stack([relabel.source(p, n) for p in perms]) if perms else np.zeros((0, n), np.int64)
        return home.slots[rows], home.ncopy[rows]
