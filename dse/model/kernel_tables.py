"""The study tables packed for the Numba kernels: `KernelTables`, built once per study by `kernel_tables`.

Units come in stage order and edges are sorted by the stage they feed, so a stage's units and hand-offs are
ranges (``stage_start``, ``edge_start``); a unit's incident edges, a stage's predecessors and a scenario's
stages are CSR lists. Every field is an array or a scalar: the kernels bind the fields they use once per
call (dse.model.perf_model, "Implementation note").
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

import arch

from .copy_table import COST_FIELDS, copy_tables
from .grouped import group_tables
from .tables import UNIT_KINDS, EvalTables, stream_buffer_bytes

KernelTables = namedtuple("KernelTables", [
    "unit_is_expert", "unit_stage", "unit_read_scale", "unit_capacity", "unit_kv", "unit_w_copy", "unit_time", "unit_energy",
    "unit_other_dram", "unit_out_bytes", "unit_edge_ptr", "unit_edges", "stage_start", "stage_repeat", "stage_prob",
    "after_ptr", "after_ids", "scen_ptr", "scen_stages", "scen_prob", "edge_start", "edge_src", "edge_dst",
    "edge_bytes", "edge_sync", "edge_phase", "edge_stage", "chain", "kind_area", "kind_wafer_cost", "kind_d0", "kind_static_w",
    "kind_active_w", "kind_peak_dyn_w",
    "tokens", "hbm_cap", "hbm_bw", "hbm_e", "hbm_phy", "hbm_footprint", "hbm_cost", "ddr_cap",
    "ddr_bw", "ddr_e", "ddr_phy", "ddr_cost", "link_bw", "bond_yield", "packaging", "yield_alpha", "wafer_diameter",
    "unit_w_ratio", "op_ptr", "op_time", "op_w", "op_o", "op_prob", "op_inv", "kind_mem_eff", "kind_overhead",
    "kind_dispatch", "kind_issue", "unit_launches", "hosts", "kind_seq", "sequences", "unit_group_lq",
    "stage_group_kernels", "op_e", "kind_limit", "kind_floor", "kind_idle_extra",
    # SRAM-resident kinds' SRAM as the local tier (dse.model.hbm_placement.local_capacity), wafer-scale dies' cost;
    # ``sram_over_hbm``: some such kind can attach HBM, its SRAM then a tier in front of it (three tiers)
    "kind_sram_cap", "kind_sram_bw", "kind_sram_e", "kind_wafer_kgd", "sram_over_hbm",
    # weight streaming from the DDR (`stream_weights`): the two buffers' bytes in the fast tier; 0: off
    "stream_buf",
    # tiers below the package (dse.model.offload; ``offload`` False: none, every figure 0)
    "offload", "host_cap", "ssd_cap", "link_bps", "ssd_bps", "host_e", "ssd_e",
    # copy costs of the study alone (dse.model.copy_table): ``copy_table`` [U, C, K, copy_stacks + DDR channels, 4]
    # (no rows: none), ``copy_fixed`` [U, C, K, 2]; ``copy_stacks`` the stack counts it covers
    "copy_table", "copy_fixed", "copy_stacks",
    # units whose copies cost the same on the same chiplet (`cost_classes`; dse.model.failures's memo)
    "unit_cost_class",
    # per (stage, instance) row ``2 s + instance``: its hand-offs' bytes and longest sync (`hand_off_rows`;
    # dse.model.failure_bound)
    "row_bytes", "row_sync"])

#: dse.model.failures's copy-cost memo keeps copy counts up to this (Workspace.memo_t's last axis)
MEMO_COPIES = 4


def _csr(groups: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(groups) + 1, np.int64)
    ptr[1:] = np.cumsum([len(g) for g in groups])
    flat = np.array([x for g in groups for x in g], np.int64)
    return ptr, flat


def incident_edges(src: np.ndarray, dst: np.ndarray, n_units: int) -> tuple[np.ndarray, np.ndarray]:
    """Each unit's incident edges as a CSR list (pointers, edge numbers): the edges it sends or receives
    (a unit's own loop once), ascending. Sorted on arrays by (unit, edge): 30,000 hand-offs of DeepSeek-V3
    per layer without a Python step each."""
    edge = np.arange(len(src), dtype=np.int64)
    other = dst != src
    unit = np.concatenate([src, dst[other]]).astype(np.int64)
    edge = np.concatenate([edge, edge[other]])
    ptr = np.zeros(n_units + 1, np.int64)
    ptr[1:] = np.cumsum(np.bincount(unit, minlength=n_units))
    return ptr, edge[np.lexsort((edge, unit))]


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


def kernel_tables(t: EvalTables, max_copies: int, split: bool, copies: int = 0, stacks: int = -1,
                  channels: int = -1) -> KernelTables:
    """Pack the study tables into the arrays the Numba kernels read (stages and edges in order), with the copy
    costs of the study alone (dse.model.copy_table) for 1..``copies`` copies, 0..``stacks`` HBM stacks on a
    chiplet and 0..``channels`` DDR channels (``copies`` 0: none)."""
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
    edge_sync = t.edge_sync_steps[e_order] * t.link.sync_latency_s
    unit_edge_ptr, unit_edges = incident_edges(src, dst, t.n_units)
    after = [list(a) for a in t.stage_after]
    assert all(p < s for s, a in enumerate(after) for p in a), "stages must be numbered in topological order"
    after_ptr, after_ids = _csr(after)
    scen_ptr, scen_stages = _csr([list(stages) for _, stages in t.scenarios])
    unit_w_copy = weight_per_copy(t, max_copies, split)
    with np.errstate(divide="ignore", invalid="ignore"):    # share of a unit's weight bytes one copy reads
        unit_w_ratio = np.where(t.unit_weight_read[:, None] > 0, unit_w_copy / t.unit_weight_read[:, None], 0.0)
    hbm, ddr, f = t.hbm, t.ddr, float
    T = KernelTables(
        unit_is_expert=(t.unit_kind == UNIT_KINDS.index("expert")), unit_stage=t.unit_stage.astype(np.int64),
        unit_read_scale=(t.stage_repeat * t.stage_prob)[t.unit_stage].astype(float),
        unit_capacity=t.unit_capacity_bytes, unit_kv=t.unit_kv_bytes, unit_w_copy=unit_w_copy, unit_time=t.unit_time_s, unit_energy=t.unit_energy_j,
        unit_other_dram=t.unit_other_dram, unit_out_bytes=t.unit_out_bytes, unit_edge_ptr=unit_edge_ptr,
        unit_edges=unit_edges, stage_start=stage_start, stage_repeat=t.stage_repeat.astype(float),
        stage_prob=t.stage_prob.astype(float), after_ptr=after_ptr, after_ids=after_ids, scen_ptr=scen_ptr,
        scen_stages=scen_stages, scen_prob=np.array([p for p, _ in t.scenarios], float),
        edge_start=edge_start, edge_src=src, edge_dst=dst, edge_bytes=t.edge_bytes[e_order],
        edge_sync=edge_sync,
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
        bond_yield=f(t.link.bond_yield),
        packaging=arch.packaging_params(t.link.packaging, t.link.bond_yield),
        yield_alpha=f(arch.technology.yield_alpha_logic()),
        wafer_diameter=f(arch.technology.wafer_diameter_mm()),
        unit_w_ratio=unit_w_ratio, op_ptr=t.op_ptr, op_time=t.op_time_s, op_w=t.op_weight_bytes,
        op_o=t.op_other_bytes, op_prob=t.op_prob, op_inv=t.op_inv_steps, kind_mem_eff=t.kind_mem_efficiency,
        kind_overhead=t.kind_kernel_overhead_s, kind_dispatch=np.where(t.kind_dispatch_ahead, 0.0, t.kind_dispatch_s),
        kind_issue=np.where(t.kind_dispatch_ahead, t.kind_dispatch_s, 0.0),
        hosts=bool(np.any(t.kind_dispatch_ahead & (t.kind_dispatch_s > 0))), kind_seq=t.kind_sequence_s,
        sequences=f(t.sequences_per_step),
        op_e=t.op_energy_j, kind_limit=t.kind_power_limit_w, kind_floor=t.kind_voltage_floor,
        kind_idle_extra=np.maximum(t.kind_idle_w - t.kind_static_w, 0.0),
        unit_launches=np.diff(np.concatenate([[0.0], np.cumsum(t.op_prob)])[t.op_ptr]), **group_tables(t),
        kind_sram_cap=t.kind_sram_cap_bytes, kind_sram_bw=t.kind_sram_Bps, kind_sram_e=t.kind_sram_j_per_byte,
        kind_wafer_kgd=t.kind_wafer_kgd_usd,
        sram_over_hbm=bool(hbm is not None and t.kind_hbm_phy is not None
                           and np.any((t.kind_sram_Bps > 0) & t.kind_hbm_phy)),
        stream_buf=stream_buffer_bytes(t),
        **_offload_fields(t.offload),
        copy_table=np.zeros((0, 0, len(t.kind_mem_efficiency), 0, COST_FIELDS)),
        copy_fixed=np.zeros((0, 0, len(t.kind_mem_efficiency), 2)), copy_stacks=0,
        unit_cost_class=cost_classes(t.op_ptr, (t.op_time_s, t.op_weight_bytes, t.op_other_bytes, t.op_prob,
                                                t.op_inv_steps, t.op_energy_j),
                                     (unit_w_ratio[:, :MEMO_COPIES + 1], unit_w_copy[:, :MEMO_COPIES + 1],
                                      t.unit_other_dram,
                                      t.unit_kind == UNIT_KINDS.index("expert"))),
        **hand_off_rows(edge_stage[e_order], edge_phase, t.edge_bytes[e_order], edge_sync, t.stage_repeat))
    if copies <= 0:
        return T
    table, fixed = copy_tables(T, copies, stacks + 1, channels + 1)
    return T._replace(copy_table=table, copy_fixed=fixed, copy_stacks=stacks + 1)


def hand_off_rows(edge_stage: np.ndarray, edge_phase: np.ndarray, edge_bytes: np.ndarray, edge_sync: np.ndarray,
                  stage_repeat: np.ndarray) -> dict:
    """``row_bytes`` and ``row_sync`` ``[2 S]``: per load row ``2 s + instance`` (dse.model.perf_model), the bytes
    of the hand-offs into that instance of stage s and their longest software sync, s; rows of an instance a
    stage does not have (``instance`` 1 of a stage run once) hold 0. Edge phases as dse.model.hand_offs.in_instance
    reads them: 0 into every instance, 1 into the first, 2 into the others."""
    rows = np.zeros(2 * len(stage_repeat))
    sync = np.zeros(2 * len(stage_repeat))
    for instance, phase in ((0, 1), (1, 2)):
        into = (edge_phase == 0) | (edge_phase == phase)
        if instance == 1:
            into &= stage_repeat[edge_stage] > 1
        row = 2 * edge_stage[into] + instance
        np.add.at(rows, row, edge_bytes[into])
        np.maximum.at(sync, row, edge_sync[into])
    return dict(row_bytes=rows, row_sync=sync)


def cost_classes(op_ptr: np.ndarray, per_op: tuple, per_unit: tuple) -> np.ndarray:
    """``[U]``: a class per unit, equal for two units exactly when every figure
    dse.model.copy_cost.copy_roofline reads of them is the same bits (their operators' rows ``per_op``, in
    order, and their rows of ``per_unit``, for copy counts up to `MEMO_COPIES` where a row is per count): a
    copy of either on the same chiplet, with the same copy count and DDR fraction, then costs the same
    (dse.model.failures re-uses such costs). Classes are numbered in order of first appearance."""
    ops = np.column_stack([np.asarray(a, float).reshape(len(a), -1) for a in per_op]).view(np.int64)
    op_class = row_ids(ops)
    U = len(op_ptr) - 1
    counts = np.diff(op_ptr)
    lane = np.arange(int(counts.max()) if U else 0)[None, :]
    ids = np.where(lane < counts[:, None], op_class[np.minimum(op_ptr[:-1, None] + lane, max(len(ops) - 1, 0))]
                   if len(ops) else 0, -1)
    rows = np.column_stack([counts, ids] + [np.ascontiguousarray(a, float).reshape(U, -1).view(np.int64)
                                            for a in per_unit]).astype(np.int64)
    return row_ids(rows)


def row_ids(rows: np.ndarray) -> np.ndarray:
    """Ids of the rows of a 2-D int64 array, equal exactly for equal rows, numbered in order of first
    appearance: rows grouped by a 64-bit hash (multiply-xor per column), the grouping checked row for row
    (a dictionary of the rows' bytes where two rows share a hash)."""
    h = np.zeros(len(rows), np.uint64)
    for col in np.ascontiguousarray(rows.T).view(np.uint64):
        h ^= col
        h *= np.uint64(0x9E3779B97F4A7C15)
        h ^= h >> np.uint64(29)
    _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    if not np.array_equal(rows[first][inverse], rows):
        seen: dict[bytes, int] = {}
        return np.fromiter((seen.setdefault(r.tobytes(), len(seen)) for r in rows), np.int64, len(rows))
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse]


def _offload_fields(o) -> dict:
    """The tiers below the package (memory.offload.OffloadTiers) as kernel scalars."""
    if o is None:
        return dict(offload=False, host_cap=0.0, ssd_cap=0.0, link_bps=1.0, ssd_bps=1.0, host_e=0.0, ssd_e=0.0)
    return dict(offload=True, host_cap=float(o.host_capacity_bytes), ssd_cap=float(o.ssd_capacity_bytes),
                link_bps=float(o.link_Bps), ssd_bps=float(max(o.ssd_read_Bps, 1.0)), host_e=float(o.host_j_per_byte),
                ssd_e=float(o.ssd_j_per_byte))
