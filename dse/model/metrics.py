"""The package evaluator's metric columns and each one's index by name.

Per design (the step model is in dse.model.perf_model):

* latency_s: expected time of one step over the workload's scenarios (decode: time per output token;
  prefill: time to first token); latency_p99_s: its 99th percentile over scenarios;
* throughput_tok_s: tokens of the step / latency;
* energy_j_per_token and its parts: compute (+ SRAM, active power x busy time), DRAM, network, static;
* area_mm2: silicon = chiplet dies (with their HBM PHYs) + DDR PHYs; package_area_mm2 adds HBM stack
  footprints;
* cost_usd: the assembled package, Chiplet Actuary's model (arch.packaging): known-good dies (arch.kgd_cost),
  HBM and DDR by capacity, the link's interposer or substrate, bumps, and the dies, stacks and interposer
  that failed bonds throw away (per-die bonding yield of the link); `dse evaluate` shows the parts;
* peak_power_w: static + active + every PE busy + memories at full bandwidth (the budget
  ``constraints.peak_power_w`` holds; the mean power at the study's operating point is
  ``energy_j_per_token x throughput_tok_s``: `dse evaluate`'s ``mean_power_w``);
* fault_tolerance_frac: fraction of throughput kept, averaged over every single failure after
  re-mapping (dse.model.failure_remap.remap), capped at 1: every chiplet and, with the study's
  ``faults.links``, every physical link (routes detour around it; dse.model.routes). A failure after which
  some unit cannot be held (memory short), no chiplet is left or two survivors can no longer reach each
  other keeps 0. worst_retained_frac: the least kept. all_served_frac: fraction of single failures after
  which every unit is still served.
* mc_retained_frac / mc_survival_frac: the same over Monte Carlo sets of several failed chiplets
  (study ``faults.monte_carlo``; the same failure sets for every design of a size: common random
  numbers), NaN when off (results and `dse evaluate` leave them out then: dse.model.objectives.reported_metrics).
* capacity_short_bytes, unplaced_experts: constraint measures (0 when feasible).
* max_die_mm2: the largest die (chiplet with its HBM PHYs), held against the reticle limit.
* units_without_memory: unit copies on a chiplet with no memory path (no HBM stack, no DDR in the
  package: dse.model.memory_path), a constraint measure (0 when feasible).

The population kernel (dse.model.population_kernel) writes each column through its ``M_*`` index: Numba
freezes a module's integers as compile-time constants, so ``out[M_LATENCY]`` costs what ``out[0]`` does.
"""
from __future__ import annotations

METRICS = ["latency_s", "latency_p99_s", "throughput_tok_s", "energy_j_per_token", "energy_compute_j_per_token",
           "energy_dram_j_per_token", "energy_network_j_per_token", "energy_static_j_per_token", "area_mm2",
           "package_area_mm2", "cost_usd", "peak_power_w", "fault_tolerance_frac", "worst_retained_frac",
           "all_served_frac", "mc_retained_frac", "mc_survival_frac", "capacity_short_bytes", "unplaced_experts",
           "dram_bytes", "net_byte_hops", "max_die_mm2", "units_without_memory"]
N_METRICS = len(METRICS)

M_LATENCY = METRICS.index("latency_s")
M_LATENCY_P99 = METRICS.index("latency_p99_s")
M_THROUGHPUT = METRICS.index("throughput_tok_s")
M_ENERGY = METRICS.index("energy_j_per_token")
M_E_COMPUTE = METRICS.index("energy_compute_j_per_token")
M_E_DRAM = METRICS.index("energy_dram_j_per_token")
M_E_NET = METRICS.index("energy_network_j_per_token")
M_E_STATIC = METRICS.index("energy_static_j_per_token")
M_AREA = METRICS.index("area_mm2")
M_PACKAGE_AREA = METRICS.index("package_area_mm2")
M_COST = METRICS.index("cost_usd")
M_POWER = METRICS.index("peak_power_w")
M_FAULT_TOLERANCE = METRICS.index("fault_tolerance_frac")
M_WORST_RETAINED = METRICS.index("worst_retained_frac")
M_ALL_SERVED = METRICS.index("all_served_frac")
M_MC_RETAINED = METRICS.index("mc_retained_frac")
M_MC_SURVIVAL = METRICS.index("mc_survival_frac")
M_SHORT = METRICS.index("capacity_short_bytes")
M_UNPLACED = METRICS.index("unplaced_experts")
M_DRAM = METRICS.index("dram_bytes")
M_NET = METRICS.index("net_byte_hops")
M_MAX_DIE = METRICS.index("max_die_mm2")
M_NO_MEMORY = METRICS.index("units_without_memory")

#: columns the population kernel writes: all but the largest die and the copies without memory, which the
#: Evaluator adds last (in that order)
N_KERNEL_METRICS = N_METRICS - 2
assert (M_MAX_DIE, M_NO_MEMORY) == (N_KERNEL_METRICS, N_KERNEL_METRICS + 1), "the Evaluator's columns come last"
