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

from ..model.breakdown import chiplet_table
from ..model.characterize import characterize
from ..model.traffic import chiplet_traffic
from ..study.space import Design


class Breakdowns:
    """Per-chiplet tables, traffic matrices and unit kinds of a prepared study's designs, each computed on
    first use (module docstring). Designs are told apart by identity: the report's are its result's."""

    def __init__(self, prepared):
        self.prepared = prepared
        self._tables: dict[int, tuple[Design, pd.DataFrame]] = {}
        self._traffic: dict[int, tuple[Design, np.ndarray]] = {}
        self._kinds: dict[int, tuple[object, dict[str, str]]] = {}
        self._attributes: dict[tuple, tuple[tuple, pd.DataFrame]] = {}

    def chiplets(self, design: Design, latency_s: float) -> pd.DataFrame:
        """`chiplet_table` of ``design`` with busy shares over a step of ``latency_s``."""
        key = id(design)
        if key not in self._tables:
            self._tables[key] = (design, chiplet_table(design, self.prepared, latency_s, self.traffic(design)))
        table = self._tables[key][1]
        return table.assign(busy_share=table["busy_s"] / latency_s)

    def traffic(self, design: Design) -> np.ndarray:
        """`chiplet_traffic` of ``design``: bytes per step from chiplet i to chiplet j."""
        key = id(design)
        if key not in self._traffic:
            self._traffic[key] = (design, chiplet_traffic(design, self.prepared.for_design(design).tables))
        return self._traffic[key][1]

    def unit_kinds(self, design: Design) -> dict[str, str]:
        """Unit name -> its kind in the workload graph of the design's tables."""
        tables = self.prepared.for_design(design).tables
        key = id(tables)
        if key not in self._kinds:
            graph = tables.workload.graph
            self._kinds[key] = (tables, {u: graph.nodes[u]["kind"] for u in tables.unit_names})
        return self._kinds[key][1]

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
