"""Effective bandwidth and access latency of a DRAM device for an access stream.

Row-buffer model: a row hit costs the burst ``tBL``; a miss additionally precharges and activates
(``tRP + tRCD``). With hit rate h and the device's banks hiding misses only up to the burst rate,
the sustained fraction of peak is ``tBL / (tBL + (1 - h) (tRP + tRCD) / banks_in_flight)``.
Streaming weights and KV (h ~ 0.95, four banks overlapped) gives about 0.85 of peak, scattered
access (h ~ 0.3) about 0.4 (shared/reference/hardware.md, "sustained/peak efficiency").
"""
from __future__ import annotations

from .presets import MemorySpec

STREAM_ROW_HIT_RATE = 0.95
BANKS_IN_FLIGHT = 4.0


def efficiency(spec: MemorySpec, row_hit_rate: float = STREAM_ROW_HIT_RATE,
               banks_in_flight: float = BANKS_IN_FLIGHT) -> float:
    """Sustained fraction of peak bandwidth for a stream with the given row-buffer hit rate."""
    miss_penalty = (1.0 - row_hit_rate) * (spec.tRP_s + spec.tRCD_s) / banks_in_flight
    return spec.tBL_s / (spec.tBL_s + miss_penalty)


def effective_bandwidth_Bps(spec: MemorySpec, units: int, row_hit_rate: float = STREAM_ROW_HIT_RATE) -> float:
    return units * spec.peak_bandwidth_Bps * efficiency(spec, row_hit_rate)


def access_latency_s(spec: MemorySpec, row_hit_rate: float = STREAM_ROW_HIT_RATE) -> float:
    """Expected latency of one access: CAS plus, on a miss, precharge and activate."""
    return spec.tCL_s + (1.0 - row_hit_rate) * (spec.tRP_s + spec.tRCD_s)
