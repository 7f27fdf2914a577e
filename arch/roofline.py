"""The time of one operator, one kernel: its compute and its memory traffic overlapped in a pipeline.

A kernel that streams its operands in n steps (a GPU's K slices per SM, per wave) overlaps the load of
step i + 1 with the compute of step i, so n steps of load l and compute k take
``l + (n - 1) max(l, k) + k = n max(l, k) + min(l, k)``; with C = n k and M = n l in all,
``max(C, M) + min(C, M) / n``: a bare max when the pipeline is deep, nearer a sum when it is short
(the load of the first step and the compute of the last stand alone). The kernel's ``overhead`` (launch,
fill and drain, the last wave's tail) adds, overlapping nothing, and the host's ``dispatch`` time per
kernel is a floor: a kernel shorter than it leaves the device waiting for the next one.

Used by the step model (dse.model.perf_model) and by the calibration (arch.calibrate), so a calibrated
chiplet runs the same formula it was fitted with.
"""
from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, inline="always", error_model="numpy")
def kernel_time_s(compute_s, memory_s, inv_steps, overhead_s, dispatch_s):
    """Seconds one kernel takes (see module docstring); ``inv_steps`` = 1 / n, 0 for perfect overlap."""
    t = overhead_s + max(compute_s, memory_s) + min(compute_s, memory_s) * inv_steps
    return max(t, dispatch_s)


@nb.njit(cache=True)
def kernel_times_s(compute_s, memory_s, inv_steps, overhead_s, dispatch_s):
    """`kernel_time_s` of arrays of kernels."""
    out = np.empty(compute_s.shape[0])
    for i in range(compute_s.shape[0]):
        out[i] = kernel_time_s(compute_s[i], memory_s[i], inv_steps[i], overhead_s, dispatch_s)
    return out
