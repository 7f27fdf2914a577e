"""Memory: HBM / DDR presets, effective bandwidth and latency of access streams."""
from .dram import access_latency_s, effective_bandwidth_Bps, efficiency
from .errors import MemorySpecError
from .presets import GB, GIB, MemorySpec, memory_kinds, memory_preset

__all__ = ["MemorySpec", "MemorySpecError", "memory_preset", "memory_kinds", "efficiency",
           "effective_bandwidth_Bps", "access_latency_s", "GB", "GIB"]
