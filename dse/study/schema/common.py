"""Shared pieces of the study schema: the strict base model, ``[low, high]`` ranges and pairs.

`StrictModel` makes every section strict in one place:

* unknown keys are errors; values are immutable;
* values keep their type (pydantic strict mode): ``batch: true`` is not 1, ``per_layer: "yes"`` is not
  true, ``batch: 2.5`` and ``batch: "16"`` are not whole numbers; a whole number is a float where a float
  is asked for;
* every float is finite, inside lists and mappings too (``allow_inf_nan=False``): ``.inf`` and ``.nan``
  are refused; fields typed ``Any`` (passed on to another package) are checked with `check_finite`.

Sizes that drive memory or time are capped by dse.study.schema.limits.
"""
from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError


def _as_range(value: Any) -> Any:
    """Accept ``n`` or ``[low, high]`` and return ``(low, high)``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return (value, value)
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return tuple(value)
    raise ValueError(f"expected a whole number or a [low, high] pair, got {value!r}")


def _as_tuple(value: Any) -> Any:
    """YAML lists stand for the schema's tuples (strict mode takes only tuples)."""
    return tuple(value) if isinstance(value, list) else value


def check_range(value: tuple[int, int], minimum: int) -> tuple[int, int]:
    low, high = value
    if low > high:
        raise ValueError(f"low end {low} is above high end {high}")
    if low < minimum:
        raise ValueError(f"must be >= {minimum}, got {low}")
    return value


def check_finite(value: Any, where: str = "") -> Any:
    """Raise ValueError if a number anywhere in ``value`` (nested lists and mappings) is inf or NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where + ': ' if where else ''}must be a finite number, got {value!r}")
    if isinstance(value, dict):
        for k, v in value.items():
            check_finite(v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_finite(v, f"{where}[{i}]")
    return value


#: names that become file or folder names (study name, design ids): no path separators, no "." or ".."
SAFE_NAME = r"^[A-Za-z0-9_.-]+$"
_SAFE = re.compile(SAFE_NAME)


def check_safe_name(value: str, what: str = "a name") -> str:
    """Raise ValueError unless ``value`` can be a file name inside a folder and nothing else: letters,
    digits, ``_ . -``, not ``.`` or ``..``."""
    if not isinstance(value, str) or not _SAFE.match(value) or value in (".", ".."):
        raise ValueError(f"{what} is letters, digits, '_', '.' and '-' (not '.' or '..'), got {value!r}")
    return value


IntRange = Annotated[tuple[int, int], BeforeValidator(_as_range)]


def Tuple(inner: Any) -> Any:
    """A fixed-size tuple type (``Tuple(tuple[PositiveInt, PositiveInt])``) written as a YAML list."""
    return Annotated[inner, BeforeValidator(_as_tuple)]


class StrictModel(BaseModel):
    """Base of every section: unknown keys are errors, types are strict, floats finite, values immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def invalid_at(loc: tuple, message: str, value) -> ValidationError:
    """A validation error at a location below the model being validated (so the study key names it)."""
    error = PydanticCustomError("value_error", "{message}", {"message": message})
    return ValidationError.from_exception_data("PackageSpec", [InitErrorDetails(type=error, loc=loc, input=value)])
