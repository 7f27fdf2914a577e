"""A design's row of metrics (dse.model.metrics) in the population kernel: written from its intact pass and
package figures (`write_metrics`), checked against the study's bounds (`within`), and its failure columns
summarised from each failure's figures (`failure_summary`, `retained_frac`), or marked not evaluated
(`no_failures`)."""
from __future__ import annotations

import numba as nb
import numpy as np

from .metrics import (M_ALL_SERVED, M_AREA, M_COST, M_DRAM, M_E_COMPUTE, M_E_DRAM, M_E_NET, M_E_STATIC, M_ENERGY,
                      M_FAULT_TOLERANCE, M_LATENCY, M_LATENCY_P99, M_MC_RETAINED, M_MC_SURVIVAL, M_NET,
                      M_PACKAGE_AREA, M_POWER, M_SHORT, M_THROUGHPUT, M_UNPLACED, M_WORST_RETAINED)
from .package_figures import F_AREA, F_COST, F_PACKAGE_AREA, F_POWER, F_STATIC
from .perf_model import DRAM, E_COMPUTE, E_DRAM, E_IDLE, E_NET, LATENCY, NET, P99, SHORT


@nb.njit(cache=True, inline="always")
def retained_frac(latency, short, lat_f, short_f):
    """Throughput kept after a failure: a failure never counts as a gain (re-mapping can land a unit
    somewhere better); 0 when some unit can no longer be held or nothing survives."""
    if short_f > short or not np.isfinite(lat_f) or lat_f <= 0.0:
        return 0.0
    return min(latency / lat_f, 1.0)


@nb.njit(cache=True, inline="always")
def failure_summary(latency, short, after, singles, samples, out):
    """The failure metrics (fault_tolerance_frac, worst_retained_frac, all_served_frac, mc_retained_frac,
    mc_survival_frac) of a design of intact ``latency`` and ``short`` from each failure's figures in
    ``after`` (dse.model.failure_sets' order), into its metrics row ``out`` (left 0 without single failures,
    NaN without Monte Carlo sets)."""
    kept_sum = 0.0
    worst = 1.0
    served = 0.0
    for i in range(singles):
        kept = retained_frac(latency, short, after[i, 0], after[i, 2])
        kept_sum += kept
        worst = min(worst, kept)
        served += 1.0 if kept > 0.0 else 0.0
    mc_kept = np.nan
    mc_survive = np.nan
    if samples > 0:
        mc_kept = 0.0
        mc_survive = 0.0
        for m in range(samples):
            kept = retained_frac(latency, short, after[singles + m, 0], after[singles + m, 2])
            mc_kept += kept / samples
            mc_survive += (1.0 if kept > 0.0 else 0.0) / samples
    out[M_MC_RETAINED] = mc_kept
    out[M_MC_SURVIVAL] = mc_survive
    if singles > 0:
        out[M_FAULT_TOLERANCE] = kept_sum / singles
        out[M_WORST_RETAINED] = worst
        out[M_ALL_SERVED] = served / singles


@nb.njit(cache=True, inline="always")
def no_failures(out):
    """The failure columns of a metrics row ``out`` whose failures were not evaluated: none survived (0, as
    the row was made), Monte Carlo not run (NaN)."""
    out[M_MC_RETAINED] = np.nan
    out[M_MC_SURVIVAL] = np.nan


@nb.njit(cache=True, inline="always")
def write_metrics(out, base, figures, tokens, unplaced):
    """A design's metrics (dse.model.metrics, but the largest die and the failure columns of
    `failure_summary`) into ``out`` from its intact pass ``base`` (dse.model.perf_model.PASS_FIELDS) and its
    package ``figures`` (dse.model.package_figures.PACKAGE_FIGURES)."""
    latency = base[LATENCY]
    e_compute, e_dram, e_net = base[E_COMPUTE], base[E_DRAM], base[E_NET]
    e_static = figures[F_STATIC] * latency + base[E_IDLE]       # leakage, and the idle draw of waiting chiplets
    out[M_LATENCY] = latency
    out[M_LATENCY_P99] = base[P99]
    out[M_THROUGHPUT] = tokens / latency
    out[M_ENERGY] = (e_compute + e_dram + e_net + e_static) / tokens
    out[M_E_COMPUTE] = e_compute / tokens
    out[M_E_DRAM] = e_dram / tokens
    out[M_E_NET] = e_net / tokens
    out[M_E_STATIC] = e_static / tokens
    out[M_AREA] = figures[F_AREA]
    out[M_PACKAGE_AREA] = figures[F_PACKAGE_AREA]
    out[M_COST] = figures[F_COST]
    out[M_POWER] = figures[F_POWER]
    out[M_SHORT] = base[SHORT]
    out[M_UNPLACED] = unplaced
    out[M_DRAM] = base[DRAM]
    out[M_NET] = base[NET]


@nb.njit(cache=True, inline="always")
def within(row, limits):
    """Whether no metric of ``row`` lies above its bound in ``limits`` (NaN lies within)."""
    for j in range(limits.shape[0]):
        if row[j] > limits[j]:
            return False
    return True
