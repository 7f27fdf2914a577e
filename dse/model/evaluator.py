"""Evaluate a population of designs: every metric of every design in one Numba call.

Per design (the step model is in dse.model.perf_model):

* latency_s: expected time of one step over the workload's scenarios (decode: time per output token;
  prefill: time to first token); latency_p99_s: its 99th percentile over scenarios;
* throughput_tok_s: tokens of the step / latency;
* energy_j_per_token and its parts: compute (+ SRAM, active power x busy time), DRAM, network, static;
* area_mm2: silicon = chiplet dies (with their HBM PHYs) + DDR PHYs; package_area_mm2 adds HBM stack
  footprints;
* cost_usd: known-good-die cost of each die (arch.kgd_cost, negative-binomial yield) + HBM and DDR by
  capacity, divided by the bonding yield per die and stack (Chiplet Actuary);
* power_w: peak = static + active + every PE busy + memories at full bandwidth;
* fault_tolerance_frac: fraction of throughput kept, averaged over every single failure after
  re-mapping (dse.model.failures.remap), capped at 1: every chiplet and, with the study's ``faults.links``,
  every physical link (routes detour around it; dse.model.routes). A failure after which some unit cannot be
  held (memory short), no chiplet is left or two survivors can no longer reach each other keeps 0.
  worst_retained_frac: the least kept. all_served_frac: fraction of single failures after which every
  unit is still served.
* mc_retained_frac / mc_survival_frac: the same over Monte Carlo sets of several failed chiplets
  (study ``faults.monte_carlo``; the same failure sets for every design of a size: common random
  numbers), NaN when off (results and `dse evaluate` leave them out then: dse.model.objectives.reported_metrics).
* capacity_short_bytes, unplaced_experts: constraint measures (0 when feasible).
* max_die_mm2: the largest die (chiplet with its HBM PHYs), held against the reticle limit.
"""
from __future__ import annotations

import dataclasses

import numba as nb
import numpy as np
import pandas as pd

import arch

from ..study.schema.faults import FaultsSpec
from ..study.schema.package import PackageSpec
from ..study.space import Design, Space
from .contract import DecodedDesigns, PopulationEvaluator
from .failures import failures_latency, remap, rerouted_failures, restore
from .grouped import group_tables
from .parallel import cores, map_rows
from .package_figures import one_package, package_arrays
from .perf_model import (DRAM, E_COMPUTE, E_DRAM, E_NET, LATENCY, NET, P99, PASS_FIELDS, SHORT, KernelTables, base_pass,
                         base_passes, make_workspace)
from .placement import decode_population
from .routes import RouteTables, build_route_tables, physical_links, shape_index
from .tables import UNIT_KINDS, EvalTables

METRICS = ["latency_s", "latency_p99_s", "throughput_tok_s", "energy_j_per_token", "energy_compute_j_per_token",
           "energy_dram_j_per_token", "energy_network_j_per_token", "energy_static_j_per_token", "area_mm2",
           "package_area_mm2", "cost_usd", "power_w", "fault_tolerance_frac", "worst_retained_frac",
           "all_served_frac", "mc_retained_frac", "mc_survival_frac", "capacity_short_bytes", "unplaced_experts",
           "dram_bytes", "net_byte_hops", "max_die_mm2"]
N_METRICS = len(METRICS)

#: bytes of decoded unit slots per block of designs: a large model's population decoded at once (tens of
#: MB) no longer sits in the cache when the kernel reads it back; blocks of this size do.
BLOCK_BYTES = 4 << 20

NO_FIGURES = np.zeros((0, 6))      # evaluate_arrays computes each design's package figures


def _csr(groups: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(groups) + 1, np.int64)
    ptr[1:] = np.cumsum([len(g) for g in groups])
    flat = np.array([x for g in groups for x in g], np.int64)
    return ptr, flat


