"""A design's two forms and the one pair of converters between them: the record (dse.study.space.Design:
what a user writes, the results keep, the failure reports read) and the kernel arrays
(dse.model.contract.DecodedDesigns: what the kernels and the runtime cost). `design_arrays` gives the
arrays of records; `design_records` the records of arrays (dse.model.evaluator.Evaluator.designs, and the
runtime's segments where the evaluator's record-based reports are needed)."""
from __future__ import annotations

import numpy as np

from ..study.space import Design
from .contract import DecodedDesigns
from .tables import EvalTables


def design_arrays(designs: list[Design], tables: EvalTables, max_slots: int, max_copies: int) -> DecodedDesigns:
    """Kernel arrays of explicit designs (none unplaced)."""
    P = len(designs)
    rows = np.array([d.rows for d in designs], np.int64)
    cols = np.array([d.cols for d in designs], np.int64)
    kind = np.zeros((P, max_slots), np.int64)
    stacks = np.zeros((P, max_slots), np.int64)
    copies = max([max_copies] + [len(s) for d in designs for s in d.placement.values()])
    slots = np.full((P, tables.n_units, copies), -1, np.int64)
    ncopy = np.ones((P, tables.n_units), np.int64)
    for p, d in enumerate(designs):
        kind[p, : len(d.chiplets)] = [tables.kind_names.index(k) for k in d.chiplets]
        stacks[p, : len(d.hbm_stacks)] = d.hbm_stacks
        for u, name in enumerate(tables.unit_names):
            where = d.placement[name]
            slots[p, u, : len(where)] = where
            ncopy[p, u] = len(where)
    ddr = np.array([d.ddr_channels for d in designs], np.int64)
    return DecodedDesigns(rows, cols, kind, stacks, ddr, slots, ncopy, np.zeros(P, np.int64))


def design_records(d: DecodedDesigns, tables: EvalTables, link: str, mapping: str, topology: str,
                   which=None, placement: bool = True) -> list[Design]:
    """The records of designs ``which`` (default: all) of the kernel arrays ``d``; ``placement``: with
    their unit -> slots placement (without: ``{}``, for callers that read the mapping from the arrays).
    In a design whose units have one copy each, the units on a slot share one list (``[s]``: 15,000
    units, no list built per unit): copy a unit's list before changing it in place."""
    names = tables.kind_names
    out = []
    for p in (range(len(d.rows)) if which is None else which):
        n = int(d.chiplets[p])
        units = {}
        if placement and (d.ncopy[p] == 1).all():
            first = d.slots[p, :, 0].tolist()
            single = [[s] for s in range(max(first, default=0) + 1)]
            units = dict(zip(tables.unit_names, map(single.__getitem__, first)))
        elif placement:
            units = {u: s[:c] for u, s, c in zip(tables.unit_names, d.slots[p].tolist(), d.ncopy[p].tolist())}
        out.append(Design(rows=int(d.rows[p]), cols=int(d.cols[p]), chiplets=[names[k] for k in d.kind[p, :n]],
                          hbm_stacks=[int(s) for s in d.stacks[p, :n]], ddr_channels=int(d.ddr[p]), link=link,
                          mapping=mapping, placement=units, topology=topology))
    return out
