"""The per-design breakdowns a report shows, each computed once per design.

The report's design sections, its floorplans and the interactive page's details show the same designs
with the same two models: the per-chiplet table (dse.model.breakdown.chiplet_table: units held, memory,
busy time, traffic in and out) and the chiplet-to-chiplet traffic (dse.model.traffic.chiplet_traffic)
that link loads are routed from. Each walks every unit of the design (15,000 for DeepSeek-V3 per
layer), so `Breakdowns` keeps them by design and hands out the same numbers to every figure and table.
Busy shares are busy time over a step (``busy_s / latency_s``): the table is kept once and its share
column taken over the step each caller gives. The units' attribute table (dse.model.characterize), which
the roofline and the experts' section both read, is kept once per prepared study too.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..model.breakdown import chiplet_table, held_units
from ..model.characterize import characterize
from ..model.tables import UNIT_KINDS
from ..model.traffic import chiplet_traffic
from ..study.space import Design


class _ByValue:
    """A few objects' computed figures, found by equality (``==``, after ``is``): a design equal to one
    already seen gets its figures. A report shows a handful of designs, so a scan of the list is enough."""

    def __init__(self):
        self._entries: list[tuple[object, object]] = []

    def get(self, key, make):
        for held, value in self._entries:
            if held is key or held == key:
                return value
        value = make()
        self._entries.append((key, value))
        return value


class Breakdowns:
    """Per-chiplet tables, traffic matrices and units held of a prepared study's designs, each computed on
    first use (module docstring) and kept by the design's value (equal designs share them)."""

    def __init__(self, prepared):
        self.prepared = prepared
        self._tables = _ByValue()
        self._traffic = _ByValue()
        self._held = _ByValue()
        self._kinds = _ByValue()
        self._attributes: dict[tuple, tuple[tuple, pd.DataFrame]] = {}

    def chiplets(self, design: Design, latency_s: float) -> pd.DataFrame:
        """`chiplet_table` of ``design`` with busy shares over a step of ``latency_s``."""
        table = self._tables.get(design, lambda: chiplet_table(design, self.prepared, latency_s, self.traffic(design),
                                                               self.held(design)))
        return table.assign(busy_share=table["busy_s"] / latency_s)

    def traffic(self, design: Design) -> np.ndarray:
        """`chiplet_traffic` of ``design``: bytes per step from chiplet i to chiplet j."""
        return self._traffic.get(design, lambda: chiplet_traffic(design, self.prepared.for_design(design).tables))

    def held(self, design: Design) -> tuple[np.ndarray, np.ndarray]:
        """`held_units` of ``design``: the units each chiplet holds (indices, bounds per chiplet)."""
        tables = self.prepared.for_design(design).tables
        return self._held.get(design, lambda: held_units(design, tables.unit_names, design.rows * design.cols))

    def kind_counts(self, design: Design) -> list[list[tuple[str, int]]]:
        """For each chiplet of ``design``, how many units of each kind it holds, ``[(kind, count), ...]`` with
        the kinds in the order first met in the units' order (as a `collections.Counter` of its units' kinds
        counts them; the kinds are the workload graph's, ``EvalTables.unit_kind``). Counted on arrays: the
        floorplan, the report's table and the page's details each show them, 15,000 units for DeepSeek-V3."""
        return self._kinds.get(design, lambda: self._count_kinds(design))

    def _count_kinds(self, design: Design) -> list[list[tuple[str, int]]]:
        units, bounds = self.held(design)
        n = len(bounds) - 1
        kinds = len(UNIT_KINDS)
        chip = np.repeat(np.arange(n, dtype=np.int64), np.diff(bounds))
        code = chip * kinds + np.asarray(self.prepared.for_design(design).tables.unit_kind, np.int64)[units]
        codes, first, count = np.unique(code, return_index=True, return_counts=True)
        order = np.lexsort((first, codes // kinds))          # by chiplet, then where the kind is first met
        out: list[list[tuple[str, int]]] = [[] for _ in range(n)]
        for c, k in zip(codes[order].tolist(), count[order].tolist()):
            out[c // kinds].append((UNIT_KINDS[c % kinds], k))
        return out

    def attributes(self, prepared) -> pd.DataFrame:
        """`characterize` of ``prepared`` (the report's, or the package it costs a design with), computed once
        for every prepared study holding the same tables, package model, study and variants (what
        `characterize` reads: the report's and its package's are two objects over the same ones), so the
        roofline and the experts' section read the same table."""
        held = (prepared.tables, prepared.package_evaluator, prepared.study, *prepared.variants)
        key = tuple(map(id, held))
        if key not in self._attributes:
            self._attributes[key] = (held, characterize(prepared))
        return self._attributes[key][1]
