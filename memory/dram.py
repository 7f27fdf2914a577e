"""Sustained bandwidth and access latency of a DRAM unit for an access stream.

Model (per channel, reads, an open-row controller with enough requests queued to keep the banks busy,
bursts spread over bank groups by the address map so back-to-back bursts are tCCD_S = tBL apart):

* Row-buffer hit rate from the access pattern. A stream is a sequence of *runs* of contiguous bytes
  (a whole weight matrix when streaming; a KV page; a 64 B line when scattered). A run of n bursts that
  starts at a uniformly random burst of a row of m bursts opens on average 1 + (n - 1)/m rows, so

      h = 1 - (1 + (n - 1)/m) / n          (n = ceil(run / burst), m = row / burst)

  giving h = 0 for single-burst random accesses and h -> 1 - 1/m for long streams. Refresh closes every
  open row once per tREFI, so of the ~tREFI / tBL bursts between refreshes up to ``banks`` more miss:
  the device's hit rate is ``h (1 - banks tBL / tREFI)`` (`row_hit_rate`, `row_hit_rate_array`).
* Throughput. The data bus moves one burst per tBL. Every row miss needs an activation, and a channel
  can activate at most once per ``act_interval = max(tRC / banks, tRRD / ranks, tFAW / (4 ranks))``:
  each bank once per tRC (bank-level parallelism over all its banks), the rank once per tRRD and four
  times per tFAW (JEDEC activation windows). The command bus carries each read (``column_command``, 0
  where reads have their own bus as in HBM) and each miss's activate + precharge (``row_command``), and
  is shared by ``channels_per_command_bus`` data channels (HBM pseudo-channels). On a channel of R > 1
  ranks the data bus idles ``tCS`` whenever a read follows one from another rank (a new DQS preamble:
  Ramulator2's nCS on sibling ranks). Hits stay in their run's row, hence its rank; a new run opens a row
  at a random address, in another rank with probability 1 - 1/R. The fraction of bursts that start a run,
  from the pattern's hit rate h_p (the device's, refresh closures taken out) and m bursts per row, is
  ``s = clip(((1 - h_p) - 1/m) / (1 - 1/m), 0, 1)``: 1 for scattered lines, 1/n for runs of n bursts
  from a row's start, 0 for a stream (whose rows the address map keeps in one rank for a whole sweep of
  its banks). A burst therefore takes

      interval = max(tBL + s (1 - 1/R) tCS, (1 - h) act_interval,
                     share x (column_command + (1 - h) row_command))

  and the sustained fraction of peak is ``f = (1 - refresh) tBL / interval``, where every tREFI the
  channel closes its rows, refreshes for tRFC and reopens one: ``refresh = (tRFC + tRP + tRCD) / tREFI``
  (the refresh penalty Ramulator2's latency-throughput tests derive, less the few-ns tRTP).
* Latency of one access: ``tCL + tBL + (1 - h)(tRP + tRCD)`` unloaded (a miss closes the open row and
  opens another), plus the M/D/1 queueing delay of its channel at utilisation rho with service time
  ``tBL / f`` (see `memory.queueing`).

Sources: JEDEC timing definitions (JESD79-4/-5, JESD209-5, JESD235, JESD238); Ramulator2 2.1's timing
constraints (src/dram/impl/DDR5.cpp: nRRDS, nFAW over a window of 4, nRC per bank, nBL + nCS between
sibling ranks); Jacob, Ng & Wang, *Memory Systems: Cache, DRAM, Disk* (2008), part II, for the
open-page and activation-window arguments.
tests/test_memory_ramulator2.py compares the sustained fraction with Ramulator2 2.1 at hit rates 0 to 0.97,
scattered 64 B reads and streams among them (tests/test_memory_row_locality.py: the presets' ranks).
The kernels take a `Device` (a named tuple of floats, see `device`) so a whole population of streams is
evaluated per call.
"""
from __future__ import annotations

import math
from collections import namedtuple

import numba as nb
import numpy as np

from .presets import MemorySpec
from .queueing import md1_wait_s

#: run length of a stream that reads whole tensors (weights, a sequence's KV cache) front to back
STREAM = math.inf
#: run length of scattered accesses: one 64 B cache line
SCATTERED_BYTES = 64.0