def weight_per_copy(t: EvalTables, max_copies: int, split: bool) -> np.ndarray:
    """Expected weight bytes one copy reads per layer instance, for 1..max_copies copies: ``[U, C + 1]``.

    Replicas (many-to-many) each serve 1/c of the T tokens that pass the unit's router, so each reads the unit's weights with
    probability ``1 - (1 - q)^(T/c)`` (q: per-token selection probability); shards (one-to-many) each
    read 1/c of the weights whenever the unit runs (probability ``1 - (1 - q)^T``).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        if_run = np.where(t.unit_prob > 0, t.unit_weight_read / t.unit_prob, 0.0)
    q = np.minimum(t.unit_selection, 1.0)[:, None]
    tokens = t.unit_route_tokens[:, None]
    c = np.arange(max_copies + 1, dtype=float)[None, :]
    c[0, 0] = 1.0
    if split:
        return if_run[:, None] * (1.0 - (1.0 - q) ** tokens) / c
    return if_run[:, None] * (1.0 - (1.0 - q) ** (tokens / c))


def kernel_tables(t: EvalTables, max_copies: int, split: bool) -> KernelTables:
    """Pack the study tables into the arrays the Numba kernels read (stages and edges in order)."""
    assert (np.diff(t.unit_stage) >= 0).all(), "units must come in stage order"
    S = len(t.stage_repeat)
    stage_start = np.searchsorted(t.unit_stage, np.arange(S + 1)).astype(np.int64)
    edge_stage = t.unit_stage[t.edge_dst]
    e_order = np.argsort(edge_stage, kind="stable")
    edge_start = np.searchsorted(edge_stage[e_order], np.arange(S + 1)).astype(np.int64)
    repeat = t.stage_repeat[edge_stage]
    edge_phase = np.where(t.edge_repeat == repeat, 0, np.where(t.edge_repeat == 1, 1, 2))[e_order]
    assert ((edge_phase != 2) | (t.edge_repeat[e_order] == repeat[e_order] - 1)).all()
    src, dst = t.edge_src[e_order], t.edge_dst[e_order]
    incident: list[list[int]] = [[] for _ in range(t.n_units)]
    for e, (a, b) in enumerate(zip(src, dst)):
        incident[a].append(e)
        if b != a:
            incident[b].append(e)
    unit_edge_ptr, unit_edges = _csr(incident)
    after = [list(a) for a in t.stage_after]
    assert all(p < s for s, a in enumerate(after) for p in a), "stages must be numbered in topological order"
    after_ptr, after_ids = _csr(after)
    scen_ptr, scen_stages = _csr([list(stages) for _, stages in t.scenarios])
    unit_w_copy = weight_per_copy(t, max_copies, split)
    with np.errstate(divide="ignore", invalid="ignore"):    # share of a unit's weight bytes one copy reads
        unit_w_ratio = np.where(t.unit_weight_read[:, None] > 0, unit_w_copy / t.unit_weight_read[:, None], 0.0)
    hbm, ddr, f = t.hbm, t.ddr, float
    return KernelTables(
        unit_is_expert=(t.unit_kind == UNIT_KINDS.index("expert")), unit_stage=t.unit_stage.astype(np.int64),
        unit_read_scale=(t.stage_repeat * t.stage_prob)[t.unit_stage].astype(float),
        unit_capacity=t.unit_capacity_bytes, unit_kv=t.unit_kv_bytes, unit_w_copy=unit_w_copy, unit_time=t.unit_time_s, unit_energy=t.unit_energy_j,
        unit_other_dram=t.unit_other_dram, unit_out_bytes=t.unit_out_bytes, unit_edge_ptr=unit_edge_ptr,
        unit_edges=unit_edges, stage_start=stage_start, stage_repeat=t.stage_repeat.astype(float),
        stage_prob=t.stage_prob.astype(float), after_ptr=after_ptr, after_ids=after_ids, scen_ptr=scen_ptr,
        scen_stages=scen_stages, scen_prob=np.array([p for p, _ in t.scenarios], float),
        edge_start=edge_start, edge_src=src, edge_dst=dst, edge_bytes=t.edge_bytes[e_order],
        edge_sync=t.edge_sync_steps[e_order] * t.link.sync_latency_s,
        edge_phase=edge_phase.astype(np.int64), edge_stage=edge_stage[e_order].astype(np.int64),
        chain=all(tuple(a) == ((s - 1,) if s else ()) for s, a in enumerate(after)),
        kind_area=t.kind_area_mm2, kind_wafer_cost=t.kind_wafer_cost_usd, kind_d0=t.kind_defect_density_per_cm2,
        kind_static_w=t.kind_static_w, kind_active_w=t.kind_active_w, kind_peak_dyn_w=t.kind_peak_dynamic_w,
        tokens=f(t.tokens_per_step), hbm_cap=f(hbm.capacity_bytes if hbm else 0), hbm_bw=f(t.hbm_bw_Bps),
        hbm_e=f(hbm.energy_j_per_byte if hbm else 0), hbm_phy=f(hbm.phy_area_mm2 if hbm else 0),
        hbm_footprint=f(hbm.footprint_mm2 if hbm else 0),
        hbm_cost=f(hbm.capacity_bytes * hbm.cost_usd_per_byte if hbm else 0),
        ddr_cap=f(ddr.capacity_bytes if ddr else 0), ddr_bw=f(t.ddr_bw_Bps),
        ddr_e=f(ddr.energy_j_per_byte if ddr else 0), ddr_phy=f(ddr.phy_area_mm2 if ddr else 0),
        ddr_cost=f(ddr.capacity_bytes * ddr.cost_usd_per_byte if ddr else 0),
        link_bw=f(t.link.bandwidth_Bps),
        bond_yield=f(t.link.bond_yield), yield_alpha=f(arch.technology.yield_alpha_logic()),
        wafer_diameter=f(arch.technology.wafer_diameter_mm()),
        unit_w_ratio=unit_w_ratio, op_ptr=t.op_ptr, op_time=t.op_time_s, op_w=t.op_weight_bytes,
        op_o=t.op_other_bytes, op_prob=t.op_prob, op_inv=t.op_inv_steps, kind_mem_eff=t.kind_mem_efficiency,
        kind_overhead=t.kind_kernel_overhead_s, kind_dispatch=np.where(t.kind_dispatch_ahead, 0.0, t.kind_dispatch_s),
        kind_issue=np.where(t.kind_dispatch_ahead, t.kind_dispatch_s, 0.0),
        hosts=bool(np.any(t.kind_dispatch_ahead & (t.kind_dispatch_s > 0))), kind_seq=t.kind_sequence_s,
        sequences=f(t.sequences_per_step),
        unit_launches=np.diff(np.concatenate([[0.0], np.cumsum(t.op_prob)])[t.op_ptr]), **group_tables(t))


@nb.njit(cache=True, inline="always")
def _retained(latency, short, lat_f, short_f):
    """Throughput kept after a failure: a failure never counts as a gain (re-mapping can land a unit
    somewhere better); 0 when some unit can no longer be held or nothing survives."""
    if short_f > short or not np.isfinite(lat_f) or lat_f <= 0.0:
        return 0.0
    return min(latency / lat_f, 1.0)


@nb.njit(cache=True, inline="always")
def _single_sets(n, node_alt, link_alt, links, sets, size, routes):
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
def _failure_columns(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, screen, mc_sets, base, W, W2, sets, size,
                     routes, after):
    """(fault_tolerance_frac, worst_retained_frac, all_served_frac, mc_retained_frac, mc_survival_frac) of one
    design whose intact pass (`base`) is in ``W``; ``sets`` / ``size`` / ``routes`` / ``after`` are scratch for
    its failure sets, ``W2`` for failures evaluated in full."""
    latency, short = base[LATENCY], base[SHORT]
    # failure sets: every single chiplet (and link), then the Monte Carlo sets of this package size
    chips, links = _single_sets(n, R.node_alt[sh], R.link_alt[sh], R.n_phys[sh], sets, size, routes)
    singles = chips + links
    samples = mc_sets.shape[1]
    k_max = mc_sets.shape[2]
    for m in range(samples):
        size[singles + m] = min(k_max, n)
        routes[singles + m] = R.mc_alt[sh] + m if R.mc_alt[sh] >= 0 else -1
        for x in range(size[singles + m]):
            sets[singles + m, x] = mc_sets[n, m, x]
    # a failure that leaves a larger shortfall keeps nothing: its latency is not needed
    if singles + samples > 0:
        failures_latency(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, sets, size, routes, singles + samples,
                         W, after, short, screen)
    if R.node_alt[sh] >= 0 or R.n_phys[sh] > 0:     # (Monte Carlo sets reroute only then too)
        rerouted_failures(T, R, n, kind, stacks, ddr, slots, ncopy, split, sets, size, routes, singles + samples, W,
                          W2, after, short)
    kept_sum = 0.0
    worst = 1.0
    served = 0.0
    for i in range(singles):
        kept = _retained(latency, short, after[i, 0], after[i, 2])
        kept_sum += kept
        worst = min(worst, kept)
        served += 1.0 if kept > 0.0 else 0.0
    mc_kept = np.nan
    mc_survive = np.nan
    if samples > 0:
        mc_kept = 0.0
        mc_survive = 0.0
        for m in range(samples):
            kept = _retained(latency, short, after[singles + m, 0], after[singles + m, 2])
            mc_kept += kept / samples
            mc_survive += (1.0 if kept > 0.0 else 0.0) / samples
    if singles == 0:
        return 0.0, 0.0, 0.0, mc_kept, mc_survive
    return kept_sum / singles, worst, served / singles, mc_kept, mc_survive


@nb.njit(cache=True, inline="always")
def _write_metrics(out, base, figures, tokens, unplaced, faults):
    """A design's `METRICS` (but the largest die) into ``out`` from its intact pass ``base``
    (dse.model.perf_model.PASS_FIELDS), its package ``figures`` (dse.model.package_figures) and its
    ``faults`` columns (`_failure_columns`)."""
    latency = base[LATENCY]
    e_compute, e_dram, e_net = base[E_COMPUTE], base[E_DRAM], base[E_NET]
    e_static = figures[4] * latency
    out[0] = latency
    out[1] = base[P99]
    out[2] = tokens / latency
    out[3] = (e_compute + e_dram + e_net + e_static) / tokens
    out[4] = e_compute / tokens
    out[5] = e_dram / tokens
    out[6] = e_net / tokens
    out[7] = e_static / tokens
    out[8], out[9], out[10], out[11] = figures[0], figures[1], figures[2], figures[3]
    out[12], out[13], out[14], out[15], out[16] = faults
    out[17] = base[SHORT]
    out[18] = unplaced
    out[19] = base[DRAM]
    out[20] = base[NET]


@nb.njit(cache=True, nogil=True)
def evaluate_arrays(T, R, shape, rows, cols, kind, stacks, ddr, slots, ncopy, split, unplaced, with_faults, screen,
                    mc_sets, package, W, W2):
    """Every metric of every design; ``package``: their package figures (dse.model.package_figures) when
    known (`package_arrays`: ``[P, 6]``; the packages of a system share them), else ``[0, 6]`` and they are
    computed here.

    Without failures every design's intact pass runs in one call (`base_passes`); with them each design's
    failures start from its own intact pass, so the passes go one design at a time."""
    P = rows.shape[0]
    out = np.zeros((P, 21))
    n_sets = kind.shape[1] + R.n_phys.max() + mc_sets.shape[1]
    sets = np.zeros((n_sets, max(mc_sets.shape[2], 1)), np.int64)
    size = np.zeros(n_sets, np.int64)
    routes = np.zeros(n_sets, np.int64)
    after = np.zeros((n_sets, 3))
    figures = np.zeros(5)
    sizes = rows * cols
    res = np.zeros((P, len(PASS_FIELDS)))
    no_faults = (0.0, 0.0, 0.0, np.nan, np.nan)
    if not with_faults:
        base_passes(T, R, shape, sizes, kind, stacks, ddr, slots, ncopy, split, W, res)
    for p in range(P):
        if package.shape[0] > 0:
            figures[:] = package[p, :5]
        else:
            figures[0], figures[1], figures[2], figures[3], figures[4] = one_package(T, sizes[p], kind[p], stacks[p],
                                                                              ddr[p])
        faults = no_faults
        if with_faults:
            res[p] = base_pass(T, R, shape[p], sizes[p], kind[p], stacks[p], ddr[p], slots[p], ncopy[p], split, W)
            faults = _failure_columns(T, R, shape[p], sizes[p], kind[p], stacks[p], ddr[p], slots[p], ncopy[p], split,
                                      screen, mc_sets, res[p], W, W2, sets, size, routes, after)
        _write_metrics(out[p], res[p], figures, T.tokens, unplaced[p], faults)
    return out


@nb.njit(cache=True)
def single_failures(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, W, W2):
    """Per single failure (`_single_sets`: chiplets, then links): (latency after it, capacity shortfall
    after it); the last row: the intact design."""
    sets = np.zeros((n + R.n_phys[sh], 1), np.int64)
    size = np.zeros(sets.shape[0], np.int64)
    routes = np.zeros(sets.shape[0], np.int64)
    chips, links = _single_sets(n, R.node_alt[sh], R.link_alt[sh], R.n_phys[sh], sets, size, routes)
    k = chips + links
    out = np.zeros((k + 1, 2))
    base = base_pass(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, W)
    out[k, 0], out[k, 1] = base[LATENCY], base[SHORT]
    after = np.empty((k, 3))
    failures_latency(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, sets, size, routes, k, W, after, np.inf,
                     False)
    rerouted_failures(T, R, n, kind, stacks, ddr, slots, ncopy, split, sets, size, routes, k, W, W2, after, np.inf)
    out[:k, 0] = after[:, 0]
    out[:k, 1] = after[:, 2]
    return out


@nb.njit(cache=True)
def _remapped(T, R, sh, n, dead, kind, stacks, ddr, slots, ncopy, split, W):
    base_pass(T, R, sh, n, kind, stacks, ddr, slots, ncopy, split, W)
    W.dead[: dead.shape[0]] = dead
    for x in range(dead.shape[0]):
        W.is_dead[dead[x]] = True
    W.count2[:] = ncopy
    W.slots2[:] = slots
    n_moved, ok = remap(T.unit_capacity, T.unit_kv, T.hbm_cap, n, W.dead, dead.shape[0], W.is_dead, slots, ncopy,
                        split, stacks, W.chip_ptr, W.item_u, W.stored, W.slots2, W.count2, W.stored2, W.moved,
                        W.moved_list)
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


class Evaluator(PopulationEvaluator):
    """Evaluates decision vectors of one study's space: ``Evaluator(tables, space, ...)(X) -> DataFrame``
    (the contract of dse.model.contract; columns `METRICS`)."""

    def __init__(self, tables: EvalTables, space: Space, package: PackageSpec, max_copies: int,
                 faults: FaultsSpec | None = None):
        self.tables, self.space, self.link, self.topology = tables, space, package.link, package.topology
        self.kernel = kernel_tables(tables, max(space.max_slots, max_copies), space.split)
        self.max_copies = max_copies
        self.package = package
        self.threads = cores()          # evaluation threads (dse.model.parallel); 1 for serial
        self.screening = False          # failures at the search's screening fidelity (dse.search.screening)
        self.row_range, self.col_range = package.mesh.rows, package.mesh.cols
        faults = faults or FaultsSpec()
        mc = faults.monte_carlo
        self.mc_sets = monte_carlo_sets(space.max_slots, mc.samples, mc.failures, mc.seed) if mc.samples \
            else np.zeros((space.max_slots + 1, 0, 1), np.int64)
        self.routes: RouteTables = build_route_tables(package, links=faults.links,
                                                      routers_fail=faults.failed_router == "fails",
                                                      mc_sets=self.mc_sets)

    @property
    def columns(self) -> list[str]:
        return METRICS

    def package_evaluators(self) -> list["Evaluator"]:
        return [self]

    def workspace(self, copies: int):
        """Scratch arrays of one evaluation call (a fresh set per call keeps the evaluator thread-safe)."""
        return make_workspace(self.kernel, self.space.max_slots, int(self.routes.n_links.max()), copies)

    def _workspaces(self, copies: int):
        """The intact design's workspace and one for failures evaluated in full (dse.model.failures)."""
        return self.workspace(copies), self.workspace(copies)

    def decode(self, X: np.ndarray) -> DecodedDesigns:
        sl = self.space.slices
        return DecodedDesigns(*decode_population(
            self.vectors(X), sl["rows"].start, sl["cols"].start, sl["kind"].start, sl["hbm"].start, sl["ddr"].start,
            sl["place"].start, sl["copies"].start, self.space.max_slots, self.space.n_units, self.max_copies,
            self.kernel.unit_is_expert, self.space.exclusive_experts))

    def _shapes(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        (r0, r1), (c0, c1) = self.row_range, self.col_range
        if ((rows < r0) | (rows > r1) | (cols < c0) | (cols > c1)).any():
            raise ValueError(f"mesh shape outside the study's range rows {r0}..{r1}, cols {c0}..{c1}")
        return np.asarray(shape_index(np.asarray(rows), np.asarray(cols), self.row_range, self.col_range), np.int64)

    def _kernel(self, d: DecodedDesigns, with_faults: bool, workspaces, package: np.ndarray | None = None) -> np.ndarray:
        """Every metric of the decoded designs ``d``, with the scratch ``workspaces`` of one thread;
        ``package``: their `package_figures` if known."""
        out = evaluate_arrays(self.kernel, self.routes, self._shapes(d.rows, d.cols), d.rows, d.cols, d.kind, d.stacks,
                              d.ddr, d.slots, d.ncopy, self.space.split, d.unplaced, with_faults, self.screening,
                              self.mc_sets, NO_FIGURES if package is None else package, *workspaces)
        die = self._largest_die(d.chiplets, d.kind, d.stacks) if package is None else package[:, 5]
        return np.column_stack([out, die])

    def _block(self) -> int:
        """Designs decoded at a time: `BLOCK_BYTES` of unit slots."""
        return max(1, BLOCK_BYTES // (8 * max(self.space.n_units, 1) * self.max_copies))

    def package_figures(self, X: np.ndarray) -> np.ndarray:
        """Silicon area, package area, cost, peak and static power and largest die of each design's package
        (dse.model.package_figures.package_arrays): ``[P, 6]``."""
        d = self.decode(X)
        return package_arrays(self.kernel, d.chiplets, d.kind, d.stacks, d.ddr)

    def metrics_array(self, X: np.ndarray, with_faults: bool = True, package: np.ndarray | None = None) -> np.ndarray:
        """Every metric of the decision vectors ``X``; ``package``: their `package_figures` when the caller
        has them (a system's packages are one package design: dse.system.evaluator)."""
        X = self.vectors(X)
        block = self._block()

        def run(r: slice) -> np.ndarray:
            workspaces = self._workspaces(self.max_copies)
            parts = [self._kernel(self.decode(X[a:min(a + block, r.stop)]), with_faults, workspaces,
                                  None if package is None else package[a:min(a + block, r.stop)])
                     for a in range(r.start, r.stop, block)]
            return np.concatenate(parts) if parts else np.zeros((0, N_METRICS))
        return map_rows(run, len(X), self.threads)

    def _largest_die(self, n: np.ndarray, kind: np.ndarray, stacks: np.ndarray) -> np.ndarray:
        """Area of each design's largest die: chiplet kind plus the PHYs of its HBM stacks."""
        phy = self.tables.hbm.phy_area_mm2 if self.tables.hbm else 0.0
        die = self.tables.kind_area_mm2[kind] + stacks * phy
        in_package = np.arange(kind.shape[1])[None, :] < np.asarray(n)[:, None]
        return np.where(in_package, die, 0.0).max(axis=1)

    def design_metrics(self, designs: list[Design], with_faults: bool = True) -> np.ndarray:
        """Metrics of designs given directly (hand-written or read back), not as decision vectors."""
        d = design_arrays(designs, self.tables, self.space.max_slots, self.max_copies)

        def run(r: slice) -> np.ndarray:
            return self._kernel(d.take(r), with_faults, self._workspaces(d.slots.shape[2]))
        return map_rows(run, len(designs), self.threads)

    def failure_report(self, design: Design) -> pd.DataFrame:
        """What each single-chiplet failure does to a design: latency after it, throughput kept, served."""
        report = self._single_report(design)
        return report[report["failed_link"] == ""].drop(columns="failed_link").reset_index(drop=True)

    def link_failure_report(self, design: Design) -> pd.DataFrame:
        """The same per physical link ("a-b"), when the study's ``faults.links`` asks for link failures."""
        report = self._single_report(design)
        return report[report["failed_link"] != ""].drop(columns="failed_chiplet").reset_index(drop=True)

    def _single_report(self, design: Design) -> pd.DataFrame:
        d = design_arrays([design], self.tables, self.space.max_slots, self.max_copies)
        n = int(d.chiplets[0])
        sh = self._shapes(d.rows, d.cols)[0]
        res = single_failures(self.kernel, self.routes, sh, n, d.kind[0], d.stacks[0], d.ddr[0], d.slots[0],
                              d.ncopy[0], self.space.split, *self._workspaces(d.slots.shape[2]))
        latency, short = res[-1]
        kept = [float(_retained(latency, short, lat, s)) for lat, s in res[:-1]]
        chips = n if n > 1 else 0
        if chips == 0:          # the only chiplet: losing it keeps nothing (fault_tolerance_frac counts 0)
            return pd.DataFrame({"failed_chiplet": [0], "failed_link": [""], "latency_s": [np.inf],
                                 "retained_frac": [0.0], "all_served": [False]})
        links = [f"{a}-{b}" for a, b in physical_links(self.package.network(design.rows, design.cols))] \
            if self.routes.n_phys[sh] else []
        return pd.DataFrame({"failed_chiplet": list(range(chips)) + [-1] * len(links),
                             "failed_link": [""] * chips + links, "latency_s": res[:-1, 0], "retained_frac": kept,
                             "all_served": [k > 0 for k in kept]})

    def remapped(self, design: Design, failed: list[int]) -> Design | None:
        """The design after the chiplets in ``failed`` die and their units move (None: nothing survives)."""
        d = design_arrays([design], self.tables, self.space.max_slots, self.max_copies)
        n = design.rows * design.cols
        ok, new_slots, count = _remapped(self.kernel, self.routes, self._shapes(d.rows, d.cols)[0], n,
                                         np.array(sorted(set(failed)), np.int64), d.kind[0], d.stacks[0], d.ddr[0],
                                         d.slots[0], d.ncopy[0], self.space.split, self.workspace(d.slots.shape[2]))
        if not ok:
            return None
        placement = {u: [int(x) for x in new_slots[i, : count[i]]] for i, u in enumerate(self.tables.unit_names)}
        return dataclasses.replace(design, chiplets=list(design.chiplets), hbm_stacks=list(design.hbm_stacks),
                                   placement=placement)

    def designs(self, X: np.ndarray) -> list[Design]:
        d = self.decode(X)
        names = self.tables.kind_names
        out = []
        for p in range(len(d.rows)):
            n = int(d.chiplets[p])
            placement = {u: [int(s) for s in d.slots[p, i, : d.ncopy[p, i]]] for i, u in enumerate(self.tables.unit_names)}
            out.append(Design(rows=int(d.rows[p]), cols=int(d.cols[p]), chiplets=[names[k] for k in d.kind[p, :n]],
                              hbm_stacks=[int(s) for s in d.stacks[p, :n]], ddr_channels=int(d.ddr[p]), link=self.link,
                              mapping=self.space.mapping, placement=placement, topology=self.topology))
        return out


def design_arrays(designs: list[Design], tables: EvalTables, max_slots: int, max_copies: int) -> DecodedDesigns:
    """Kernel arrays of explicit designs (none unplaced)."""
    P = len(designs)
    rows = np.array([d.rows for d in designs], np.int64)
    cols = np.array([d.cols for d in designs], np.int64)
    kind = np.zeros((P, max_slots), np.int64)
    stacks = np.zeros((P, max_slots), np.int64)
    copies = max([max_copies] + [len(s) for d in designs for s in d.placement.values()])
    slots = np.full((P, tables.n_units, copies), -1, np.int64)
    ncopy = np.ones((P, tables.n_units), np.int64)
    for p, d in enumerate(designs):
        kind[p, : len(d.chiplets)] = [tables.kind_names.index(k) for k in d.chiplets]
        stacks[p, : len(d.hbm_stacks)] = d.hbm_stacks
        for u, name in enumerate(tables.unit_names):
            where = d.placement[name]
            slots[p, u, : len(where)] = where
            ncopy[p, u] = len(where)
    ddr = np.array([d.ddr_channels for d in designs], np.int64)
    return DecodedDesigns(rows, cols, kind, stacks, ddr, slots, ncopy, np.zeros(P, np.int64))
