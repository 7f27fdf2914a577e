"""Evaluate a population of designs: every metric of every design in one Numba call.

Per design (see dse.perf_model for the step model):

* latency_s: time of one step (decode: time per output token; prefill: time to first token);
* throughput_tok_s: tokens of the step / latency;
* energy_j_per_token: (dynamic + static x latency) / tokens of the step;
* area_mm2: silicon = chiplet dies (with their HBM PHYs) + DDR PHYs; package_area_mm2 adds HBM stack
  footprints;
* cost_usd: known-good-die cost of each die (arch.kgd_cost, negative-binomial yield) + HBM and DDR
  by capacity, divided by the bonding yield per die and stack (Chiplet Actuary);
* power_w: peak = static + every PE busy + memories at full bandwidth;
* fault_tolerance_frac: fraction of throughput retained, averaged over every single-chiplet failure, after re-mapping
  lost units (dse.perf_model.remap_without), capped at 1; 0 for a failure that leaves some unit
  unservable (memory short).
  worst_retained_frac: the least retained over those failures.
"""
from __future__ import annotations

import numba as nb
import numpy as np
import pandas as pd

import arch
from arch.area_cost import kgd_cost

from .perf_model import KernelTables, remap_without, step
from .placement import decode_population
from .space import Design, Space
from .tables import UNIT_KINDS, EvalTables

METRICS = ["latency_s", "throughput_tok_s", "energy_j_per_token", "area_mm2", "package_area_mm2", "cost_usd",
           "power_w", "fault_tolerance_frac", "worst_retained_frac", "capacity_short_bytes", "unplaced_experts",
           "dram_bytes", "net_byte_hops"]
_M = {name: i for i, name in enumerate(METRICS)}


def kernel_tables(t: EvalTables) -> KernelTables:
    """Pack the study tables into the arrays the Numba kernels read (stages and edges in order)."""
    order = np.argsort(t.unit_stage, kind="stable")
    assert (order == np.arange(len(order))).all(), "units must come in stage order"
    S = len(t.stage_repeat)
    stage_start = np.searchsorted(t.unit_stage, np.arange(S + 1)).astype(np.int64)
    edge_stage = t.unit_stage[t.edge_dst]
    e_order = np.argsort(edge_stage, kind="stable")
    edge_start = np.searchsorted(edge_stage[e_order], np.arange(S + 1)).astype(np.int64)
    repeat = t.stage_repeat[edge_stage]
    edge_phase = np.where(t.edge_repeat == repeat, 0, np.where(t.edge_repeat == 1, 1, 2))[e_order]
    assert ((edge_phase != 2) | (t.edge_repeat[e_order] == repeat[e_order] - 1)).all()
    with np.errstate(divide="ignore", invalid="ignore"):
        weight_if_run = np.where(t.unit_prob > 0, t.unit_weight_read / t.unit_prob, 0.0)
    sel = np.array([t.workload.graph.nodes[u]["selection_prob"] for u in t.unit_names], dtype=float)
    nodes = [arch.node(n) for n in t.kind_nodes]
    hbm, ddr = t.hbm, t.ddr
    f = float
    return KernelTables(
        unit_is_expert=(t.unit_kind == UNIT_KINDS.index("expert")),
        unit_capacity=t.unit_capacity_bytes, unit_kv=t.unit_kv_bytes, unit_weight_if_run=weight_if_run,
        unit_sel=np.minimum(sel, 1.0), unit_time=t.unit_time_s, unit_energy=t.unit_energy_j,
        unit_other_dram=t.unit_other_dram, unit_out_bytes=t.unit_out_bytes,
        stage_start=stage_start, stage_repeat=t.stage_repeat.astype(float), stage_prob=t.stage_prob.astype(float),
        edge_start=edge_start, edge_src=t.edge_src[e_order], edge_dst=t.edge_dst[e_order], edge_bytes=t.edge_bytes[e_order],
        edge_phase=edge_phase.astype(np.int64),
        kind_area=t.kind_area_mm2, kind_wafer_cost=np.array([nd.wafer_cost_usd for nd in nodes], float),
        kind_d0=np.array([nd.defect_density_per_cm2 for nd in nodes], float),
        kind_static_w=t.kind_static_w, kind_peak_dyn_w=t.kind_peak_dynamic_w,
        tokens=f(t.tokens_per_step),
        hbm_cap=f(hbm.capacity_bytes if hbm else 0), hbm_bw=f(t.hbm_bw_Bps), hbm_e=f(hbm.energy_j_per_byte if hbm else 0),
        hbm_phy=f(hbm.phy_area_mm2 if hbm else 0), hbm_footprint=f(hbm.footprint_mm2 if hbm else 0),
        hbm_cost=f(hbm.capacity_bytes * hbm.cost_usd_per_byte if hbm else 0),
        ddr_cap=f(ddr.capacity_bytes if ddr else 0), ddr_bw=f(t.ddr_bw_Bps), ddr_e=f(ddr.energy_j_per_byte if ddr else 0),
        ddr_phy=f(ddr.phy_area_mm2 if ddr else 0), ddr_cost=f(ddr.capacity_bytes * ddr.cost_usd_per_byte if ddr else 0),
        link_bw=f(t.link.bandwidth_Bps), hop_lat=f(t.link.hop_latency_s), hop_e=f(t.link.hop_energy_j_per_byte),
        bond_yield=f(t.link.bond_yield), yield_alpha=f(arch.technology.yield_alpha_logic()),
        wafer_diameter=f(arch.technology.wafer_diameter_mm()))


