"""A design's two forms and the one pair of converters between them: the record (dse.study.space.Design:
what a user writes, the results keep, the failure reports read) and the kernel arrays
(dse.model.contract.DecodedDesigns: what the kernels and the runtime cost). `design_arrays` gives the
arrays of records; `design_records` the records of arrays (dse.model.evaluator.Evaluator.designs, and the
runtime's segments where the evaluator's record-based reports are needed), `placement_arrays` their
placements as flat arrays (the results' CSV cells and placements table)."""
from __future__ import annotations

from itertools import chain

import numpy as np

from ..study.space import Design
from .contract import DecodedDesigns
from .tables import EvalTables


def design_arrays(designs: list[Design], tables: EvalTables, max_slots: int, max_copies: int) -> DecodedDesigns:
    """Kernel arrays of explicit designs (none unplaced)."""
    P, U = len(designs), tables.n_units
    rows = np.array([d.rows for d in designs], np.int64)
    cols = np.array([d.cols for d in designs], np.int64)
    kind = np.zeros((P, max_slots), np.int64)
    stacks = np.zeros((P, max_slots), np.int64)
    where = [list(map(d.placement.__getitem__, tables.unit_names)) for d in designs]   # slots, in unit order
    ncopy = np.array([np.fromiter(map(len, w), np.int64, U) for w in where], np.int64).reshape(P, U)
    copies = max([max_copies] + [max(map(len, d.placement.values()), default=0) for d in designs])
    slots = np.full((P, U, copies), -1, np.int64)
    unit = np.arange(U)
    for p, d in enumerate(designs):
        kind[p, : len(d.chiplets)] = [tables.kind_names.index(k) for k in d.chiplets]
        stacks[p, : len(d.hbm_stacks)] = d.hbm_stacks
        flat = np.array(list(chain.from_iterable(where[p])), np.int64)    # each unit's slots one after another
        count = ncopy[p]
        slots[p, np.repeat(unit, count), np.arange(len(flat)) - np.repeat(np.cumsum(count) - count, count)] = flat
    ddr = np.array([d.ddr_channels for d in designs], np.int64)
    return DecodedDesigns(rows, cols, kind, stacks, ddr, slots, ncopy, np.zeros(P, np.int64))


def design_records(d: DecodedDesigns, tables: EvalTables, link: str, mapping: str, topology: str,
                   which=None, placement: bool = True) -> list[Design]:
    """The records of designs ``which`` (default: all) of the kernel arrays ``d``; ``placement``: with
    their unit -> slots placement (without: ``{}``, for callers that read the mapping from the arrays).
    Units placed on the same slots share one list (``[s]`` or ``[s, t]``: 15,000 units, one list per
    distinct set of slots, found on arrays by `_slot_lists`): copy a unit's list before changing it in
    place."""
    names = tables.kind_names
    out = []
    empty = dict.fromkeys(tables.unit_names) if placement else {}    # every unit, in order: copied, then filled
    for p in (range(len(d.rows)) if which is None else which):
        n = int(d.chiplets[p])
        units = {}
        if placement:
            lists, of_unit = _slot_lists(d.slots[p], d.ncopy[p])
            units = empty.copy()        # sized for every unit at once (dict(zip(...)) grows it step by step)
            units.update(zip(tables.unit_names, lists[of_unit].tolist()))
        out.append(Design(rows=int(d.rows[p]), cols=int(d.cols[p]), chiplets=[names[k] for k in d.kind[p, :n]],
                          hbm_stacks=[int(s) for s in d.stacks[p, :n]], ddr_channels=int(d.ddr[p]), link=link,
                          mapping=mapping, placement=units, topology=topology))
    return out


def placement_arrays(d: DecodedDesigns, which=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """The placements `design_records` gives designs ``which`` (default: all) of ``d``, as arrays: per design
    (copies of each unit, every unit's slots one after another), little-endian int32, in the records' unit
    order: dse.results.placement_store.flat_placement of each record, without reading the records' dicts."""
    copy = np.arange(d.slots.shape[2])
    out = []
    for p in (range(len(d.rows)) if which is None else which):
        count = d.ncopy[p]
        out.append((count.astype("<i4"), d.slots[p][copy[None, :] < count[:, None]].astype("<i4")))
    return out


#: the most distinct codes `_slot_lists` counts in a table per unit (past it: NumPy's sort)
_TABLE_PER_UNIT = 4


def _slot_lists(slots: np.ndarray, ncopy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One design's placement as distinct slot lists (an object array) and, per unit, the index of its
    list: ``slots`` (units x copies, -1 past a unit's ``ncopy``) read as one integer per unit (its first
    ``ncopy`` slots in base ``max slot + 2``) and made unique, so Python builds a list per distinct
    placement only. The lists come in the order of their codes (as ``np.unique`` sorts them); where the
    codes are few (at most `_TABLE_PER_UNIT` per unit: a package's slots, one or two copies) a table
    indexed by code finds them without sorting."""
    units, copies = slots.shape
    kept = np.where(np.arange(copies)[None, :] < ncopy[:, None], slots, -1) + 1     # 0: no copy
    base = int(kept.max(initial=0)) + 1
    if copies * np.log2(base) < 62:
        code = kept @ (base ** np.arange(copies - 1, -1, -1, dtype=np.int64))
        size = base ** copies
        if size <= _TABLE_PER_UNIT * units + 1024:
            first = np.full(size, units, np.int64)              # first unit of each code, `units` for none
            first[code[::-1]] = np.arange(units - 1, -1, -1)
            present = first < units
            of_unit = (np.cumsum(present) - 1)[code]
            first = first[present]
        else:
            distinct, of_unit = np.unique(code, return_inverse=True)
            first = None
    else:                                     # past int64: the rows themselves
        distinct, of_unit = np.unique(kept, axis=0, return_inverse=True)
        first = None
    of_unit = of_unit.ravel()
    if first is None:
        first = np.empty(len(distinct), np.int64)
        first[of_unit[::-1]] = np.arange(len(of_unit) - 1, -1, -1)      # a unit of each distinct placement
    lists = np.empty(len(first), object)
    for k, (s, c) in enumerate(zip(slots[first].tolist(), ncopy[first].tolist())):
        lists[k] = s[:c]
    return lists, of_unit