Device = namedtuple("Device", ["peak_Bps", "channels", "burst_bytes", "row_bytes", "tBL_s", "tCL_s", "tRCD_s",
                               "tRP_s", "act_interval_s", "read_bus_s", "miss_bus_s", "refresh_frac",
                               "refresh_reopen_frac", "rank_switch_s"])


def device(spec: MemorySpec) -> Device:
    """The numbers of ``spec`` the kernels read (all floats)."""
    act_interval = max(spec.tRC_s / spec.banks, spec.tRRD_s / spec.ranks, spec.tFAW_s / (4.0 * spec.ranks))
    return Device(peak_Bps=float(spec.peak_bandwidth_Bps), channels=float(spec.channels),
                  burst_bytes=float(spec.burst_bytes), row_bytes=float(spec.row_bytes), tBL_s=spec.tBL_s,
                  tCL_s=spec.tCL_s, tRCD_s=spec.tRCD_s, tRP_s=spec.tRP_s, act_interval_s=act_interval,
                  read_bus_s=spec.channels_per_command_bus * spec.column_command_s,
                  miss_bus_s=spec.channels_per_command_bus * spec.row_command_s,
                  refresh_frac=(spec.tRFC_s + spec.tRP_s + spec.tRCD_s) / spec.tREFI_s,
                  refresh_reopen_frac=min(spec.banks * spec.tBL_s / spec.tREFI_s, 1.0),
                  rank_switch_s=spec.tCS_s * (1.0 - 1.0 / spec.ranks))


# ---- Numba kernels -------------------------------------------------------------------------------------

@nb.njit(cache=True)
def row_hit_rate_of_run(run_bytes: float, burst_bytes: float, row_bytes: float) -> float:
    """Row-buffer hit rate of runs of ``run_bytes`` contiguous bytes (``inf`` = an endless stream)."""
    m = row_bytes / burst_bytes
    if run_bytes == np.inf:
        return 1.0 - 1.0 / m
    n = float(math.ceil(run_bytes / burst_bytes))
    if n < 1.0:
        n = 1.0
    return 1.0 - (1.0 + (n - 1.0) / m) / n


@nb.njit(cache=True)
def run_start_fraction(hit_rate: float, dev) -> float:
    """Fraction of bursts that start a new run (a row opened at a random address) at device hit rate ``hit_rate``."""
    keep = 1.0 - dev.refresh_reopen_frac
    h = min(hit_rate / keep, 1.0) if keep > 0.0 else 0.0       # the pattern's hit rate
    m = dev.row_bytes / dev.burst_bytes
    if m <= 1.0:
        return 1.0 - h
    f = ((1.0 - h) - 1.0 / m) / (1.0 - 1.0 / m)
    return 0.0 if f < 1e-9 else min(f, 1.0)      # below 1e-9: a stream, up to the rounding of h


@nb.njit(cache=True)
def burst_intervals(hit_rate: float, dev):
    """Time per burst each resource needs: data bus (with rank switches), activations, command bus."""
    miss = 1.0 - hit_rate
    data = dev.tBL_s + run_start_fraction(hit_rate, dev) * dev.rank_switch_s
    return data, miss * dev.act_interval_s, dev.read_bus_s + miss * dev.miss_bus_s


@nb.njit(cache=True)
def sustained_fraction(hit_rate: float, dev) -> float:
    """Sustained fraction of peak bandwidth at row-buffer hit rate ``hit_rate``."""
    data, act, bus = burst_intervals(hit_rate, dev)
    return (1.0 - dev.refresh_frac) * dev.tBL_s / max(data, act, bus)


@nb.njit(cache=True)
def unloaded_latency_s(hit_rate: float, dev) -> float:
    """Expected time from a read command to its last data beat on an idle channel."""
    return dev.tCL_s + dev.tBL_s + (1.0 - hit_rate) * (dev.tRP_s + dev.tRCD_s)


