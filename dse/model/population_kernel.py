"""The population kernel: every metric (dse.model.metrics) of every design in one Numba call, and the
per-design failure kernels the Evaluator's reports use (`single_failures`, `remapped_design`).

Per design: the intact pass (dse.model.perf_model), its package figures (dse.model.package_figures), and its
failure columns (`failure_sets`, the failure kernels, `failure_summary`): every single chiplet (and link)
failure, then the Monte Carlo sets of its package size (`monte_carlo_sets`), by deltas (dse.model.failures)
or in full where routes change (dse.model.failure_routes); `retained_frac` is the throughput each keeps.
"""
from __future__ import annotations

from collections import namedtuple

import numba as nb
import numpy as np

from .failure_remap import remap, restore
from .failure_routes import rerouted_failures
from .failures import failures_latency
from .hbm_placement import place_design
from .metrics import (M_ALL_SERVED, M_AREA, M_COST, M_DRAM, M_E_COMPUTE, M_E_DRAM, M_E_NET, M_E_STATIC, M_ENERGY,
                      M_FAULT_TOLERANCE, M_LATENCY, M_LATENCY_P99, M_MC_RETAINED, M_MC_SURVIVAL, M_NET,
                      M_PACKAGE_AREA, M_POWER, M_SHORT, M_THROUGHPUT, M_UNPLACED, M_WORST_RETAINED, N_KERNEL_METRICS)
from .package_figures import F_AREA, F_COST, F_PACKAGE_AREA, F_POWER, F_STATIC, PACKAGE_FIGURES, one_package
from .perf_model import DRAM, E_COMPUTE, E_DRAM, E_IDLE, E_NET, LATENCY, NET, P99, PASS_FIELDS, SHORT, base_pass, base_passes

#: what dse.model.package_figures.one_package reads of the kernel tables: `evaluate_arrays` hands it these
#: (bound once per call) rather than T, whose ~60 arrays an inline helper's argument takes a reference to
#: each time it is called, here once per design (issue 52, tenth round)
PackageTerms = namedtuple("PackageTerms", [
    "ddr_phy", "kind_area", "hbm_phy", "kind_wafer_kgd", "kind_wafer_cost", "kind_d0", "yield_alpha",
    "wafer_diameter", "hbm_cost", "hbm_footprint", "ddr_cost", "packaging", "ddr_bw", "ddr_e", "kind_static_w",
    "kind_active_w", "kind_peak_dyn_w", "hbm_bw", "hbm_e"])


@nb.njit(cache=True, inline="always")
def retained_frac(latency, short, lat_f, short_f):
    """Throughput kept after a failure: a failure never counts as a gain (re-mapping can land a unit
    somewhere better); 0 when some unit can no longer be held or nothing survives."""
    if short_f > short or not np.isfinite(lat_f) or lat_f <= 0.0:
        return 0.0
    return min(latency / lat_f, 1.0)


@nb.njit(cache=True, inline="always")
def single_sets(n, node_alt, link_alt, links, sets, size, routes):
    """The single failures of an n-chiplet design into ``sets`` / ``size`` / ``routes`` (see
    dse.model.failures.failures_latency): each chiplet (with its router when ``node_alt`` >= 0, dse.model.routes), then
    each of its ``links`` physical links. Returns (chiplet failures, link failures)."""
    chips = n if n > 1 else 0
    for i in range(chips):
        sets[i, 0] = i
        size[i] = 1
        routes[i] = node_alt + i if node_alt >= 0 else -1
    for j in range(links):
        size[chips + j] = 0
        routes[chips + j] = link_alt + j
    return chips, links


@nb.njit(cache=True, inline="always")
def in_full(offload, routes, n_sets, sh):
    """With host or SSD tiers (dse.model.offload), an SRAM-resident kind's SRAM in front of HBM (three tiers,
    dse.model.hbm_placement) or weight streaming (its fill and buffers), every failure is evaluated in full on the design's own routes
    (dse.model.failure_routes), not by deltas: the deltas re-place only the touched chiplets' HBM."""
    if offload:
        for k in range(n_sets):
            if routes[k] < 0:
                routes[k] = sh


