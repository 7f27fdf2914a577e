"""The TPU v5e's per-operation overhead fitted on published XLA matmul times (issue 49, defect 5).

Published (JAX documentation, "Pallas TPU: Matrix Multiplication", docs/pallas/tpu/matmul.ipynb in
jax-ml/jax, its recorded outputs): ``jnp.matmul`` (XLA) of square bf16 matrices on one TPU v5e, each call
timed with ``timeit`` around ``jax.block_until_ready`` (100 trials), so the time includes JAX's Python
dispatch and the wait for the result, "an upper bound on the actual runtime of the kernel":

| M = N = K | seconds | FLOP/s utilisation (of 197 TFLOP/s) |
|---|---|---|
| 1,024 | 119.4e-6 | 9.1 % |
| 4,096 | 827.3e-6 | 84.3 % |
| 8,192 | 6,047e-6 | 92.3 % |

Fit (`fit_kernel_overhead_us`): the ``tpu-v5e-like`` preset's ``kernel_overhead_us`` (a fixed time added to
every operator's kernel, arch.roofline) at which the model's times (arch.costing.matrix_costs: four 128 x 128
weight-stationary MXUs, double-buffered weights) have the least squared log error on the three rows: 108.6 us.
The model's compute alone reaches 99.96 % of peak at 4,096; with the overhead 86.4 % (measured 84.3 %), at
8,192 97.9 % (92.3 %: the MXUs' own shortfall is not modelled). The overhead is an upper bound for an
operator inside one compiled XLA program, which pays the host's dispatch once per program, not per operator.
"""
from __future__ import annotations

import math

import arch

CHIPLET = "tpu-v5e-like"
#: (M = N = K, measured seconds) of XLA's bf16 matmul on one TPU v5e (module docstring)
MEASURED = ((1024, 119.43008983507753e-6), (4096, 827.2899803705514e-6), (8192, 6047.147869830951e-6))


def compute_s(size: int) -> float:
    """The model's compute time of a square bf16 GEMM on the preset, without any overhead."""
    return float(arch.matrix_costs(arch.preset(CHIPLET), size, size, size, 1.0, "bf16").time_s[0])


def fit_kernel_overhead_us() -> float:
    """The overhead (us) of least squared log error over `MEASURED` (scipy's bounded scalar minimiser)."""
    from scipy.optimize import minimize_scalar

    compute = [(compute_s(n), t) for n, t in MEASURED]
    error = lambda o: sum(math.log((c + o) / t) ** 2 for c, t in compute)     # noqa: E731
    return round(float(minimize_scalar(error, bounds=(0.0, 1e-3), method="bounded").x) * 1e6, 1)
