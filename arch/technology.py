"""Technology-node figures (energies, densities, defects, wafer cost) and manufacturing constants.

The numbers live in ``arch/data/technology.yaml`` with their sources. A chiplet may override any node
figure (``Chiplet.overrides``): ``node("7nm", {"wafer_cost_usd": 12000, "mac_energy_pj": {"bf16": 0.5}})``
returns the node with those figures replaced and the rest kept; unknown keys are an ArchError naming
the key and what is allowed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import lru_cache
from importlib import resources

import yaml

from .errors import ArchError


@dataclass(frozen=True)
class Node:
    """Figures of one technology node (units in the field names; see technology.yaml)."""

    name: str
    mac_energy_pj: dict             # the arithmetic of one MAC by precision
    gpu_mac_overhead: float         # a GPU tensor core's energy per MAC over the arithmetic (fitted)
    systolic_mac_overhead: float    # a systolic array's: the GPU's over a TPU's perf/W advantage
    sram_pj_per_byte: dict          # bank size in KB -> pJ per byte read or written
    register_pj_per_byte: float
    sram_mm2_per_mb: float
    pe_area_um2: dict
    d2d_phy_mm2: float
    periphery_fraction: float
    static_w_per_mm2: float
    active_pj_per_mm2_cycle: float
    defect_density_per_cm2: float
    wafer_cost_usd: float
    gpu_sm_area_mm2: float
    cpu_core_area_mm2: float

    @property
    def sram_read_pj_per_byte(self) -> float:
        """Energy per byte of a 256 KB bank (the default bank size)."""
        return self.sram_pj(256.0)

    def sram_pj(self, bank_kb: float) -> float:
        """SRAM access energy per byte for a bank of ``bank_kb`` KB, log-linear between table points."""
        sizes = sorted(float(k) for k in self.sram_pj_per_byte)
        values = [float(self.sram_pj_per_byte[k]) for k in sorted(self.sram_pj_per_byte, key=float)]
        x = math.log2(max(bank_kb, 1e-9))
        xs = [math.log2(s) for s in sizes]
        if x <= xs[0]:
            i = 0
        elif x >= xs[-1]:
            i = len(xs) - 2
        else:
            i = max(j for j in range(len(xs) - 1) if xs[j] <= x)
        if len(xs) == 1:
            return values[0]
        t = (x - xs[i]) / (xs[i + 1] - xs[i])
        return max(values[i] + t * (values[i + 1] - values[i]), 0.0)


_PER_PRECISION = ("mac_energy_pj", "pe_area_um2")
_NODE_KEYS = tuple(f.name for f in fields(Node) if f.name != "name")


@lru_cache(maxsize=1)
def _table() -> dict:
    return yaml.safe_load((resources.files("arch") / "data" / "technology.yaml").read_text())


def nodes() -> list[str]:
    return sorted(_table()["nodes"])


def precisions() -> list[str]:
    return list(_table()["precisions"])


def precision_bits(precision: str) -> int:
    table = _table()["precisions"]
    if precision not in table:
        raise ArchError(f"unknown precision {precision!r}; allowed: {', '.join(table)}")
    return int(table[precision])


def precision_bytes(precision: str) -> float:
    return precision_bits(precision) / 8.0


def _positive(key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or math.isinf(value):
        raise ArchError(f"technology override {key}: expected a non-negative number, got {value!r}")
    return float(value)


def check_overrides(overrides: dict | None) -> dict:
    """Validate a technology override mapping; returns it with numbers as floats."""
    out = {}
    for key, value in (overrides or {}).items():
        if key not in _NODE_KEYS:
            raise ArchError(f"unknown technology override {key!r}; allowed: {', '.join(_NODE_KEYS)}")
        if key in _PER_PRECISION or key == "sram_pj_per_byte":
            if not isinstance(value, dict):
                raise ArchError(f"technology override {key}: expected a mapping, got {value!r}")
            sub = {}
            for k, v in value.items():
                if key == "sram_pj_per_byte":
                    sub[float(_positive(f"{key}.{k}", k))] = _positive(f"{key}.{k}", v)
                else:
                    if k not in precisions():
                        raise ArchError(f"technology override {key}.{k}: unknown precision; "
                                        f"allowed: {', '.join(precisions())}")
                    sub[k] = _positive(f"{key}.{k}", v)
            out[key] = sub
        else:
            out[key] = _positive(key, value)
    return out


def node(name: str, overrides: dict | None = None) -> Node:
    """Figures of one technology node, optionally with some overridden (see module docstring)."""
    table = _table()["nodes"]
    if name not in table:
        raise ArchError(f"unknown technology node {name!r}; allowed: {', '.join(sorted(table))}")
    fields_ = {k: (dict(v) if isinstance(v, dict) else v) for k, v in table[name].items()}
    for key, value in check_overrides(overrides).items():
        if isinstance(value, dict) and key in _PER_PRECISION:
            fields_[key] = {**fields_[key], **value}
        else:
            fields_[key] = value
    return Node(name=name, **fields_)


def _manufacturing(key: str) -> float:
    return float(_table()["manufacturing"][key])


def wafer_diameter_mm() -> float:
    return _manufacturing("wafer_diameter_mm")


def yield_alpha_logic() -> float:
    return _manufacturing("yield_alpha_logic")


def scribe_lane_mm() -> float:
    return _manufacturing("scribe_lane_mm")


def edge_loss_mm() -> float:
    return _manufacturing("edge_loss_mm")


def reticle_limit_mm2() -> float:
    return _manufacturing("reticle_limit_mm2")
