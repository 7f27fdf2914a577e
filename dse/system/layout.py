"""The parallel layout of a system: pipeline stages x expert-parallel ranks x data-parallel replicas.

Package ``g`` of a layout is ``(replica x pipeline + stage) x experts + rank``: the ranks of a stage are
neighbours, then the stages of a replica, then the replicas; nodes take consecutive packages
(``g // packages_per_node``), so an expert-parallel group of at most a node's packages stays on the
fabric and pipeline hand-offs cross the network only where stages fall in different nodes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..study.space import SYSTEM_AXES


@dataclass(frozen=True)
class Layout:
    pipeline: int = 1
    experts: int = 1
    replicas: int = 1

    @property
    def packages(self) -> int:
        return self.pipeline * self.experts * self.replicas

    @property
    def per_replica(self) -> int:
        return self.pipeline * self.experts

    def package(self, replica: int, stage: int, rank: int) -> int:
        return (replica * self.pipeline + stage) * self.experts + rank

    def nodes(self, packages_per_node: int) -> int:
        return math.ceil(self.packages / packages_per_node)

    def node_of(self, stage: int, rank: int, packages_per_node: int, replica: int = 0) -> int:
        return self.package(replica, stage, rank) // packages_per_node

    def as_dict(self) -> dict[str, int]:
        return {"pipeline": self.pipeline, "experts": self.experts, "replicas": self.replicas}


def layout_of(design) -> Layout:
    """The layout a design record names (``design.system``: pipeline, experts, replicas; 1 where unnamed)."""
    return Layout(**{axis: int((design.system or {}).get(axis, 1)) for axis in SYSTEM_AXES})
