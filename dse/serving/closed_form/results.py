"""The named results of the closed form, one record per design (a NumPy structured array), the same for
every scheduler: `continuous_batching` and `chunked_prefill` return them, dse.serving.package writes its
columns from them by name.
"""
from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np


class DesignResults(NamedTuple):
    """One design's results, as `continuous.continuous_design` and `chunked.chunked_design` return them
    (`write_results` copies them into a record of `RESULTS`)."""
    ttft_mean_s: float
    tpot_mean_s: float
    ttft_p99_s: float
    tpot_p99_s: float
    goodput_req_s: float
    max_rate_at_slo_req_s: float
    saturation_req_s: float
    in_flight: float


#: the fields of a design's results (units in the names; ``in_flight``: sequences in flight on average)
FIELDS = DesignResults._fields
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


@nb.njit(cache=True)
def write_results(r, res):
    """Copy the `DesignResults` ``res`` into the record ``r`` of `RESULTS`, field by field."""
    r.ttft_mean_s = res.ttft_mean_s
    r.tpot_mean_s = res.tpot_mean_s
    r.ttft_p99_s = res.ttft_p99_s
    r.tpot_p99_s = res.tpot_p99_s
    r.goodput_req_s = res.goodput_req_s
    r.max_rate_at_slo_req_s = res.max_rate_at_slo_req_s
    r.saturation_req_s = res.saturation_req_s
    r.in_flight = res.in_flight
