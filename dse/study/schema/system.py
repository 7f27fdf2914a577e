"""Study schema: the ``system`` section (several packages in nodes: dse.system).

A system is identical packages (the searched package design) in nodes joined by a scale-up ``fabric``;
nodes are joined by a scale-out ``network``. ``preset`` (``dgx-a100-80gb``, ``dgx-h100-80gb``) fills
``packages_per_node``, ``fabric``, ``network``, ``nics_per_node`` and ``network_topology``; keys given
beside it override the preset. Without either, a node holds 8 packages (an HGX baseboard's GPUs).
``fabric`` names a fabric of dse/system/data/systems.yaml or any package link technology
(noc/data/links.yaml; switched: each package reaches every other at the link's rate).

``parallel`` lists what the search may choose per axis: pipeline stages, expert-parallel ranks and
data-parallel replicas; a design uses pipeline x experts x replicas packages (at most `MAX_PACKAGES`).
``in_flight``: batches in the pipeline at once, ``pipeline`` (one per stage, default) or a number.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveInt, field_validator, model_validator

from .common import StrictModel

MAX_PACKAGES = 4096


def _choices(value):
    values = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(values, list) or not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1
                                                           for v in values):
        raise ValueError(f"expected a whole number >= 1 or a list of them, got {value!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"choices must not repeat, got {values}")
    return sorted(values)


class ParallelSpec(StrictModel):
    pipeline: list[int] = Field(default=[1], description="pipeline stages across packages")
    experts: list[int] = Field(default=[1], description="expert-parallel ranks (packages) per stage")
    replicas: list[int] = Field(default=[1], description="data-parallel replicas of the whole pipeline")

    _lists = field_validator("pipeline", "experts", "replicas", mode="before")(_choices)

    def layouts(self) -> list[tuple[int, int, int]]:
        return [(p, e, r) for p in self.pipeline for e in self.experts for r in self.replicas]


class SystemSpec(StrictModel):
    #: a system preset (dgx-a100-80gb, dgx-h100-80gb); keys beside it override it
    preset: str | None = None
    #: packages in one node
    packages_per_node: PositiveInt | None = Field(None, le=1024)
    #: the scale-up fabric within a node (a fabric preset or a link technology)
    fabric: str | None = None
    #: the scale-out network between nodes
    network: str | None = None
    #: network interfaces per node
    nics_per_node: int | None = Field(None, ge=0, le=64)
    #: rail-optimised or fat-tree
    network_topology: Literal["fat-tree", "rail-optimised"] | None = None
    #: the layouts the search chooses among: pipeline x experts x replicas packages
    parallel: ParallelSpec = ParallelSpec()
    #: batches in the pipeline at once: pipeline (one per stage) or a number
    in_flight: Literal["pipeline"] | Annotated[int, Field(ge=1, le=MAX_PACKAGES)] = "pipeline"

    @model_validator(mode="after")
    def _bounded(self):
        largest = max(p * e * r for p, e, r in self.parallel.layouts())
        if largest > MAX_PACKAGES:
            raise ValueError(f"parallel layouts reach {largest} packages; at most {MAX_PACKAGES} (pipeline x experts "
                             "x replicas)")
        return self
