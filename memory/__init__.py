"""Memory: HBM / DDR / LPDDR presets, sustained bandwidth and latency, capacity placement, expert tiering.

* `memory_preset(kind, overrides)` -> `MemorySpec` (one HBM stack or DDR / LPDDR channel, SI units);
* `dram`: row-buffer hit rate of an access pattern, sustained bandwidth, loaded latency (Numba kernels);
* `queueing`: M/D/1 waiting time of a channel;
* `placement`: items (weights, KV, activations) into tiers by access density, shortfall when full;
* `tiering`: expert read rates from visit probabilities, direct-from-DDR vs on-demand fetch costs;
* `storage`: NVMe SSDs (datasheets, MQSim geometries) and storage tiers (host DRAM, node-local, parallel FS).
"""
from .dram import (SCATTERED_BYTES, STREAM, Device, access_latency_s, bandwidth_bound, burst_intervals, device,
                   device_hit_rate, effective_bandwidth_array_Bps, run_start_fraction,
                   effective_bandwidth_Bps, efficiency, loaded_latency_array_s, loaded_latency_s, row_hit_rate,
                   row_hit_rate_array, row_hit_rate_of_run, sustained_fraction, unloaded_latency_s)
from .errors import MemorySpecError
from .placement import (place_by_density, place_design, place_population, proportional_spill, spill_by_density,
                        tier_bytes)
from .presets import GB, GIB, MemorySpec, memory_kinds, memory_preset, preset_keys
from .queueing import md1_wait_array_s, md1_wait_s
from .storage import (SsdSpec, StorageTier, flash_ssd, ssd_names, ssd_preset, storage_names,
                      storage_preset)
from .tiering import direct_cost, on_demand_cost, selection_read_bytes, tiered_chiplets

__all__ = ["MemorySpec", "MemorySpecError", "memory_preset", "memory_kinds", "preset_keys", "GB", "GIB",
           "Device", "device", "STREAM", "SCATTERED_BYTES", "row_hit_rate", "efficiency", "effective_bandwidth_Bps",
           "access_latency_s", "row_hit_rate_of_run", "device_hit_rate", "sustained_fraction", "unloaded_latency_s",
           "loaded_latency_s", "row_hit_rate_array", "effective_bandwidth_array_Bps", "loaded_latency_array_s",
           "md1_wait_s", "md1_wait_array_s", "place_by_density", "place_design", "place_population",
           "proportional_spill", "spill_by_density", "tier_bytes", "selection_read_bytes", "direct_cost", "on_demand_cost",
           "tiered_chiplets", "bandwidth_bound", "burst_intervals",
           "run_start_fraction", "SsdSpec", "StorageTier", "ssd_preset", "ssd_names", "flash_ssd",
           "storage_preset", "storage_names"]