@nb.njit(cache=True)
def _evaluate_design(T, n, cols, kind, stacks, ddr, slots, ncopy, split, unplaced, with_faults, out):
    alive = np.ones(n, np.bool_)
    loads = np.zeros(n * 4)
    latency, energy, short, dram, net = step(T, n, cols, kind, stacks, ddr, slots, ncopy, split, alive, loads)
    static = 0.0
    area = ddr * T.ddr_phy
    package = 0.0
    cost = ddr * T.ddr_cost
    power = ddr * T.ddr_bw * T.ddr_e
    n_stacks = 0
    for i in range(n):
        k = kind[i]
        die = T.kind_area[k] + stacks[i] * T.hbm_phy
        area += die
        static += T.kind_static_w[k]
        cost += kgd_cost(die, T.kind_wafer_cost[k], T.kind_d0[k], T.yield_alpha, T.wafer_diameter)
        cost += stacks[i] * T.hbm_cost
        power += T.kind_static_w[k] + T.kind_peak_dyn_w[k] + stacks[i] * T.hbm_bw * T.hbm_e
        package += stacks[i] * T.hbm_footprint
        n_stacks += stacks[i]
    package += area
    cost /= T.bond_yield ** (n + n_stacks)

    retained_sum = 0.0
    worst = 1.0
    if with_faults:
        if n == 1:
            worst = 0.0
        for failed in range(n if n > 1 else 0):
            fslots, fcount, falive = remap_without(T, n, failed, slots, ncopy, split, stacks)
            lat_f, _, short_f, _, _ = step(T, n, cols, kind, stacks, ddr, fslots, fcount, split, falive, loads)
            # a failure never counts as a gain: re-mapping can land a unit somewhere better
            kept = min(latency / lat_f, 1.0) if short_f <= short and lat_f > 0 else 0.0
            retained_sum += kept
            worst = min(worst, kept)
    out[0] = latency
    out[1] = T.tokens / latency
    out[2] = (energy + static * latency) / T.tokens
    out[3] = area
    out[4] = package
    out[5] = cost
    out[6] = power
    out[7] = retained_sum / n if (with_faults and n > 1) else 0.0
    out[8] = worst if with_faults else 0.0
    out[9] = short
    out[10] = unplaced
    out[11] = dram
    out[12] = net



@nb.njit(cache=True)
def evaluate_arrays(T, rows, cols, kind, stacks, ddr, slots, ncopy, split, unplaced, with_faults):
    P = rows.shape[0]
    out = np.zeros((P, 13))
    for p in range(P):
        _evaluate_design(T, rows[p] * cols[p], cols[p], kind[p], stacks[p], ddr[p], slots[p], ncopy[p], split,
                         unplaced[p], with_faults, out[p])
    return out


class Evaluator:
    """Evaluates decision vectors of one study's space: ``Evaluator(tables, space)(X) -> DataFrame``."""

    def __init__(self, tables: EvalTables, space: Space, link: str, max_copies: int):
        self.tables, self.space, self.link = tables, space, link
        self.kernel = kernel_tables(tables)
        self.max_copies = max_copies

    def decode(self, X: np.ndarray):
        X = np.asarray(X, dtype=np.int64).reshape(-1, self.space.n_var)
        sl = self.space.slices
        return decode_population(
            X, sl["rows"].start, sl["cols"].start, sl["kind"].start, sl["hbm"].start, sl["ddr"].start,
            sl["place"].start, sl["copies"].start, self.space.max_slots, self.space.n_units, self.max_copies,
            self.kernel.unit_is_expert, self.space.exclusive_experts)

    def metrics_array(self, X: np.ndarray, with_faults: bool = True) -> np.ndarray:
        rows, cols, kind, stacks, ddr, slots, ncopy, unplaced = self.decode(X)
        return evaluate_arrays(self.kernel, rows, cols, kind, stacks, ddr, slots, ncopy, self.space.split,
                               unplaced, with_faults)

    def __call__(self, X: np.ndarray, with_faults: bool = True) -> pd.DataFrame:
        return pd.DataFrame(self.metrics_array(X, with_faults), columns=METRICS)

    def evaluate_designs(self, designs: list[Design], with_faults: bool = True) -> pd.DataFrame:
        """Metrics of designs given directly (hand-written or read back), not as decision vectors."""
        arrays = design_arrays(designs, self.tables, self.space.max_slots, self.max_copies)
        out = evaluate_arrays(self.kernel, *arrays, self.space.split, np.zeros(len(designs), np.int64),
                              with_faults)
        return pd.DataFrame(out, columns=METRICS)

    def designs(self, X: np.ndarray) -> list[Design]:
        rows, cols, kind, stacks, ddr, slots, ncopy, _ = self.decode(X)
        names = self.tables.kind_names
        out = []
        for p in range(len(rows)):
            n = int(rows[p] * cols[p])
            placement = {u: [int(s) for s in slots[p, i, : ncopy[p, i]]] for i, u in enumerate(self.tables.unit_names)}
            out.append(Design(rows=int(rows[p]), cols=int(cols[p]), chiplets=[names[k] for k in kind[p, :n]],
                              hbm_stacks=[int(s) for s in stacks[p, :n]], ddr_channels=int(ddr[p]), link=self.link,
                              mapping=self.space.mapping, placement=placement))
        return out


def design_arrays(designs: list[Design], tables: EvalTables, max_slots: int, max_copies: int):
    """Kernel arrays (rows, cols, kind, stacks, ddr, slots, ncopy) of explicit designs."""
    P = len(designs)
    width = max([max_slots] + [d.rows * d.cols for d in designs])
    copies = max([max_copies] + [len(s) for d in designs for s in d.placement.values()])
    rows = np.array([d.rows for d in designs], np.int64)
    cols = np.array([d.cols for d in designs], np.int64)
    kind = np.zeros((P, width), np.int64)
    stacks = np.zeros((P, width), np.int64)
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
    return rows, cols, kind, stacks, ddr, slots, ncopy
