"""The expert execution attribute database: every placement unit alone on every chiplet kind of a study.

One row per (unit, chiplet kind): what the unit is (model, kind, layers, tokens, FLOPs, weight and KV
bytes, visit probability) and how it runs alone on one chiplet of that kind with the fewest HBM stacks
of the study's HBM that hold it (at least one; DDR when the study has no HBM): time per step, its
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

from .copy_cost import ChipletMemory, copy_roofline, host_issue_s, kind_terms, power_terms
from .prepare import Prepared
from .tables import UNIT_KINDS

COLUMNS = ["model", "unit", "unit_kind", "layers", "tokens", "flops", "weight_bytes", "kv_bytes", "visit_prob",
           "chiplet", "hbm_stacks", "time_s", "compute_s", "memory_s", "overhead_s", "bound", "dram_bytes",
           "compute_utilisation", "memory_utilisation", "peak_flops", "bandwidth_Bps", "energy_j", "mean_power_w",
           "best_by_latency", "best_by_energy"]
#: the roofline terms, in the order a tie is settled
BOUNDS = ("compute", "memory", "overhead")


@nb.njit(cache=True)
def _alone(T, u, k, bw_hbm, bw_ddr, on_ddr):
    """(time, DRAM bytes) of one copy of unit u on a chiplet of kind k, all in HBM (or all in DDR): its
    kernels' time, or its host's time to issue them if that is longer."""
    b = T.unit_w_copy[u, 1] + T.unit_other_dram[u, k]
    t = copy_roofline(u, k, 1, T.unit_w_ratio[u, 1], b, 1.0 if on_ddr else 0.0,
                               ChipletMemory(0.0 if on_ddr else bw_hbm, bw_ddr, 0.0, 0.0),
                               kind_terms(T.kind_mem_eff, T.kind_overhead, T.kind_dispatch, k, 1.0), T.op_ptr, T.op_time,
                               T.op_w, T.op_o, T.op_prob, T.op_inv,
                               power_terms(T.kind_limit, T.kind_floor, T.kind_static_w, T.kind_active_w, k), T.op_e).time_s
    return max(t, host_issue_s(T.unit_launches, u, False, T.kind_issue[k], 1.0)), b


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


def characterize(prepared: Prepared) -> pd.DataFrame:
    """The attribute table of a prepared study (module docstring); a package-variant study uses its
    first variant's memory."""
    p = prepared.variants[0] if prepared.variants else prepared
    t, T = p.tables, p.package_evaluator.kernel
    chiplets = p.study.hardware.library()
    precision = p.study.workload.precision
    peak = np.array([c.peak_flops(precision) for c in chiplets])
    hbm_cap, hbm_bw, hbm_e = T.hbm_cap, T.hbm_bw, T.hbm_e
    ddr_bw, ddr_e = max(T.ddr_bw, 1.0), T.ddr_e
    ops = t.workload.ops
    index = {u: i for i, u in enumerate(t.unit_names)}
    op_unit = ops["unit"].map(index).to_numpy()
    flops = np.zeros(len(t.unit_names))
    np.add.at(flops, op_unit, (ops["flops"] * ops["prob"]).to_numpy(float))
    ensemble = getattr(t.workload, "ensemble", None)
    members = set(ensemble.nodes) if ensemble is not None else set()
    model = p.study.workload.label
    rows = []
    for u, unit in enumerate(t.unit_names):
        repeat = float(t.stage_repeat[t.unit_stage[u]])
        held = t.unit_capacity_bytes[u] + t.unit_kv_bytes[u]
        stacks = max(1, math.ceil(held / hbm_cap)) if hbm_cap > 0 else 0
        for k, chiplet in enumerate(chiplets):
            time_s, dram = _alone(T, u, k, stacks * hbm_bw, ddr_bw, stacks == 0)
            bw = (stacks * hbm_bw if stacks else ddr_bw) * chiplet.mem_efficiency
            energy = t.unit_energy_j[u, k] + dram * (hbm_e if stacks else ddr_e)
            compute = flops[u] / peak[k]
            memory = dram / bw
            overhead = max(time_s - max(compute, memory), 0.0)
            terms = (compute, memory, overhead)
            rows.append({
                "model": _model_of(unit, members, model), "unit": unit, "unit_kind": UNIT_KINDS[t.unit_kind[u]],
                "layers": _layers(unit, repeat), "tokens": float(t.unit_route_tokens[u] * t.unit_selection[u]),
                "flops": flops[u] * repeat, "weight_bytes": float(t.unit_capacity_bytes[u]),
                "kv_bytes": float(t.unit_kv_bytes[u]), "visit_prob": float(t.unit_prob[u] * t.stage_prob[t.unit_stage[u]]),
                "chiplet": chiplet.name, "hbm_stacks": stacks, "time_s": time_s * repeat,
                "compute_s": compute * repeat, "memory_s": memory * repeat, "overhead_s": overhead * repeat,
                "bound": BOUNDS[terms.index(max(terms))], "dram_bytes": dram * repeat,
                "compute_utilisation": flops[u] / (time_s * peak[k]) if time_s > 0 else 0.0,
                "memory_utilisation": dram / (time_s * bw) if time_s > 0 else 0.0,
                "peak_flops": float(peak[k]), "bandwidth_Bps": bw,
                "energy_j": energy * repeat, "mean_power_w": energy / time_s if time_s > 0 else 0.0})
    df = pd.DataFrame(rows, columns=COLUMNS[:-2])
    by_unit = df.groupby("unit", sort=False)
    for column, by in (("best_by_latency", "time_s"), ("best_by_energy", "energy_j")):
        best = df.loc[by_unit[by].idxmin(), ["unit", "chiplet"]]      # first of ties, as before
        df[column] = df["unit"].map(dict(zip(best["unit"], best["chiplet"])))
    return df[COLUMNS]