@nb.njit(cache=True, inline="always")
def failure_sets(sh, n, node_alt, link_alt, n_phys, mc_alt, mc_sets, full, sets, size, routes):
    """A design's failure sets into ``sets`` / ``size`` / ``routes`` (see dse.model.failures.failures_latency):
    every single chiplet (and link), then the Monte Carlo sets of its package size; every one on the
    design's own routes (``sh``) where ``full`` (`in_full`). Returns (single failures, Monte Carlo sets)."""
    chips, links = single_sets(n, node_alt[sh], link_alt[sh], n_phys[sh], sets, size, routes)
    singles = chips + links
    samples = mc_sets.shape[1]
    k_max = mc_sets.shape[2]
    for m in range(samples):
        size[singles + m] = min(k_max, n)
        routes[singles + m] = mc_alt[sh] + m if mc_alt[sh] >= 0 else -1
        for x in range(size[singles + m]):
            sets[singles + m, x] = mc_sets[n, m, x]
    in_full(full, routes, singles + samples, sh)
    return singles, samples


@nb.njit(cache=True, inline="always")
def failure_summary(latency, short, after, singles, samples, out):
    """The failure metrics (fault_tolerance_frac, worst_retained_frac, all_served_frac, mc_retained_frac,
    mc_survival_frac) of a design of intact ``latency`` and ``short`` from each failure's figures in
    ``after`` (`failure_sets`' order), into its metrics row ``out`` (left 0 without single failures, NaN
    without Monte Carlo sets)."""
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


@nb.njit(cache=True, nogil=True)
def evaluate_arrays(T, R, shape, rows, cols, kind, stacks, ddr, slots, ncopy, split, unplaced, with_faults, screen,
                    mc_sets, package, W, W2, limits, incremental):
    """Every metric of every design; ``package``: their package figures (dse.model.package_figures) when
    known (`package_arrays`: ``[P, 6]``; the packages of a system share them), else ``[0, 6]`` and they are
    computed here.

    Without failures every design's intact pass runs in one call (`base_passes`; ``incremental``: a design
    with the previous one's package costs only the stages that differ, the same figures); with them each
    design's failures start from its own intact pass, so the passes go one design at a time, and a design
    with a metric above its bound in ``limits`` (``[N_KERNEL_METRICS]``, +inf: none; dse.model.contract.
    FaultsWithin) skips them, its fault columns as without failures."""
    P = rows.shape[0]
    node_alt, link_alt, n_phys, mc_alt = R.node_alt, R.link_alt, R.n_phys, R.mc_alt
    # with tiers below the package, three tiers or weight streaming every failure is evaluated in full
    full = T.offload or W.f_sram.shape[0] > 0 or T.stream_buf > 0.0
    terms = PackageTerms(T.ddr_phy, T.kind_area, T.hbm_phy, T.kind_wafer_kgd, T.kind_wafer_cost, T.kind_d0,
                         T.yield_alpha, T.wafer_diameter, T.hbm_cost, T.hbm_footprint, T.ddr_cost, T.packaging,
                         T.ddr_bw, T.ddr_e, T.kind_static_w, T.kind_active_w, T.kind_peak_dyn_w, T.hbm_bw, T.hbm_e)
    out = np.zeros((P, N_KERNEL_METRICS))
    n_sets = kind.shape[1] + R.n_phys.max() + mc_sets.shape[1]
    sets = np.zeros((n_sets, max(mc_sets.shape[2], 1)), np.int64)
    size = np.zeros(n_sets, np.int64)
    routes = np.zeros(n_sets, np.int64)
    after = np.zeros((n_sets, 3))
    figures = np.zeros(len(PACKAGE_FIGURES))
    sizes = rows * cols
    res = np.zeros((P, len(PASS_FIELDS)))
    if not with_faults:
        base_passes(T, R, shape, sizes, kind, stacks, ddr, slots, ncopy, split, W, res, incremental, np.int64(0),
                    np.int64(P))
    for p in range(P):
        if package.shape[0] > 0:
            figures[:] = package[p]
        else:
            one_package(terms, sizes[p], kind[p], stacks[p], ddr[p], figures)
        if with_faults:
            base_passes(T, R, shape, sizes, kind, stacks, ddr, slots, ncopy, split, W, res, np.bool_(False), p,
                        p + 1)      # one compiled form for every caller: booleans and int64, no literals
        write_metrics(out[p], res[p], figures, T.tokens, unplaced[p])
        if with_faults and within(out[p], limits):
            # the failure kernels take T, R and W as evaluate_arrays holds them (no inline helper binds them:
            # binding a tuple takes a reference to each of its arrays, here per design)
            sh, n, latency, short = shape[p], sizes[p], res[p, LATENCY], res[p, SHORT]
            singles, samples = failure_sets(sh, n, node_alt, link_alt, n_phys, mc_alt, mc_sets, full, sets, size,
                                            routes)
            # a failure that leaves a larger shortfall keeps nothing: its latency is not needed
            if singles + samples > 0:
                failures_latency(T, R, sh, n, kind[p], stacks[p], ddr[p], slots[p], ncopy[p], split, sets, size,
                                 routes, singles + samples, W, after, short, screen)
            # (Monte Carlo sets reroute only then too)
            if full or node_alt[sh] >= 0 or n_phys[sh] > 0:
                rerouted_failures(T, R, n, kind[p], stacks[p], ddr[p], slots[p], ncopy[p], split, sets, size, routes,
                                  singles + samples, W, W2, after, short)
            failure_summary(latency, short, after, singles, samples, out[p])
        else:                                       # no failures evaluated: none survived, Monte Carlo not run
            out[p, M_MC_RETAINED] = np.nan
            out[p, M_MC_SURVIVAL] = np.nan
    return out


