"""Study schema: the ``mapping`` section (how units are placed onto chiplets)."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveInt

from . import limits
from .common import StrictModel

MAPPINGS = ("one-to-one", "one-to-many", "many-to-one", "many-to-many")


class MappingSpec(StrictModel):
    #: one-to-one, one-to-many (shards), many-to-one or many-to-many (units to chiplets)
    kind: Literal[MAPPINGS] = "many-to-many"
    #: copies (or shards) a unit may have at most
    max_replicas: Annotated[PositiveInt, limits.at_most(limits.COPIES)] = 2
    experts_kept: PositiveInt | None = Field(
        None, description="routed experts kept per MoE layer: the least selected are pruned and routing "
                          "renormalises over the rest (dse.quality: the score this costs)")
