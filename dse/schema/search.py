"""Study schema: the ``constraints`` and ``search`` sections (budgets, objectives, algorithm)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat, field_validator

from .common import StrictModel

OBJECTIVES = ("latency", "throughput", "energy", "area", "cost", "fault_tolerance")
ALGORITHMS = ("nsga2", "random")


class ConstraintsSpec(StrictModel):
    area_mm2: PositiveFloat | None = None
    power_w: PositiveFloat | None = None
    cost_usd: PositiveFloat | None = None


class SearchSpec(StrictModel):
    objectives: list[Literal[OBJECTIVES]] = Field(
        default=["latency", "energy", "area", "fault_tolerance"], min_length=2, max_length=6)
    algorithm: Literal[ALGORITHMS] = "nsga2"
    population: int = Field(48, ge=4, le=100_000)
    generations: int = Field(30, ge=1, le=100_000)
    seed: int = 1

    @field_validator("objectives")
    @classmethod
    def _distinct(cls, value):
        if len(set(value)) != len(value):
            raise ValueError("objectives must not repeat")
        return value
