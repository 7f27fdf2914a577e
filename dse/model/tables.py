"""Mapping-independent tables of a study, computed once: the arrays the evaluator reads.

Operator costs do not depend on where a unit is placed, only on the chiplet kind, so the cost of every
(unit, chiplet kind) pair is summed from the operator table here (arch.op_costs), weighted by each
operator's probability of running. A design's evaluation is then lookups and sums (dse.model.evaluator).
All per-unit figures are per *one* layer instance; ``stage_repeat`` says how often a stage runs.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

import arch
import memory
import noc
import workloads

from ..errors import StudyError
from ..study.spec import Study
from .expert_tiles import expected_costs
from .graph_columns import edge_columns, unit_columns
from .phases import step_phase

UNIT_KINDS = ("embedding", "attention", "ffn", "expert", "shared_expert", "lm_head", "router", "composer")


@dataclass
class EvalTables:
    """Arrays of one study (U units, K chiplet kinds, S stages, E edges). SI units."""

    unit_names: list[str]
    unit_kind: np.ndarray          # [U] index into UNIT_KINDS
    unit_stage: np.ndarray         # [U]
    unit_capacity_bytes: np.ndarray  # [U] weights of all the unit's layers
    unit_kv_bytes: np.ndarray      # [U] KV cache of the step's batch and context, all layers
    unit_weight_read: np.ndarray   # [U] expected weight bytes read per layer instance
    unit_time_s: np.ndarray        # [U, K] expected compute time per layer instance
    unit_energy_j: np.ndarray      # [U, K] expected compute + SRAM energy per layer instance
    unit_other_dram: np.ndarray    # [U, K] expected non-weight DRAM bytes (KV, spills) per layer instance
    unit_out_bytes: np.ndarray     # [U] output activation bytes per layer instance (for all-reduce)
    unit_prob: np.ndarray          # [U] probability the unit runs in a step, given its stage runs
    unit_selection: np.ndarray     # [U] per-token selection probability (1 for units every token visits)
    unit_route_tokens: np.ndarray  # [U] tokens that may select the unit in a step (its model's tokens)
    stage_repeat: np.ndarray       # [S]
    stage_prob: np.ndarray         # [S] marginal probability the stage runs in a step
    stage_after: list              # [S] tuples of predecessor stages (a DAG in topological order)
    scenarios: list                # (probability, stages run together) pairs
    edge_src: np.ndarray           # [E]
    edge_dst: np.ndarray
    edge_bytes: np.ndarray         # bytes per occurrence
    edge_repeat: np.ndarray        # occurrences per step
    edge_sync_steps: np.ndarray    # collective steps a hand-off takes (dse.model.graph_columns.sync_steps)
    kind_names: list[str]
    kind_nodes: list[str]
    kind_area_mm2: np.ndarray      # [K]
    kind_cost_usd: np.ndarray
    kind_static_w: np.ndarray
    kind_active_w: np.ndarray      # [K] power while busy, beyond operations (arch.active_power_w)
    kind_peak_dynamic_w: np.ndarray
    hbm: memory.MemorySpec | None
    ddr: memory.MemorySpec | None
    hbm_bw_Bps: float              # sustained per stack, streaming reads (memory.effective_bandwidth_Bps)
    ddr_bw_Bps: float              # sustained per channel, streaming reads
    link: noc.LinkTech
    tokens_per_step: int
    workload: workloads.Workload
    kind_wafer_cost_usd: np.ndarray | None = None       # [K] per chiplet kind, with its technology overrides
    kind_defect_density_per_cm2: np.ndarray | None = None   # [K]
    # operators of each unit (CSR over units, O operators), for the per-operator roofline of a copy
    op_ptr: np.ndarray | None = None          # [U + 1]
    op_time_s: np.ndarray | None = None       # [O, K] compute time of the operator when it runs
    op_weight_bytes: np.ndarray | None = None   # [O] weight bytes it reads when it runs
    op_other_bytes: np.ndarray | None = None  # [O, K] its other DRAM bytes (KV, spilled activations, partials)
    op_prob: np.ndarray | None = None         # [O] probability it runs, given its stage runs
    op_inv_steps: np.ndarray | None = None    # [O, K] 1 / steps of its load-compute pipeline (0: perfect overlap)
    op_energy_j: np.ndarray | None = None     # [O, K] its compute + SRAM energy when it runs (at the full clock)
    kind_power_limit_w: np.ndarray | None = None   # [K] board power limit (0: none; arch.power)
    kind_voltage_floor: np.ndarray | None = None   # [K] lowest voltage fraction the clock drives (arch.power)
    kind_idle_w: np.ndarray | None = None      # [K] power of the provisioned chip while it waits (arch.idle_power_w;
                                               # always set by `build_tables`)
    kind_mem_efficiency: np.ndarray | None = None   # [K] fraction of memory bandwidth the kind's kernels draw
    kind_kernel_overhead_s: np.ndarray | None = None   # [K] time per operator that overlaps nothing
    kind_dispatch_s: np.ndarray | None = None  # [K] host time to issue one operator
    kind_dispatch_ahead: np.ndarray | None = None  # [K] the host issues ahead (else: a floor per operator)
    kind_sequence_s: np.ndarray | None = None  # [K] host work per sequence per step the device waits for
    sequences_per_step: float = 0.0           # sequences in a step (the workload's batch)
    # SRAM-resident kinds (arch.SystolicChiplet.sram_Bps > 0): their SRAM is a chiplet's local tier when it has
    # no HBM stack attached (dse.model.hbm_placement.local_capacity); 0 for every other kind
    kind_sram_cap_bytes: np.ndarray | None = None   # [K]
    kind_sram_Bps: np.ndarray | None = None         # [K]
    kind_sram_j_per_byte: np.ndarray | None = None  # [K] read energy per byte of its SRAM banks
    kind_wafer_kgd_usd: np.ndarray | None = None    # [K] known-good cost of a wafer-scale die (arch.wafer); 0: not one
    kind_hbm_phy: np.ndarray | None = None          # [K] bool: the kind can attach HBM stacks (arch hbm_phy)
    offload: object = None     # memory.offload.OffloadTiers: host / ssd tiers below the package, or None
    ddr_stream: bool = False   # the DDR's bytes streamed into the tier above ahead of use (`stream_weights`)
    unit_precision: list[str] | None = None   # [U] each unit's precision when they differ (search.precision:
                                              # dse.model.unit_precision); None: all at workload.precision

    @property
    def n_units(self) -> int:
        return len(self.unit_names)


def build_workload(study: Study) -> workloads.Workload:
    """The study's workload section -> `workloads.extract` (one model) or `workloads.extract_ensemble`."""
    w = study.workload
    routing = w.routing.model_dump(exclude_none=True)
    common = dict(phase=step_phase(w.phase), batch=w.batch, context=w.context, precision=w.precision, routing=routing,
                  per_layer=w.per_layer, seed=w.routing.seed, fused_attention=w.attention == "fused")
    if w.ensemble is not None:
        if study.mapping.experts_kept is not None:
            raise StudyError("pruning is modelled for one model, not an ensemble", key="mapping.experts_kept")
        return workloads.extract_ensemble(w.ensemble.to_spec(), max_scenarios=w.ensemble.max_scenarios,
                                          kv_precision=w.kv_precision, **common)
    return workloads.extract_transformer(pruned_config(study), tp=w.tp, kv_precision=w.kv_precision,
                                         expert_tp=w.expert_tp, unfused_elementwise=w.elementwise == "unfused",
                                         moe_form=w.moe_form, **common)


