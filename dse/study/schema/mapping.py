"""Study schema: the ``mapping`` section (how units are placed onto chiplets)."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import PositiveInt

from . import limits
from .common import StrictModel

MAPPINGS = ("one-to-one", "one-to-many", "many-to-one", "many-to-many")


class MappingSpec(StrictModel):
    kind: Literal[MAPPINGS] = "many-to-many"
    max_replicas: Annotated[PositiveInt, limits.at_most(limits.COPIES)] = 2
