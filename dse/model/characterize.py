"""The expert execution attribute database: every placement unit alone on every chiplet kind of a study.

One row per (unit, chiplet kind): what the unit is (model, kind, layers, tokens, FLOPs, weight and KV
bytes, visit probability, its precision (the study's; under ``search.precision`` a row per precision the
unit may take) and the model's quality with that unit at it) and how it runs alone on one chiplet of that
kind with the fewest HBM stacks
of the study's HBM that hold it (at least one; DDR when the study has no HBM; an SRAM-resident kind whose
SRAM holds it: none, read from the SRAM, dse.model.hbm_placement.local_capacity): time per step, its
roofline's three time terms and which bounds it, compute and memory utilisation, energy and mean power
while it runs, and the best kind for the unit by latency and by energy. The time is the step model's own
(dse.model.copy_cost.copy_roofline: each operator a kernel, compute and memory overlapped), repeated for
the unit's identical layers; the energy is the cost table's compute and SRAM energy plus the DRAM bytes
at the memory's energy per byte.

The bound is the largest of the unit's roofline terms (Williams, Waterman & Patterson, CACM 2009):
``compute_s`` = its FLOPs at the kind's peak FLOP/s (the compute roof), ``memory_s`` = its DRAM bytes at
the bandwidth it gets (the memory roof), ``overhead_s`` = the rest of its time, which neither roof
explains: the engine's fill and drain and tile quantisation (a weight-stationary array streaming a
few decode rows through each weight tile), kernel launch and host dispatch. So ``bound`` is ``compute``,
``memory`` or ``overhead``, and agrees with the utilisations: compute and memory utilisation are
``compute_s`` and ``memory_s`` over ``time_s``. A unit without FLOPs (an embedding's gather) is never
compute-bound.
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np
import pandas as pd

import workloads

from ..quality import model_params, weight_term
from .study_quality import active_shares
from .copy_cost import ChipletMemory, copy_roofline, host_issue_s, kind_terms, power_terms
from .prepare import Prepared
from .tables import UNIT_KINDS, unit_codes

COLUMNS = ["model", "unit", "unit_kind", "layers", "tokens", "flops", "weight_bytes", "kv_bytes", "visit_prob",
           "precision", "quality_frac", "chiplet", "hbm_stacks", "time_s", "compute_s", "memory_s", "overhead_s", "bound", "dram_bytes",
           "compute_utilisation", "memory_utilisation", "peak_flops", "bandwidth_Bps", "energy_j", "mean_power_w",
           "best_by_latency", "best_by_energy"]
#: the roofline terms, in the order a tie is settled
BOUNDS = ("compute", "memory", "overhead")


@nb.njit(cache=True)
def _alone(T, u, k, bw_hbm, bw_ddr, on_ddr):
    """(time, DRAM bytes) of one copy of unit u on a chiplet of kind k, all in HBM (or all in DDR; an
    SRAM-resident kind whose SRAM holds the unit: all in SRAM): its kernels' time, or its host's time to
    issue them if that is longer."""
    b = T.unit_w_copy[u, 1] + T.unit_other_dram[u, k]
    if T.kind_sram_bw[k] > 0.0 and T.unit_capacity[u] + T.unit_kv[u] <= T.kind_sram_cap[k]:
        on_ddr, bw_hbm = False, T.kind_sram_bw[k]
    t = copy_roofline(u, k, 1, T.unit_w_ratio[u, 1], b, 1.0 if on_ddr else 0.0, 0.0,
                               ChipletMemory(0.0 if on_ddr else bw_hbm, bw_ddr, 0.0, 0.0, 0.0, 0.0, 0.0),
                               kind_terms(T.kind_mem_eff, T.kind_overhead, T.kind_dispatch, k, 1.0), T.op_ptr, T.op_time,
                               T.op_w, T.op_o, T.op_prob, T.op_inv,
                               power_terms(T.kind_limit, T.kind_floor, T.kind_static_w, T.kind_active_w, k), T.op_e).time_s
    return max(t, host_issue_s(T.unit_launches, u, False, T.kind_issue[k], 1.0)), b


@nb.njit(cache=True)
def _alone_all(T, stacks, hbm_bw, ddr_bw):
    """`_alone` of every unit (rows, on ``stacks[u]`` HBM stacks, DDR where 0) on every kind (columns):
    (time [U, K], DRAM bytes [U, K]), in one call."""
    U, K = stacks.shape[0], T.kind_mem_eff.shape[0]
    time = np.empty((U, K))
    dram = np.empty((U, K))
    for u in range(U):
        for k in range(K):
            time[u, k], dram[u, k] = _alone(T, u, k, stacks[u] * hbm_bw, ddr_bw, stacks[u] == 0)
    return time, dram


def _model_of(unit: str, members: set[str], model: str) -> str:
    """The ensemble member a unit belongs to (``member/unit``), or the study's model."""
    head = unit.split("/", 1)[0]
    return head if "/" in unit and head in members else model