def pruned_config(study: Study) -> workloads.ModelConfig:
    """The study's model with ``mapping.experts_kept`` routed experts per MoE layer. The least selected
    go: under uniform routing any ``kept`` of them, under Zipf routing the ranks below ``kept``, whose
    renormalised top-k selection is Zipf over the ranks kept (the same exponent), so the pruned model is
    the config with ``kept`` experts. Drawn (dirichlet) and traced routing are refused: which experts
    are least selected there is per layer and not a smaller config."""
    w, kept = study.workload, study.mapping.experts_kept
    cfg = workloads.load_model(w.model)
    if kept is None:
        return cfg
    if not cfg.is_moe:
        raise StudyError(f"{w.model} is a dense model: it has no routed experts to keep", key="mapping.experts_kept")
    if not cfg.top_k <= kept <= cfg.experts:
        raise StudyError(f"must be in {cfg.top_k}..{cfg.experts} (top-{cfg.top_k} routing over the "
                         f"{cfg.experts} routed experts of {w.model}), got {kept}", key="mapping.experts_kept")
    if w.routing.distribution not in ("uniform", "zipf"):
        raise StudyError(f"pruning is modelled for uniform and zipf routing, not {w.routing.distribution!r}",
                         key="mapping.experts_kept")
    return dataclasses.replace(cfg, experts=kept)


