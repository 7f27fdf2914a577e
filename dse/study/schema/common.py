"""Shared pieces of the study schema: the strict base model and ``[low, high]`` ranges."""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict


def _as_range(value: Any) -> Any:
    """Accept ``n`` or ``[low, high]`` and return ``(low, high)``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return (value, value)
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return tuple(value)
    raise ValueError(f"expected a whole number or a [low, high] pair, got {value!r}")


def check_range(value: tuple[int, int], minimum: int) -> tuple[int, int]:
    low, high = value
    if low > high:
        raise ValueError(f"low end {low} is above high end {high}")
    if low < minimum:
        raise ValueError(f"must be >= {minimum}, got {low}")
    return value


IntRange = Annotated[tuple[int, int], BeforeValidator(_as_range)]


class StrictModel(BaseModel):
    """Base of every section: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)
