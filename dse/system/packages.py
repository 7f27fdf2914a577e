"""The packages of one parallel layout: each one's share of the workload (dse.system.slices) with the
package evaluator that costs it (dse.model.evaluator.Evaluator, unchanged), and the genes it reads.

Every package is the same package design; the genes that place a unit place it in every package that
holds it. A package of pipeline stage p and expert rank r reads the package genes (mesh, chiplet kinds,
HBM, DDR) and the placement genes of its own units.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from ..model.evaluator import Evaluator
from ..model.prepare import Prepared
from ..model.tables import EvalTables
from ..study.space import Design, Space, build_space
from ..study.spec import Study
from .slices import expert_ranks, group_start, kept_units, layers_held, slice_tables, stage_bounds, stage_layers


@dataclass
class PackageShare:
    """One package of a layout: its tables, evaluator, units and the columns of the system's genes it reads."""

    tables: EvalTables
    evaluator: Evaluator
    units: list[str]
    genes: np.ndarray

    def restrict(self, design: Design) -> Design:
        """The design as this package sees it: placement of its own units only, no system layout."""
        return dataclasses.replace(design, placement={u: list(design.placement[u]) for u in self.units}, system=None)


@dataclass
class StagePackages:
    """The packages of one (pipeline, experts) split: ``shares[stage][rank]``, and what each stage holds."""

    pipeline: int
    experts: int
    held: list[np.ndarray]
    ranks: np.ndarray
    rank_tables: EvalTables
    shares: list[list[PackageShare]] = field(default_factory=list)

    @property
    def rank_tokens(self) -> float:
        return float(self.rank_tables.tokens_per_step)


class PackageBank:
    """Builds and keeps the `StagePackages` of every (pipeline, experts) split a study reaches."""

    def __init__(self, study: Study, tables: EvalTables, space: Space, tables_at_batch):
        self.study, self.tables, self.space = study, tables, space
        self.package_study = study.model_copy(update={"system": None})
        self.tables_at_batch = tables_at_batch           # batch -> EvalTables (dse.model.tables.build_tables)
        self.layers = stage_layers(tables)
        self.cache: dict[tuple[int, int, int], StagePackages] = {}
        #: (layers, pipeline) -> layers per stage, set by a phase before the first evaluation (training's
        #: balanced uneven split: dse.training.package); None: ``p L // P`` (dse.system.slices)
        self.split = None

    def bounds(self, pipeline: int) -> list[int]:
        """Each pipeline stage's first layer and the last's end (dse.system.slices.stage_bounds)."""
        L = self.layers.total
        return stage_bounds(L, pipeline, self.split(L, pipeline) if self.split is not None and L else None)

    def __getstate__(self):
        """Pickled (to Dask workers) without the packages built so far: they are rebuilt there when used."""
        return {**self.__dict__, "cache": {}}

    def in_flight(self, pipeline: int) -> int:
        m = self.study.system.in_flight
        return pipeline if m == "pipeline" else int(m)

    def first_package(self, design: Design) -> Prepared:
        """The first package (pipeline stage 0, expert rank 0) of a design's layout, as a package study:
        what its floorplan, per-chiplet breakdown and exports show."""
        layout = design.system or {}
        share = self.get(int(layout.get("pipeline", 1)), int(layout.get("experts", 1))).shares[0][0]
        return Prepared(study=self.package_study, tables=share.tables, space=share.evaluator.space,
                        evaluator=share.evaluator)

    def get(self, pipeline: int, experts: int) -> StagePackages:
        key = (pipeline, experts, self.in_flight(pipeline))
        if key not in self.cache:
            self.cache[key] = self._build(pipeline, experts)
        return self.cache[key]

    def _build(self, pipeline: int, experts: int) -> StagePackages:
        batch = math.ceil(self.study.workload.batch / experts)
        rank_t = self.tables_at_batch(batch)
        ranks = expert_ranks(self.tables, experts)
        bounds = self.bounds(pipeline)
        held = [layers_held(self.layers, pipeline, p, bounds) for p in range(pipeline)]
        out = StagePackages(pipeline=pipeline, experts=experts, held=held, ranks=ranks, rank_tables=rank_t)
        kv_scale = float(self.in_flight(pipeline))
        sl = self.space.slices
        head = np.arange(sl["place"].start)
        for p in range(pipeline):
            starts = group_start(self.layers, pipeline, p, bounds)
            row = []
            for r in range(experts):
                keep = kept_units(self.tables, held[p], ranks, r)
                t = slice_tables(rank_t, self.tables, held[p], starts, keep, kv_scale)
                if p > 0:       # the framework's work per sequence is paid once a step, by the first stage
                    t = dataclasses.replace(t, sequences_per_step=0.0)
                index = np.flatnonzero(keep)
                genes = np.concatenate([head, sl["place"].start + index, sl["copies"].start + index])
                space = build_space(self.package_study, t.kind_names, t.unit_names)
                ev = Evaluator(t, space, self.study.hardware.package, self.study.mapping.max_replicas,
                               faults=self.study.faults)
                ev.threads = 1      # the system spreads its designs over the threads (dse.system.evaluator)
                row.append(PackageShare(tables=t, evaluator=ev, units=list(t.unit_names), genes=genes))
            out.shares.append(row)
        return out