def build_tables(study: Study, workload: workloads.Workload | None = None) -> EvalTables:
    wl = workload or build_workload(study)
    chiplets = study.hardware.library()
    precision = study.workload.precision
    # plain PyTorch's elementwise kernels (``elementwise: unfused``) move their operands through memory
    costs = arch.op_costs(wl.ops, chiplets, precision, vector_from_dram=study.workload.elementwise == "unfused")
    if study.workload.moe_form not in workloads.BATCHED_FORMS:   # batched experts: one padded count, no spread
        costs = expected_costs(wl, chiplets, precision, costs)

    units = wl.units
    index = {u: i for i, u in enumerate(units)}
    ops = wl.ops
    op_unit = unit_codes(ops["unit"], index)
    prob = ops["prob"].to_numpy(float)

    def per_unit(values: np.ndarray) -> np.ndarray:
        """Sum op rows into units, weighting by the probability each op runs."""
        out = np.zeros((len(units),) + values.shape[1:])
        np.add.at(out, op_unit, values * (prob if values.ndim == 1 else prob[:, None]))
        return out

    weight_read = per_unit(ops["weight_bytes"].to_numpy(float))
    op_order = np.argsort(op_unit, kind="stable")
    kernel = kernels_of(ops["name"].to_numpy()[op_order], op_unit[op_order], study.workload.attention == "fused")
    first = first_rows(kernel)
    op_ptr = np.searchsorted(op_unit[op_order][first], np.arange(len(units) + 1)).astype(np.int64)
    op_w = by_kernel(kernel, ops["weight_bytes"].to_numpy(float)[op_order])
    # a fused attention kernel computes only the blocks that are not fully masked (FlashAttention-2, 3.1.1):
    # its matrix rows take their useful share (unmasked pairs / full tiles) of their full-tile time
    fused_row = np.diff(np.r_[-1, kernel]) == 0
    fused_row[np.flatnonzero(fused_row) - 1] = True
    sorted_ops = ops.iloc[op_order]
    useful = _useful_share(sorted_ops)
    op_time = by_kernel(kernel, costs.time_s[op_order] * np.where(fused_row, useful, 1.0)[:, None])
    op_inv = 1.0 / costs.overlap_steps[op_order][first]
    _flash_attention(sorted_ops, kernel, useful, chiplets, precision, op_time, op_inv)
    other_dram = per_unit(costs.dram_bytes - ops["weight_bytes"].to_numpy(float)[:, None])
    per_unit_columns = unit_columns(wl.graph, units, wl.batch, wl.context, wl.tokens_per_step, UNIT_KINDS)
    per_edge_columns = edge_columns(wl.graph, index, per_unit_columns.pop("shards"), len(units))

    mem = {m.kind: m.spec() for m in study.hardware.memory}
    hbm = next((s for s in mem.values() if s.is_hbm), None)
    ddr = next((s for s in mem.values() if not s.is_hbm), None)

    kind_area = np.array([arch.chiplet_area_mm2(c, precision) for c in chiplets])
    peak_dyn = np.array([arch.peak_dynamic_power_w(c, precision) for c in chiplets])
    return _check_stream(study, EvalTables(
        unit_names=units,
        **per_unit_columns,
        **per_edge_columns,
        unit_weight_read=weight_read,
        unit_time_s=per_unit(costs.time_s),
        unit_energy_j=per_unit(costs.energy_j),
        unit_other_dram=other_dram,
        stage_repeat=wl.stages["repeat"].to_numpy(float),
        stage_prob=wl.stages["prob"].to_numpy(float),
        stage_after=[tuple(a) for a in wl.stages["after"]],
        scenarios=list(wl.scenarios),
        kind_names=[c.name for c in chiplets],
        kind_nodes=[c.node for c in chiplets],
        kind_area_mm2=kind_area,
        kind_cost_usd=np.array([arch.chiplet_cost_usd(c, precision) for c in chiplets]),
        kind_static_w=np.array([arch.static_power_w(c, precision) for c in chiplets]),
        kind_active_w=np.array([arch.active_power_w(c, precision) for c in chiplets]),
        kind_peak_dynamic_w=peak_dyn,
        hbm=hbm, ddr=ddr,
        hbm_bw_Bps=memory.effective_bandwidth_Bps(hbm, 1) if hbm else 0.0,
        ddr_bw_Bps=memory.effective_bandwidth_Bps(ddr, 1) if ddr else 0.0,
        link=study.hardware.package.link_tech(),
        tokens_per_step=wl.tokens_per_step,
        workload=wl,
        kind_wafer_cost_usd=np.array([c.tech().wafer_cost_usd for c in chiplets], dtype=float),
        kind_defect_density_per_cm2=np.array([c.tech().defect_density_per_cm2 for c in chiplets], dtype=float),
        op_ptr=op_ptr, op_time_s=op_time, op_weight_bytes=op_w,
        op_other_bytes=by_kernel(kernel, costs.dram_bytes[op_order]) - op_w[:, None],
        op_prob=prob[op_order][first], op_inv_steps=op_inv,
        op_energy_j=by_kernel(kernel, costs.energy_j[op_order]),
        kind_power_limit_w=np.array([c.power_limit_w for c in chiplets], dtype=float),
        kind_voltage_floor=np.array([c.voltage_floor for c in chiplets], dtype=float),
        kind_idle_w=np.array([arch.idle_power_w(c, precision) for c in chiplets], dtype=float),
        kind_mem_efficiency=np.array([c.mem_efficiency for c in chiplets], dtype=float),
        kind_kernel_overhead_s=np.array([c.kernel_overhead_s for c in chiplets], dtype=float),
        kind_dispatch_s=np.array([c.dispatch_s for c in chiplets], dtype=float),
        kind_dispatch_ahead=np.array([c.dispatch_mode == "ahead" for c in chiplets], dtype=bool),
        kind_sequence_s=np.array([c.sequence_s for c in chiplets], dtype=float),
        sequences_per_step=float(study.workload.batch), offload=study.hardware.offload(),
        ddr_stream=ddr is not None and any(m.stream_weights for m in study.hardware.memory if not m.is_hbm),
        **_sram_fields(chiplets, precision)))


