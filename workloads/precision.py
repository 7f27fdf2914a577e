"""Bytes per element of the number formats a study may name."""
from .errors import WorkloadError

BYTES_PER_ELEMENT = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}


def bytes_per_element(precision: str) -> float:
    try:
        return BYTES_PER_ELEMENT[precision]
    except KeyError:
        raise WorkloadError(f"unknown precision {precision!r}; allowed: {', '.join(BYTES_PER_ELEMENT)}") from None