@nb.njit(cache=True)
def loaded_latency_s(hit_rate: float, utilisation: float, dev) -> float:
    """Unloaded latency plus the M/D/1 wait of a channel at ``utilisation`` of its sustained bandwidth."""
    service = dev.tBL_s / sustained_fraction(hit_rate, dev)
    return unloaded_latency_s(hit_rate, dev) + md1_wait_s(utilisation, service)


@nb.njit(cache=True)
def device_hit_rate(run_bytes: float, dev) -> float:
    """Row-buffer hit rate on the device: the pattern's, less the rows refresh closes."""
    return row_hit_rate_of_run(run_bytes, dev.burst_bytes, dev.row_bytes) * (1.0 - dev.refresh_reopen_frac)


@nb.njit(cache=True)
def row_hit_rate_array(run_bytes: np.ndarray, dev) -> np.ndarray:
    """`device_hit_rate` for each run length."""
    out = np.empty(run_bytes.shape[0])
    for i in range(run_bytes.shape[0]):
        out[i] = device_hit_rate(run_bytes[i], dev)
    return out


@nb.njit(cache=True)
def effective_bandwidth_array_Bps(hit_rate: np.ndarray, units: np.ndarray, dev) -> np.ndarray:
    """Sustained bandwidth of ``units[i]`` units (stacks / channels) at row-buffer hit rate ``hit_rate[i]``."""
    out = np.empty(hit_rate.shape[0])
    for i in range(hit_rate.shape[0]):
        out[i] = units[i] * dev.peak_Bps * sustained_fraction(hit_rate[i], dev)
    return out


@nb.njit(cache=True)
def loaded_latency_array_s(hit_rate: np.ndarray, utilisation: np.ndarray, dev) -> np.ndarray:
    """`loaded_latency_s` for each (hit rate, utilisation) pair; ``inf`` where utilisation >= 1."""
    out = np.empty(hit_rate.shape[0])
    for i in range(hit_rate.shape[0]):
        out[i] = loaded_latency_s(hit_rate[i], utilisation[i], dev)
    return out


# ---- one-spec convenience API -------------------------------------------------------------------------

def row_hit_rate(spec: MemorySpec, run_bytes: float = STREAM) -> float:
    """Row-buffer hit rate of ``spec`` for runs of ``run_bytes`` contiguous bytes (default: streaming)."""
    if not run_bytes > 0:
        raise ValueError(f"run_bytes must be > 0, got {run_bytes!r}")
    return float(device_hit_rate(float(run_bytes), device(spec)))


def efficiency(spec: MemorySpec, row_hit_rate: float | None = None) -> float:
    """Sustained fraction of peak bandwidth; ``row_hit_rate`` defaults to a streaming read."""
    h = _hit(spec, row_hit_rate)
    return float(sustained_fraction(h, device(spec)))


def effective_bandwidth_Bps(spec: MemorySpec, units: int, row_hit_rate: float | None = None) -> float:
    """Sustained bandwidth of ``units`` stacks / channels; ``row_hit_rate`` defaults to streaming."""
    return units * spec.peak_bandwidth_Bps * efficiency(spec, row_hit_rate)


def bandwidth_bound(spec: MemorySpec, row_hit_rate: float | None = None) -> str:
    """What limits the sustained bandwidth: 'data bus', 'rank switches', 'activations' or 'command bus'."""
    dev = device(spec)
    data, act, bus = burst_intervals(_hit(spec, row_hit_rate), dev)
    if act > max(data, bus):
        return "activations"
    if bus > data:
        return "command bus"
    return "rank switches" if data > dev.tBL_s else "data bus"


def access_latency_s(spec: MemorySpec, row_hit_rate: float | None = None, utilisation: float = 0.0) -> float:
    """Expected latency of one read at ``utilisation`` of the sustained bandwidth (``inf`` at >= 1)."""
    return float(loaded_latency_s(_hit(spec, row_hit_rate), float(utilisation), device(spec)))


def _hit(spec: MemorySpec, row_hit_rate: float | None) -> float:
    if row_hit_rate is None:
        return float(device_hit_rate(np.inf, device(spec)))
    if not 0.0 <= row_hit_rate <= 1.0:
        raise ValueError(f"row_hit_rate must be in [0, 1], got {row_hit_rate!r}")
    return float(row_hit_rate)
