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
from .mapping import Placement, Relabel, SegmentMapping, on_chips
from .popularity import Popularity
from .remap_all import Request, remap_many


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
        source, stacks, orphan = self.basis(version, serving, failed, down)
        if source is None:
            return [None] * len(perms), [0.0] * len(perms)
        rel_slots, rel_ncopy = self.relabelled(*source, perms)
        return [SegmentMapping(a, b, stacks, down.links) for a, b in zip(rel_slots, rel_ncopy)], \
            self.shares(orphan, perms)

    def holds(self, version: int, serving: Placement, failed: frozenset[int]) -> bool:
        """Whether mapping ``version`` (``serving``) has a copy on a chiplet of ``failed``."""
        held = ("holds", version, failed)
        if held not in self.memo:
            valid = np.arange(serving.slots.shape[1])[None, :] < serving.ncopy[:, None]
            self.memo[held] = bool((valid & on_chips(serving.slots, failed)).any())
        return self.memo[held]

    def basis(self, version: int, serving: Placement, failed: frozenset[int], down: Down) -> tuple:
        """What `effective_all` relabels: the mapping (slots, copies: ``serving``, or its re-mapping when a
        chiplet of ``failed`` holds a copy; None when nothing survives), the HBM stacks left, and the units
        left with no live copy (`orphans`; False: none lost)."""
        stacks = self.stacks(down)
        if not failed or not self.holds(version, serving, failed):
            return tuple(serving), stacks, False
        key = ("remap", version, failed, down.stacks)
        if key not in self.memo:
            self.memo[key] = self.remapped(serving.slots, serving.ncopy, stacks, failed)
        ok, new_slots, new_ncopy = self.memo[key]
        if not ok:
            return None, stacks, False
        gone = ("orphans", version, failed)
        if gone not in self.memo:
            self.memo[gone] = orphans(serving.slots, serving.ncopy, failed, self.planner.is_expert)
        return (new_slots, new_ncopy), stacks, self.memo[gone]

    def shares(self, orphan, perms: list[Popularity]) -> list[float]:
        """The share of selections served at each popularity of ``perms`` with the units ``orphan`` lost
        (False: none; None: a non-expert unit lost, nothing served)."""
        if orphan is False:
            return [1.0] * len(perms)
        out = []
        for perm in perms:
            q_unit = self.planner.q_unit(perm)
            lost = 1.0 if orphan is None else (float(q_unit[orphan].sum() / q_unit.sum()) if q_unit.sum() else 0.0)
            out.append(1.0 - lost)
        return out

    def request(self, version: int, serving: Placement, failed: frozenset[int], down: Down) -> Request | None:
        """The re-mapping `basis` would compute for these and has not yet (`remapped`'s, as a `Request`
        for `remap_many`), else None."""
        if not failed or not self.holds(version, serving, failed) or ("remap", version, failed, down.stacks) \
                in self.memo:
            return None
        stacks = self.stacks(down)
        if self.remap_key(serving.slots, serving.ncopy, stacks, failed) in self.memo:
            return None
        return Request(self.base, serving.slots, serving.ncopy, stacks, failed)

    @staticmethod
    def remap_key(slots: np.ndarray, ncopy: np.ndarray, stacks: np.ndarray, failed: frozenset) -> tuple:
        return ("remapped", slots.shape, slots.tobytes(), ncopy.tobytes(), stacks.tobytes(), failed)

    def remapped(self, slots: np.ndarray, ncopy: np.ndarray, stacks: np.ndarray, failed: frozenset) -> tuple:
        """`Evaluator.remapped_arrays` of the design with mapping ``slots`` / ``ncopy`` on HBM ``stacks``
        after the chiplets ``failed`` die, once per value of these (a segment's re-mapping and the policy's
        of the same placement are one)."""
        key = self.remap_key(slots, ncopy, stacks, failed)
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
        serves, for each (key tail, window, what is down) of ``items``: `own_all` of this design alone."""
        return own_all([self], [items])[0]

    def relabelled(self, slots: np.ndarray, ncopy: np.ndarray, perms: list[Popularity]) -> tuple:
        """The mapping ``slots`` / ``ncopy`` relabelled to each popularity of ``perms`` (row k for
        ``perms[k]``; dse.runtime.mapping.Relabel): slots ``[K, U, C]``, copies ``[K, U]``, one gather."""
        rows = self.planner.relabel.sources(tuple(perms), len(ncopy))
        return slots[rows], ncopy[rows]


def own_all(maps: list[DesignMappings], items: list[list]) -> list[tuple[list, list[float]]]:
    """`DesignMappings.own` of each design of ``maps`` (one planner's) for its ``items`` ((key tail, window,
    what is down) each), all at once: per failed set and what is down, each design's mapping or its
    re-mapping (`DesignMappings.basis`) relabelled to every popularity of the set; the re-mappings the
    designs' memos lack in one compiled call (`remap_many`), and the relabellings to one set of popularities
    in one gather (`relabel_all`). Each design's (mappings, shares) equal its own derivation's."""
    groups = []                     # (design, failed, what is down, its items' indices)
    for i, its in enumerate(items):
        at: dict = {}
        for k, (tail, _, now) in enumerate(its):
            at.setdefault((tail[1], now), []).append(k)
        groups += [(i, failed, now, ks) for (failed, now), ks in at.items()]
    lost_all(maps, groups)
    wanted: dict[tuple, Request] = {}
    for i, failed, now, _ in groups:
        q = maps[i].request(0, maps[i].home, failed, now)
        if q is not None:
            wanted.setdefault((i, DesignMappings.remap_key(q.slots, q.ncopy, q.stacks, failed)), q)
    by_width: dict[int, list] = {}
    for key, q in wanted.items():
        by_width.setdefault(q.slots.shape[1], []).append(key)
    for width, keys in by_width.items():
        planner = maps[keys[0][0]].planner
        for (i, key), got in zip(keys, remap_many(planner.ev, [wanted[k] for k in keys], planner.workspace(width))):
            maps[i].memo[key] = got
    out = [([None] * len(its), [1.0] * len(its)) for its in items]
    sources, perms, places = [], [], []
    for i, failed, now, ks in groups:
        m, (mappings, selected) = maps[i], out[i]
        source, stacks, orphan = m.basis(0, m.home, failed, now)
        at = [items[i][k][0][0] for k in ks]
        if source is None:
            for k in ks:
                selected[k] = 0.0
            continue
        for k, share in zip(ks, m.shares(orphan, at)):
            selected[k] = share
        sources.append(source)
        perms.append(tuple(at))
        places.append((mappings, ks, stacks, now.links))
    for (mappings, ks, stacks, links), (slots, ncopy) in zip(places, relabel_all(maps[0].planner.relabel, sources,
                                                                                   perms) if places else ()):
        for j, k in enumerate(ks):
            mappings[k] = SegmentMapping(slots[j], ncopy[j], stacks, links)
    return out


def lost_all(maps: list[DesignMappings], groups: list[tuple]) -> None:
    """`DesignMappings.holds` and `orphans` of each design's own mapping (version 0) for the failed sets
    of ``groups`` ((design, failed, what is down, items)) its memo lacks, per failed set and mapping
    shape at once (the same arrays, element by element), into each memo under the keys `basis` reads."""
    todo: dict[tuple, list[int]] = {}
    for i, failed, _, _ in groups:
        if failed and ("holds", 0, failed) not in maps[i].memo:
            at = todo.setdefault((failed, maps[i].home.slots.shape), [])
            if not at or at[-1] != i:
                at.append(i)
    for (failed, _), designs in todo.items():
        slots = np.stack([maps[i].home.slots for i in designs])
        ncopy = np.stack([maps[i].home.ncopy for i in designs])
        valid = np.arange(slots.shape[2])[None, None, :] < ncopy[:, :, None]
        on = on_chips(slots, failed)
        holds = (valid & on).any(axis=(1, 2)).tolist()
        orphan = ~(valid & ~on).any(axis=2) & (ncopy > 0)
        other = (orphan & ~maps[designs[0]].planner.is_expert).any(axis=1).tolist()
        for g, i in enumerate(designs):
            maps[i].memo["holds", 0, failed] = holds[g]
            if holds[g] and ("orphans", 0, failed) not in maps[i].memo:
                maps[i].memo["orphans", 0, failed] = None if other[g] else orphan[g]


def relabel_all(relabel: Relabel, sources: list[tuple], perms: list[tuple]) -> list[tuple]:
    """Each mapping of ``sources`` (slots ``[U, C]``, copies ``[U]``) relabelled to each popularity of its
    ``perms`` (`Relabel.sources`): slots ``[K, U, C]`` and copies ``[K, U]`` each, those of the mappings
    with the same popularities (and sizes) in one gather (each that of `DesignMappings.relabelled`)."""
    out: list = [None] * len(sources)
    sets: dict[tuple, list[int]] = {}
    for x, ((slots, _), p) in enumerate(zip(sources, perms)):
        sets.setdefault((p, slots.shape), []).append(x)
    for (p, shape), xs in sets.items():
        rows = relabel.sources(p, shape[0])
        slots = np.take(np.stack([sources[x][0] for x in xs]), rows, axis=1)        # [G, K, U, C]
        ncopy = np.take(np.stack([sources[x][1] for x in xs]), rows, axis=1)        # [G, K, U]
        for g, x in enumerate(xs):
            out[x] = (slots[g], ncopy[g])
    return out
