"""The named results of the closed form, one record per design (a NumPy structured array), the same for
every scheduler: `continuous_batching` and `chunked_prefill` return them, dse.serving.package writes its
columns from them by name.
"""
from __future__ import annotations

import numba as nb
import numpy as np

#: the fields of a design's results (units in the names; ``in_flight``: sequences in flight on average)
FIELDS = ("ttft_mean_s", "tpot_mean_s", "ttft_p99_s", "tpot_p99_s", "goodput_req_s", "max_rate_at_slo_req_s",
          "saturation_req_s", "in_flight")
RESULTS = np.dtype([(name, np.float64) for name in FIELDS])


def results(n: int) -> np.ndarray:
    """Zeroed results of ``n`` designs."""
    return np.zeros(n, RESULTS)


@nb.njit(cache=True)
def serves(d1, slope, p0, pk, slots):
    """Whether a design can serve one request: a batch slot, finite steps, a decode step and a prefill
    that take time (a design that cannot gets inf latencies and 0 rates)."""
    return slots >= 1.0 and np.isfinite(d1) and np.isfinite(p0) and np.isfinite(pk) and np.isfinite(slope) \
        and d1 > 0.0 and p0 + pk > 0.0