def _layers(unit: str, repeat: float) -> str:
    """The layer range of a unit's name (``L0-31.e3`` -> ``0-31``), else its count of identical layers."""
    for part in unit.split("."):
        if part.startswith("L") and part[1:2].isdigit():
            return part[1:]
    return str(int(repeat))


def unit_quality(prepared: Prepared) -> np.ndarray:
    """Each unit's ``quality_frac`` (dse.quality, docs/quality.md): the model's score kept when that unit
    alone runs at its precision (the study's, or its own under ``search.precision``) and the rest at 16
    bits. Its share of the loss is its share of a token's active parameters
    (dse.model.study_quality.active_shares). NaN for an ensemble (its members' quality is not modelled
    per unit). `weight_term` runs once per distinct (precision, share): DeepSeek-V3 per layer's 14,972
    units have 262."""
    spec, t = prepared.study.workload, prepared.tables
    if spec.model is None:
        return np.full(len(t.unit_names), np.nan)
    share = active_shares(t)
    precision = t.unit_precision or [spec.precision] * len(share)
    params = model_params(workloads.load_model(spec.model))
    pairs = list(zip(precision, map(float, share)))
    kept = {pair: weight_term(pair[0], params, pair[1])[0] for pair in dict.fromkeys(pairs)}
    return np.array(list(map(kept.__getitem__, pairs)))


def characterize(prepared: Prepared) -> pd.DataFrame:
    """The attribute table of a prepared study (module docstring); a package-variant study uses its
    first variant's memory. With ``search.precision`` each unit has a row per precision it may take
    (its ``quality_frac`` at that precision): the variants of the first one's package, each unit's rows
    kept once per precision."""
    first = prepared.variants[0] if prepared.variants else prepared
    parts = [v for v in prepared.variants if v.study.hardware == first.study.hardware] or [first]
    df = pd.concat([_table(p) for p in parts], ignore_index=True)
    df = df.drop_duplicates(["unit", "precision", "chiplet"], ignore_index=True)
    by_unit = df.groupby(["unit", "precision"], sort=False)
    group = by_unit.ngroup().to_numpy()          # each row's (unit, precision), numbered as first seen
    chiplet = df["chiplet"].to_numpy(dtype=object)
    for column, by in (("best_by_latency", "time_s"), ("best_by_energy", "energy_j")):
        best = by_unit[by].idxmin().to_numpy()    # each group's best row (first of ties), groups as first seen
        df[column] = chiplet[best][group].tolist()
    return df[COLUMNS]


