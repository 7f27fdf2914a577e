"""Memory technology presets (HBM stacks, DDR / LPDDR channels), loaded from ``memory/data/memory.yaml``.

A preset describes one *unit*: an HBM stack, a DDR channel (one DIMM, 64 data bits) or an LPDDR x16
channel. The data file holds the device organisation and JEDEC timings with their sources; the peak
bandwidth and the burst time are derived from them:

    peak_bandwidth = data_rate x bus_width / 8
    tBL            = burst_bytes x 8 / (data_rate x bus_width / channels)

Any number of the data file can be overridden (a study's ``overrides: {capacity_gib: 24}``); a key that
is not in the preset, or a value of the wrong sign or type, raises `MemorySpecError` naming the key.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from numbers import Real

import yaml

from .errors import MemorySpecError

GB = 1e9
GIB = 2**30
_NS = 1e-9

#: whole-number keys of a preset (everything else numeric is a float)
_INT_KEYS = ("bus_width_bits", "channels", "burst_bytes", "row_bytes", "banks", "bank_groups", "ranks",
             "channels_per_command_bus")
#: keys that may be zero (everything else numeric must be > 0)
_MAY_BE_ZERO = ("footprint_mm2", "phy_area_mm2", "cost_usd_per_gib", "energy_pj_per_bit", "tRFC_ns", "row_command_ns",
                "column_command_ns", "tCS_ns")


@dataclass(frozen=True)
class MemorySpec:
    """One memory unit (an HBM stack or a DDR / LPDDR channel). SI units; bytes, seconds, joules."""

    kind: str
    unit: str
    peak_bandwidth_Bps: float      # all channels of the unit
    capacity_bytes: float
    tRCD_s: float
    tCL_s: float
    tRP_s: float
    tRAS_s: float
    tBL_s: float                   # one burst on one channel (derived)
    energy_j_per_byte: float
    phy_area_mm2: float
    footprint_mm2: float
    cost_usd_per_byte: float
    data_rate_bps: float           # per pin
    bus_width_bits: int
    channels: int                  # independent data buses (pseudo-channels / sub-channels)
    burst_bytes: int
    row_bytes: int                 # row (page) opened by one activation on one channel
    banks: int                     # per channel, all bank groups, ranks and SIDs
    bank_groups: int
    ranks: int                     # activation windows (tRRD, tFAW) per channel
    tRC_s: float
    tRRD_s: float
    tFAW_s: float
    tRFC_s: float                  # all-bank refresh, once every tREFI
    tREFI_s: float
    row_command_s: float           # command-bus time of one miss's activate + precharge
    column_command_s: float        # command-bus time of one read on that bus (0: separate column bus)
    channels_per_command_bus: int  # data channels sharing the command bus
    tCS_s: float                   # data-bus gap between reads of different ranks (rank switch)

    @property
    def is_hbm(self) -> bool:
        return self.kind.startswith("hbm")

    @property
    def channel_bandwidth_Bps(self) -> float:
        """Peak bandwidth of one channel (pseudo-channel, sub-channel)."""
        return self.peak_bandwidth_Bps / self.channels


@lru_cache(maxsize=1)
def _table() -> dict:
    return yaml.safe_load((resources.files("memory") / "data" / "memory.yaml").read_text())


def memory_kinds() -> list[str]:
    return sorted(_table())


def preset_keys(kind: str) -> list[str]:
    """The keys of ``kind``'s preset a study may override."""
    return [k for k in _raw(kind) if k != "unit"]


def _raw(kind: str) -> dict:
    table = _table()
    if kind not in table:
        raise MemorySpecError(f"unknown memory kind {kind!r}; allowed: {', '.join(sorted(table))}")
    return table[kind]


def _checked(kind: str, key: str, value) -> float | int:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise MemorySpecError(f"memory {kind}: {key} must be a number, and finite (got {value!r})")
    if key in _INT_KEYS:
        if value != int(value):
            raise MemorySpecError(f"memory {kind}: {key} must be a whole number (got {value!r})")
        value = int(value)
    if value < 0 or (value == 0 and key not in _MAY_BE_ZERO):
        bound = ">= 0" if key in _MAY_BE_ZERO else "> 0"
        raise MemorySpecError(f"memory {kind}: {key} must be {bound} (got {value!r})")
    return value


def memory_preset(kind: str, overrides: dict | None = None) -> MemorySpec:
    """The preset of ``kind`` in SI units; ``overrides`` use the data file's keys and units."""
    base = _raw(kind)
    overrides = dict(overrides or {})
    allowed = preset_keys(kind)
    for key in overrides:
        if key not in allowed:
            raise MemorySpecError(f"memory {kind}: unknown override {key!r}; allowed: {', '.join(allowed)}")
    raw = {k: _checked(kind, k, v) for k, v in {**base, **overrides}.items() if k != "unit"}

    width, channels = raw["bus_width_bits"], raw["channels"]
    if width % channels:
        raise MemorySpecError(f"memory {kind}: bus_width_bits ({width}) must split evenly over channels ({channels})")
    if raw["row_bytes"] < raw["burst_bytes"]:
        raise MemorySpecError(f"memory {kind}: row_bytes ({raw['row_bytes']}) must be >= burst_bytes "
                              f"({raw['burst_bytes']})")
    if raw["tRC_ns"] < raw["tRAS_ns"]:
        raise MemorySpecError(f"memory {kind}: tRC_ns ({raw['tRC_ns']}) must be >= tRAS_ns ({raw['tRAS_ns']})")
    blocked = raw["tRFC_ns"] + raw["tRP_ns"] + raw["tRCD_ns"]
    if blocked >= raw["tREFI_ns"]:
        raise MemorySpecError(f"memory {kind}: tRFC_ns + tRP_ns + tRCD_ns ({blocked:g}) must be < tREFI_ns "
                              f"({raw['tREFI_ns']:g}): refresh would leave no time for reads")

    rate_bps = raw["data_rate_gbps"] * 1e9
    peak_Bps = rate_bps * width / 8
    tBL_s = raw["burst_bytes"] * 8 / (rate_bps * width / channels)
    return MemorySpec(
        kind=kind, unit=base["unit"], peak_bandwidth_Bps=peak_Bps, capacity_bytes=raw["capacity_gib"] * GIB,
        tRCD_s=raw["tRCD_ns"] * _NS, tCL_s=raw["tCL_ns"] * _NS, tRP_s=raw["tRP_ns"] * _NS,
        tRAS_s=raw["tRAS_ns"] * _NS, tBL_s=tBL_s, energy_j_per_byte=raw["energy_pj_per_bit"] * 8e-12,
        phy_area_mm2=raw["phy_area_mm2"], footprint_mm2=raw["footprint_mm2"],
        cost_usd_per_byte=raw["cost_usd_per_gib"] / GIB, data_rate_bps=rate_bps, bus_width_bits=width,
        channels=channels, burst_bytes=raw["burst_bytes"], row_bytes=raw["row_bytes"], banks=raw["banks"],
        bank_groups=raw["bank_groups"], ranks=raw["ranks"], tRC_s=raw["tRC_ns"] * _NS,
        tRRD_s=raw["tRRD_ns"] * _NS, tFAW_s=raw["tFAW_ns"] * _NS, tRFC_s=raw["tRFC_ns"] * _NS,
        tREFI_s=raw["tREFI_ns"] * _NS, row_command_s=raw["row_command_ns"] * _NS,
        column_command_s=raw["column_command_ns"] * _NS, channels_per_command_bus=raw["channels_per_command_bus"],
        tCS_s=raw["tCS_ns"] * _NS)
