"""Compute chiplets: systolic arrays (after SCALE-Sim), GPU-, CPU-like and reconfigurable chiplets;
operator cost tables; energy, area, yield and cost; package assembly cost (arch.packaging)."""
from . import technology
from .area_cost import (active_power_w, area_breakdown_mm2, check_manufacturable, chiplet_area_mm2, chiplet_cost_usd,
                        die_yield, dies_per_wafer, kgd_cost, known_good_die_cost_usd, static_power_w)
from .chiplet import (DATAFLOWS, KINDS, Chiplet, CpuChiplet, GpuChiplet, ReconfigurableChiplet, SystolicChiplet,
                      SystolicMode)
from .costing import CostTable, MatrixCost, gemm_at_limit, gemm_report, matrix_costs, op_costs
from .energy import peak_dynamic_power_w
from .errors import ArchError
from .gpu import flash_attention
from .packaging import PACKAGE_COST_PARTS, PACKAGINGS, package_cost, package_cost_parts, packaging_params
from .power import KernelPower, clock_at_power, idle_power_w, kernel_at_limit
from .presets import build_chiplet, preset, preset_names, preset_spec
from .systolic import cycles_table, gemm_cycles, mapping_efficiency, simulate, utilisation
from .technology import node, nodes, precision_bits, precision_bytes, precisions

__all__ = ["Chiplet", "SystolicChiplet", "GpuChiplet", "CpuChiplet", "ReconfigurableChiplet", "SystolicMode",
           "ArchError", "CostTable", "MatrixCost", "DATAFLOWS", "KINDS", "op_costs", "matrix_costs", "gemm_report",
           "gemm_cycles", "cycles_table", "simulate", "mapping_efficiency", "utilisation", "chiplet_area_mm2",
           "area_breakdown_mm2", "chiplet_cost_usd", "check_manufacturable", "static_power_w", "active_power_w",
           "peak_dynamic_power_w", "die_yield", "dies_per_wafer", "kgd_cost", "known_good_die_cost_usd", "node",
           "nodes", "precisions", "precision_bits", "precision_bytes", "build_chiplet", "preset", "preset_names",
           "preset_spec", "technology", "PACKAGE_COST_PARTS", "PACKAGINGS", "package_cost",
           "package_cost_parts", "packaging_params", "idle_power_w", "gemm_at_limit", "clock_at_power",
           "KernelPower", "kernel_at_limit"]
