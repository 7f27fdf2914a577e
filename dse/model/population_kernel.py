"""The population kernel: every metric (dse.model.metrics) of every design in one Numba call, and the
per-design failure kernels the Evaluator's reports use (`single_failures`, `remapped_design`).

Per design: its package figures (dse.model.package_figures), the intact pass (dse.model.perf_model), its
metrics row (dse.model.metric_rows) and its failure columns: every single chiplet (and link) failure, then
the Monte Carlo sets of its package size (dse.model.failure_sets), by deltas (dse.model.failures, which runs
the intact passes too when failures are evaluated) or in full where routes change (dse.model.failure_routes);
dse.model.metric_rows.retained_frac is the throughput each keeps.
"""
from __future__ import annotations

from collections import namedtuple

import numba as nb
import numpy as np

from .failure_remap import remap, restore
from .failures import failure_pass
from .hbm_placement import place_design
from .metric_rows import no_failures, write_metrics
from .metrics import N_KERNEL_METRICS
from .package_figures import PACKAGE_FIGURES, one_package
from .perf_model import LATENCY, PASS_FIELDS, SHORT, base_passes

#: what dse.model.package_figures.one_package reads of the kernel tables: `evaluate_arrays` hands it these
#: (bound once per call) rather than T, whose ~60 arrays an inline helper's argument takes a reference to
#: each time it is called, here once per design (issue 52, tenth round)
PackageTerms = namedtuple("PackageTerms", [
    "ddr_phy", "kind_area", "hbm_phy", "kind_wafer_kgd", "kind_wafer_cost", "kind_d0", "yield_alpha",
    "wafer_diameter", "hbm_cost", "hbm_footprint", "ddr_cost", "packaging", "ddr_bw", "ddr_e", "kind_static_w",
    "kind_active_w", "kind_peak_dyn_w", "hbm_bw", "hbm_e"])


@nb.njit(cache=True, nogil=True)
def evaluate_arrays(T, R, shape, rows, cols, kind, stacks, ddr, slots, ncopy, split, unplaced, with_faults, screen,
                    mc_sets, package, W, W2, limits, incremental):
    """Every metric of every design; ``package``: their package figures (dse.model.package_figures) when
    known (`package_arrays`: ``[P, 6]``; the packages of a system share them), else ``[0, 6]`` and they are
    computed here.

    Without failures every design's intact pass runs in one call (`base_passes`; ``incremental``: a design
    with the previous one's package costs only the stages that differ, the same figures); with them each
    design's failures start from its own intact pass, so dse.model.failures.failure_pass runs the passes
    one design at a time, and a design with a metric above its bound in ``limits`` (``[N_KERNEL_METRICS]``,
    +inf: none; dse.model.contract.FaultsWithin) skips them, its fault columns as without failures."""
    P = rows.shape[0]
    terms = PackageTerms(T.ddr_phy, T.kind_area, T.hbm_phy, T.kind_wafer_kgd, T.kind_wafer_cost, T.kind_d0,
                         T.yield_alpha, T.wafer_diameter, T.hbm_cost, T.hbm_footprint, T.ddr_cost, T.packaging,
                         T.ddr_bw, T.ddr_e, T.kind_static_w, T.kind_active_w, T.kind_peak_dyn_w, T.hbm_bw, T.hbm_e)
    out = np.zeros((P, N_KERNEL_METRICS))
    sizes = rows * cols
    figures = np.zeros((P, len(PACKAGE_FIGURES)))
    for p in range(P):
        if package.shape[0] > 0:
            figures[p] = package[p]
        else:
            one_package(terms, sizes[p], kind[p], stacks[p], ddr[p], figures[p])
    res = np.zeros((P, len(PASS_FIELDS)))
    if with_faults:
        n_sets = kind.shape[1] + R.n_phys.max() + mc_sets.shape[1]
        sets = np.zeros((n_sets, max(mc_sets.shape[2], 1)), np.int64)
        failure_pass(T, R, shape, sizes, kind, stacks, ddr, slots, ncopy, split, W, W2, res, figures, unplaced, limits,
                     mc_sets, screen, sets, np.zeros(n_sets, np.int64), np.zeros(n_sets, np.int64),
                     np.zeros((n_sets, 3)), out, np.int64(0), np.int64(P))
        return out
    base_passes(T, R, shape, sizes, kind, stacks, ddr, slots, ncopy, split, W, res, incremental, np.int64(0),
                np.int64(P))
    for p in range(P):
        write_metrics(out[p], res[p], figures[p], T.tokens, unplaced[p])
        no_failures(out[p])                 # no failures evaluated: none survived, Monte Carlo not run
    return out


