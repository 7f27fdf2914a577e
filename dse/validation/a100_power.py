"""The 7 nm GPU tensor cores' switching energy fitted on a published dense A100 GEMM at its 400 W limit, as the
5 nm figure was on the measured H200 (dse.validation.h200): the 7 nm node's ``gpu_mac_overhead``
(arch/data/technology.yaml), which ``a100-like`` carries.

Published (nobody on the team measured them):

- H. He, "Strangely, Matrix Multiplications on GPUs Run Faster When Given 'Predictable' Data!", thonking.ai,
  2024 (https://www.thonking.ai/p/strangely-matrix-multiplications): one A100 under its 400 W power limit,
  an 8192 x 8192 x 8192 cuBLAS GEMM in 16 bits benchmarked from PyTorch reaches 257 TFLOP/s on
  ``torch.randn`` inputs and 295 TFLOP/s on zeros (inputs that switch nothing); the same kernel, so the
  random inputs run it at 257 / 295 = 0.871 of the clock the zeros run at (the full 1,410 MHz: 295 TFLOP/s
  is 0.946 of the 312 TFLOP/s peak). The GPU fully idle: 88 W (nvidia-smi).
- NVIDIA A100 datasheet: 400 W max TDP (SXM), 312 TFLOP/s dense BF16/FP16 at the 1,410 MHz boost clock.

Fit (`fit_mac_energy`): the 7 nm node's energy per MAC (TPUv4i, every precision) times one factor, the GPU
class's ``gpu_mac_overhead``, at which the model's clock for that GEMM on ``a100-like`` under 400 W
(arch.costing.gemm_at_limit: the step model's balance of leakage, active power, switching and DRAM energy) is
the measured 0.871: 4.01 x, 2.41 pJ per BF16 MAC (GH100's fitted figure is 2.41 too). The 88 W idle
reading is of a GPU fully idle, not the provisioned chip with its clocks up that ``idle_w`` means (H200:
119-126 W), so it is not used. ``dse train`` keeps its time (its stacks' factors were fitted on runs at
the clock their limits left) and prices its energy at that clock (docs/validation.md, "The A100 under its
power limit").
"""
from __future__ import annotations

import arch
import memory

from . import gpu

CHIPLET = "a100-like"
#: the GEMM measured (M = N = K) and its precision
SIZE, PRECISION = 8192, "bf16"
#: TFLOP/s on random and on zero inputs under the 400 W limit (H. He, thonking.ai, 2024; module docstring)
RANDOM_TFLOPS, ZEROS_TFLOPS = 257.0, 295.0
MEASURED_CLOCK = RANDOM_TFLOPS / ZEROS_TFLOPS
#: the A100 fully idle (the same source): not what a provisioned chip's ``idle_w`` means
IDLE_W = 88.0
POWER_LIMIT_W = 400.0      # NVIDIA A100 datasheet, SXM max TDP


def _memory() -> tuple[float, float]:
    """(sustained bandwidth B/s, DRAM J per byte) of the A100's datasheet HBM2e, as the step model reads it."""
    sheet = gpu.DATASHEET_MEMORY[CHIPLET]
    spec = memory.memory_preset(sheet["memory"], {"data_rate_gbps": sheet["data_rate_gbps"]})
    return gpu.sustained_bandwidth_Bps(CHIPLET), spec.energy_j_per_byte


def scaled(factor: float) -> dict:
    """The 7 nm node's energy per MAC of every precision times ``factor`` (pJ): a GPU's at that overhead."""
    return {p: round(v * factor, 4) for p, v in arch.technology.node("7nm").mac_energy_pj.items()}


def modelled(gpu_mac_overhead: float | None = None) -> tuple[float, float, float]:
    """(clock fraction, TFLOP/s, power W) of the measured GEMM on ``a100-like`` under its power limit, with
    ``gpu_mac_overhead`` overriding the node's (default: the preset as shipped)."""
    changes = {"overrides": {"gpu_mac_overhead": gpu_mac_overhead}} if gpu_mac_overhead is not None else {}
    ch = arch.preset(CHIPLET, **changes)
    k = arch.gemm_at_limit(ch, SIZE, SIZE, SIZE, PRECISION, *_memory())
    return k.clock, 2.0 * SIZE ** 3 / k.time_s / 1e12, k.power_w


def fit_mac_energy() -> tuple[float, dict]:
    """(factor, energy per MAC by precision in pJ) at which `modelled`'s clock is `MEASURED_CLOCK` (brentq)."""
    from scipy.optimize import brentq

    factor = round(brentq(lambda k: modelled(k)[0] - MEASURED_CLOCK, 1.0, 10.0, xtol=1e-5), 3)
    return factor, scaled(factor)