def _table(p: Prepared) -> pd.DataFrame:
    """One package variant's table: every unit on every chiplet kind at the unit's precision."""
    t, T = p.tables, p.package_evaluator.kernel
    chiplets = p.study.hardware.library()
    unit_precision = t.unit_precision or [p.study.workload.precision] * len(t.unit_names)
    rates = {q: [c.peak_flops(q) for c in chiplets] for q in set(unit_precision)}
    peak = np.array([rates[q] for q in unit_precision], dtype=float)      # [U, K]
    hbm_cap, hbm_bw, hbm_e = T.hbm_cap, T.hbm_bw, T.hbm_e
    ddr_bw, ddr_e = max(T.ddr_bw, 1.0), T.ddr_e
    ops = t.workload.ops
    op_unit = unit_codes(ops["unit"], {u: i for i, u in enumerate(t.unit_names)})
    flops = np.zeros(len(t.unit_names))
    np.add.at(flops, op_unit, (ops["flops"] * ops["prob"]).to_numpy(float))
    ensemble = getattr(t.workload, "ensemble", None)
    members = set(ensemble.nodes) if ensemble is not None else set()
    model = p.study.workload.label
    U, K = len(t.unit_names), len(chiplets)
    repeat = np.asarray(t.stage_repeat, float)[np.asarray(t.unit_stage)]
    held = np.asarray(t.unit_capacity_bytes, float) + np.asarray(t.unit_kv_bytes, float)
    stacks = (np.maximum(1, np.ceil(held / hbm_cap)) if hbm_cap > 0 else np.zeros(U)).astype(np.int64)
    time_s, dram = _alone_all(T, stacks, float(hbm_bw), float(ddr_bw))
    efficiency = np.array([c.mem_efficiency for c in chiplets])
    # an SRAM-resident kind holds a unit its SRAM can: read from there, no HBM stack (as `_alone`)
    in_sram = (T.kind_sram_bw[None, :] > 0) & (held[:, None] <= T.kind_sram_cap[None, :])
    bw = np.where(in_sram, T.kind_sram_bw[None, :],
                  np.where(stacks[:, None] > 0, stacks[:, None] * hbm_bw, ddr_bw)) * efficiency[None, :]
    per_byte = np.where(in_sram, T.kind_sram_e[None, :], np.where(stacks[:, None] > 0, hbm_e, ddr_e))
    energy = np.asarray(t.unit_energy_j, float)[:, :K] + dram * per_byte
    compute = flops[:, None] / peak
    memory = dram / bw
    overhead = np.maximum(time_s - np.maximum(compute, memory), 0.0)
    bound = np.where((compute >= memory) & (compute >= overhead), 0, np.where(memory >= overhead, 1, 2))
    busy = time_s > 0
    safe = np.where(busy, time_s, 1.0)
    names = list(t.unit_names)
    per_unit = {      # one value a unit, repeated over the kinds
        "model": [_model_of(unit, members, model) for unit in names], "unit": names,
        "unit_kind": [UNIT_KINDS[x] for x in t.unit_kind],
        "layers": [_layers(unit, r) for unit, r in zip(names, repeat)],
        "tokens": np.asarray(t.unit_route_tokens, float) * np.asarray(t.unit_selection, float),
        "flops": flops * repeat, "weight_bytes": np.asarray(t.unit_capacity_bytes, float),
        "kv_bytes": np.asarray(t.unit_kv_bytes, float),
        "visit_prob": np.asarray(t.unit_prob, float) * np.asarray(t.stage_prob, float)[np.asarray(t.unit_stage)],
        "precision": list(unit_precision)}
    per_unit["quality_frac"] = unit_quality(p)
    columns = {c: np.repeat(np.asarray(v, dtype=object if isinstance(v, list) else float), K)
               for c, v in per_unit.items()}
    columns.update({
        "chiplet": np.tile(np.array([c.name for c in chiplets], dtype=object), U),
        "hbm_stacks": np.where(in_sram, 0, stacks[:, None]).ravel(), "time_s": (time_s * repeat[:, None]).ravel(),
        "compute_s": (compute * repeat[:, None]).ravel(), "memory_s": (memory * repeat[:, None]).ravel(),
        "overhead_s": (overhead * repeat[:, None]).ravel(), "bound": np.asarray(BOUNDS, dtype=object)[bound.ravel()],
        "dram_bytes": (dram * repeat[:, None]).ravel(),
        "compute_utilisation": np.where(busy, flops[:, None] / (safe * peak), 0.0).ravel(),
        "memory_utilisation": np.where(busy, dram / (safe * bw), 0.0).ravel(),
        "peak_flops": peak.ravel(), "bandwidth_Bps": bw.ravel(),
        "energy_j": (energy * repeat[:, None]).ravel(),
        "mean_power_w": np.where(busy, energy / safe, 0.0).ravel()})
    return pd.DataFrame(columns, columns=COLUMNS[:-2])