@nb.njit(cache=True)
def single_failures(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, W, W2):
    """Per single failure (dse.model.failure_sets.single_sets: chiplets, then links): (latency after it,
    capacity shortfall after it); the last row: the intact design. dse.model.failures.failure_pass on this
    design alone, typed as `evaluate_arrays` calls it (one compiled form)."""
    n_sets = n + R.n_phys[sh]
    after = np.zeros((n_sets, 3))
    res = np.zeros((1, len(PASS_FIELDS)))
    failure_pass(T, R, np.full(1, sh), np.full(1, n), kind.reshape((1, kind.shape[0])),
                 stacks.reshape((1, stacks.shape[0])), np.full(1, ddr),
                 slots.reshape((1, slots.shape[0], slots.shape[1])), ncopy.reshape((1, ncopy.shape[0])), split, W, W2,
                 res, np.zeros((1, len(PACKAGE_FIGURES))), np.zeros(1, np.int64), np.full(N_KERNEL_METRICS, np.inf),
                 np.zeros((n + 1, 0, 1), np.int64), np.bool_(False), np.zeros((n_sets, 1), np.int64),
                 np.zeros(n_sets, np.int64), np.zeros(n_sets, np.int64), after, np.zeros((0, N_KERNEL_METRICS)),
                 np.int64(0), np.int64(1))
    k = (n if n > 1 else 0) + R.n_phys[sh]          # single_sets' count: chiplets (none alone), then links
    out = np.zeros((k + 1, 2))
    out[k, 0], out[k, 1] = res[0, LATENCY], res[0, SHORT]
    out[:k, 0] = after[:k, 0]
    out[:k, 1] = after[:k, 2]
    return out


@nb.njit(cache=True)
def remapped_design(T, n, dead, kind, stacks, slots, ncopy, split, W):
    """(whether every unit found a chiplet, slots, copy counts) of a design after the chiplets ``dead`` fail
    (dse.model.failure_remap.remap); ``W`` holds the intact design's mapping again afterwards. The re-mapping
    reads the intact design's HBM placement only (each chiplet's copies and bytes stored: `place_design`,
    the memory step of the intact pass), not its stage figures, so only that step runs."""
    place_design(n, kind, stacks, slots, ncopy, split, T.hbm_cap, T.kind_sram_cap, T.stream_buf, T.unit_capacity,
                 T.unit_kv,
                 T.unit_w_copy, T.unit_other_dram, T.unit_read_scale, W.chip_ptr, W.cursor, W.item_u, W.item_r,
                 W.stored, W.overflow, W.f, W.f_sram, W.buf_size, W.buf_read, W.buf_density, W.buf_order,
                 W.buf_spill)
    W.dead[: dead.shape[0]] = dead
    for x in range(dead.shape[0]):
        W.is_dead[dead[x]] = True
    W.count2[:] = ncopy
    W.slots2[:] = slots
    n_moved, ok = remap(T.unit_capacity, T.unit_kv, T.hbm_cap, T.kind_sram_cap, kind, n, W.dead, dead.shape[0], W.is_dead, slots, ncopy,
                        split, stacks, W.chip_ptr, W.item_u, W.stored, W.slots2, W.count2, W.stored2, W.moved,
                        W.moved_list, W.free)
    new_slots, count = W.slots2.copy(), W.count2.copy()
    restore(n_moved, W.moved_list, W.moved, slots, ncopy, W.slots2, W.count2)
    for x in range(dead.shape[0]):
        W.is_dead[dead[x]] = False
    return ok, new_slots, count