def stream_buffer_bytes(t: EvalTables) -> float:
    """Bytes of the two buffers weight streaming keeps in a chiplet's fast tier (`EvalTables.ddr_stream`; 0
    when off): double buffering holds the layer instance that computes and the next one arriving, so two of
    the largest unit's instances (its weights and KV cache over its stage's repeat: what one layer reads)."""
    if not t.ddr_stream or t.n_units == 0:
        return 0.0
    per_instance = (t.unit_capacity_bytes + t.unit_kv_bytes) / t.stage_repeat[t.unit_stage]
    return 2.0 * float(per_instance.max())


def _check_stream(study: Study, t: EvalTables) -> EvalTables:
    """Weight streaming needs its two buffers (`stream_buffer_bytes`) in some chiplet's fast tier: an
    SRAM-resident kind's SRAM, plus the most HBM one chiplet may attach where the kind takes HBM; refused
    naming the key when no kind of the library has the room."""
    need = stream_buffer_bytes(t)
    if need <= 0.0:
        return t
    stacks = max((m.count_range[1] for m in study.hardware.memory if m.is_hbm), default=0)
    hbm = stacks * t.hbm.capacity_bytes if t.hbm is not None else 0.0
    room = max(float(s) + (hbm if phy else 0.0) for s, phy in zip(t.kind_sram_cap_bytes, t.kind_hbm_phy))
    if room < need:
        entry = next(i for i, m in enumerate(study.hardware.memory) if not m.is_hbm and m.stream_weights)
        raise StudyError(f"weight streaming's two buffers of the largest layer ({need / 2 ** 30:.3g} GiB) fit no "
                         f"chiplet's fast tier (largest {room / 2 ** 30:.3g} GiB: an SRAM-resident kind's SRAM, "
                         f"plus its HBM); give more HBM or SRAM, or set stream_weights false",
                         key=f"hardware.memory[{entry}].stream_weights")
    return t


def _resident(c) -> bool:
    return isinstance(c, arch.SystolicChiplet) and c.sram_resident


