"""Gaudi 2's matrix-engine energy per MAC fitted to its published power limit, as b200-like's tensor cores
were (arch/data/chiplets.yaml): the ``systolic_mac_overhead`` override that ``gaudi2-like`` carries.

Published (datasheet only; measured results of Gaudi systems are held out, issue 55):

- R. Kaplan (Intel), "Intel Gaudi 3 AI Accelerator", Hot Chips 2024, generations table: Gaudi 2 (HL-225,
  TSMC 7 nm) at 600 W TDP, 432 TFLOP/s dense BF16.

Why a fit: the shared 7 nm systolic energy per MAC (arch/data/technology.yaml: the GPU figure fitted on an
A100 over the TPU v4 / A100 perf-per-watt ratio, 1.07 pJ per BF16 MAC) runs a 4096-cube BF16 GEMM on
``gaudi2-like`` at 293 W, 49 % of the 600 W limit, while Gaudi 3 (5 nm, the same per-MAC energy) reaches its
900 W. Issue 55 asks a large GEMM of each part to draw 80-100 % of its published limit. The model counts the
die as its MMEs and SRAM; what it does not count apart (24 TPCs, 24 x 100 GbE NICs and SerDes, media engines)
is carried per MAC.

Fit (`fit_mac_overhead`): the factor over the 7 nm arithmetic (TPUv4i, every precision) at which that GEMM,
run as `dse gemm` runs it (arch.costing.gemm_at_limit at the datasheet HBM's sustained bandwidth), draws the
limit at the full clock: the largest figure that does not slow it, an upper bound (M).
"""
from __future__ import annotations

import arch
import memory

from . import gpu

CHIPLET = "gaudi2-like"
#: the GEMM (M = N = K) and its precision
SIZE, PRECISION = 4096, "bf16"
POWER_LIMIT_W = 600.0      # Gaudi 2 OAM TDP (Hot Chips 2024 generations table)


def _memory() -> tuple[float, float]:
    """(sustained bandwidth B/s, DRAM J per byte) of the datasheet HBM2e, as `dse gemm` reads it."""
    sheet = gpu.DATASHEET_MEMORY[CHIPLET]
    spec = memory.memory_preset(sheet["memory"], {"data_rate_gbps": sheet["data_rate_gbps"]})
    return gpu.sustained_bandwidth_Bps(CHIPLET), spec.energy_j_per_byte


def modelled(systolic_mac_overhead: float | None = None) -> arch.KernelPower:
    """The GEMM on ``gaudi2-like`` under its limit, with ``systolic_mac_overhead`` overriding the preset's
    (default: the preset as shipped)."""
    changes = {"overrides": {"systolic_mac_overhead": systolic_mac_overhead}} \
        if systolic_mac_overhead is not None else {}
    ch = arch.preset(CHIPLET, **changes)
    return arch.gemm_at_limit(ch, SIZE, SIZE, SIZE, PRECISION, *_memory())


def fit_mac_overhead() -> float:
    """The factor (3 decimals, rounded down) at which `modelled` draws `POWER_LIMIT_W` at the full clock."""
    import math

    lo, hi = 1.0, 10.0                     # the full clock at lo, the limit binding at hi (bisection)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if modelled(mid).clock < 1.0:
            hi = mid
        else:
            lo = mid
    return math.floor(lo * 1000.0) / 1000.0
