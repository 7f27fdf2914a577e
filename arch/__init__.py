"""Compute chiplets: systolic-array cycle model, operator cost tables, energy, area, yield and cost."""
from .area_cost import (chiplet_area_mm2, chiplet_cost_usd, die_yield, dies_per_wafer,
                        known_good_die_cost_usd, kgd_cost, static_power_w)
from .chiplet import DATAFLOWS, KINDS, Chiplet
from .costing import CostTable, op_costs
from .errors import ArchError
from .systolic import cycles_table, gemm_cycles, mapping_efficiency, utilisation
from .technology import node, nodes

__all__ = ["Chiplet", "ArchError", "CostTable", "DATAFLOWS", "KINDS", "op_costs", "gemm_cycles", "cycles_table",
           "mapping_efficiency", "utilisation", "chiplet_area_mm2", "chiplet_cost_usd", "static_power_w",
           "die_yield", "dies_per_wafer", "kgd_cost", "known_good_die_cost_usd", "node", "nodes"]
