"""The runtime's dictionary forms, for tests that check its array forms by hand (production code keeps
the arrays only): a design relabelled to a popularity, the copies one placement moves against another,
and moves listed by unit name priced."""
from __future__ import annotations

import dataclasses

import numpy as np


def relabelled(design, groups, perm):
    """The design that, at the study's popularity, costs what ``design`` costs at popularity ``perm``
    (dse.runtime.mapping.Relabel on a design record)."""
    placement = dict(design.placement)
    for names, p in zip(groups.names, perm):
        for i, name in enumerate(names):
            placement[names[p[i]]] = design.placement[name]
    return dataclasses.replace(design, chiplets=list(design.chiplets), hbm_stacks=list(design.hbm_stacks),
                               placement=placement)


def moved_copies(old: dict, new: dict) -> list:
    """Copies ``new`` places where ``old`` had none: (unit, destination slot, slots it can be copied
    from: the unit's copies in ``old``)."""
    out = []
    for unit, slots in new.items():
        before = old.get(unit, [])
        if slots is before:
            continue
        out.extend((unit, s, before) for s in slots if s not in before)
    return out


def move_cost(model, moves: list, failed=frozenset(), links=frozenset()):
    """The `MoveCost` of ``moves`` ((unit name, destination, source slots)) by `MigrationModel.cost_arrays`."""
    from dse.runtime.migration import NO_MOVE
    if not moves:
        return NO_MOVE
    unit = {u: i for i, u in enumerate(model.tables.unit_names)}
    width = max(1, max(len(m[2]) for m in moves))
    sources = np.full((len(moves), width), -1, np.int64)
    for i, (_, _, src) in enumerate(moves):
        sources[i, : len(src)] = src
    return model.cost_arrays(np.array([unit[m[0]] for m in moves], np.int64), np.array([m[1] for m in moves], np.int64),
                             sources, failed, links)