@nb.njit(cache=True)
def single_failures(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, W, W2):
    """Per single failure (`single_sets`: chiplets, then links): (latency after it, capacity shortfall
    after it); the last row: the intact design."""
    sets = np.zeros((n + R.n_phys[sh], 1), np.int64)
    size = np.zeros(sets.shape[0], np.int64)
    routes = np.zeros(sets.shape[0], np.int64)
    chips, links = single_sets(n, R.node_alt[sh], R.link_alt[sh], R.n_phys[sh], sets, size, routes)
    k = chips + links
    out = np.zeros((k + 1, 2))
    base = base_pass(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, W)
    out[k, 0], out[k, 1] = base[LATENCY], base[SHORT]
    after = np.empty((k, 3))
    in_full(T.offload or W.f_sram.shape[0] > 0 or T.stream_buf > 0.0, routes, k, sh)
    failures_latency(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, sets, size, routes, k, W, after, np.inf,
                     False)
    rerouted_failures(T, R, n, kind, stacks, ddr, slots, ncopy, split, sets, size, routes, k, W, W2, after, np.inf)
    out[:k, 0] = after[:, 0]
    out[:k, 1] = after[:, 2]
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


def monte_carlo_sets(max_chips: int, samples: int, failures: int, seed: int) -> np.ndarray:
    """Failure sets ``[n, sample, k]`` of distinct chiplets for every package size n (common random numbers)."""
    sets = np.zeros((max_chips + 1, samples, failures), np.int64)
    rng = np.random.default_rng(seed)
    for n in range(1, max_chips + 1):
        k = min(failures, n)
        for m in range(samples):
            chosen = rng.choice(n, size=k, replace=False)
            sets[n, m, :] = np.resize(chosen, failures)   # k < failures only when n is tiny: repeats are harmless
    return sets
