"""Study schema: the ``workload`` section (what model, phase, batch, routing)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt

from .common import StrictModel


class RoutingSpec(StrictModel):
    distribution: Literal["uniform", "zipf"] = "uniform"
    s: float = Field(1.0, ge=0.0, description="Zipf exponent")
    seed: int = 0


class WorkloadSpec(StrictModel):
    model: str = Field(description="bundled preset name or path to a HuggingFace config.json")
    phase: Literal["prefill", "decode"] = "decode"
    batch: PositiveInt = 1
    context: PositiveInt = 2048
    precision: Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"] = "bf16"
    per_layer: bool = False
    routing: RoutingSpec = RoutingSpec()