def _sram_fields(chiplets, precision: str) -> dict:
    """Per kind: an SRAM-resident chiplet's SRAM capacity, bandwidth and read energy per byte (the bank's,
    arch.technology.Node.sram_pj), 0 for other kinds; a wafer-scale die's known-good cost (arch.wafer)."""
    res = [_resident(c) for c in chiplets]
    wafer = [isinstance(c, arch.SystolicChiplet) and c.wafer_scale for c in chiplets]
    return dict(
        kind_sram_cap_bytes=np.array([c.sram_bytes if r else 0.0 for c, r in zip(chiplets, res)], dtype=float),
        kind_sram_Bps=np.array([c.sram_Bps if r else 0.0 for c, r in zip(chiplets, res)], dtype=float),
        kind_sram_j_per_byte=np.array([c.tech().sram_pj(c.sram_bank_kb) * 1e-12 if r else 0.0
                                       for c, r in zip(chiplets, res)], dtype=float),
        kind_wafer_kgd_usd=np.array([arch.chiplet_cost_usd(c, precision) if w else 0.0
                                     for c, w in zip(chiplets, wafer)], dtype=float),
        kind_hbm_phy=np.array([c.takes_hbm for c in chiplets], dtype=np.bool_))


#: operators a fused attention kernel runs after its first (``attn_score``): workloads.extract_transformer
FUSED_INTO_SCORE = ("softmax", "attn_context")


def kernels_of(names: np.ndarray, units: np.ndarray, fused_attention: bool) -> np.ndarray:
    """Kernel index of each operator row (rows in unit order): one per row, except that with fused
    attention the softmax and P.V after a unit's Q.K^T run in its kernel (one launch, one load-compute
    pipeline over their summed compute and traffic)."""
    starts = np.ones(len(names), dtype=bool)
    if fused_attention and len(names) > 1:
        inside = np.isin(names[1:], FUSED_INTO_SCORE) & np.isin(names[:-1], ("attn_score",) + FUSED_INTO_SCORE)
        starts[1:] = ~(inside & (units[1:] == units[:-1]))
    return np.cumsum(starts) - 1


def first_rows(kernel: np.ndarray) -> np.ndarray:
    """Index of each kernel's first row."""
    return np.flatnonzero(np.diff(np.r_[-1, kernel]) > 0)


def _flash_attention(ops, kernel: np.ndarray, useful: np.ndarray, chiplets, precision: str, op_time: np.ndarray,
                     op_inv: np.ndarray) -> None:
    """A fused attention kernel on a GPU-like chiplet takes FlashAttention's time (arch.gpu.flash_attention:
    thread blocks of query rows stepping over key blocks, exponentials on the SFUs, split-KV for decode,
    its fixed time) instead of its operators' GEMM times: ``op_time`` and ``op_inv`` (1 / pipeline steps)
    of those kernels, in place."""
    names = ops["name"].to_numpy()
    fused = np.flatnonzero((names == "attn_score") & (np.r_[kernel[1:], -1] == kernel))
    gpus = [j for j, ch in enumerate(chiplets) if isinstance(ch, arch.GpuChiplet)]
    if not len(fused) or not gpus:
        return
    at = arch.costing.math_precision("attn_score", precision)
    dims = {k: ops[k].to_numpy(float)[fused] for k in ("M", "N", "K", "batch")}
    for j in gpus:
        for i, row in enumerate(fused):
            t, steps = arch.flash_attention(chiplets[j], dims["M"][i], dims["N"][i], dims["K"][i],
                                            max(dims["batch"][i], 1.0), useful[row], at)
            op_time[kernel[row], j] = t
            op_inv[kernel[row], j] = 1.0 / max(steps, 1.0)


def by_kernel(kernel: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Rows of ``values`` summed per kernel."""
    out = np.zeros((int(kernel[-1]) + 1 if len(kernel) else 0,) + values.shape[1:])
    np.add.at(out, kernel, values)
    return out


def _useful_share(ops) -> np.ndarray:
    """FLOPs / full-tile FLOPs of each matrix row (causal attention's unmasked share), 1 for the others."""
    full = 2.0 * ops["M"].to_numpy(float) * ops["N"].to_numpy(float) * ops["K"].to_numpy(float) * \
        np.maximum(ops["batch"].to_numpy(float), 1.0)
    matrix = (ops["engine"].to_numpy() == "matrix") & (full > 0)
    return np.where(matrix, ops["flops"].to_numpy(float) / np.where(matrix, full, 1.0), 1.0)


def unit_codes(unit_column, index: dict) -> np.ndarray:
    """Each operator row's unit index (``index``: unit -> its index): one lookup per distinct unit (the
    column's 14,972 names for DeepSeek-V3 per layer) instead of one per row."""
    codes, names = pd.factorize(unit_column)
    return np.array(list(map(index.__getitem__, names.tolist())), dtype=np.int64)[codes]
