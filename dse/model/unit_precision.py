"""Units at precisions of their own: ``search.precision`` (dse.study.schema.search) resolved to one
precision per unit, and the study's tables for that assignment.

A concrete study (one of `Study.variants`: each role of ``search.precision`` given one precision) names
precisions by role. A unit takes the most specific role that names it: its own name, then
``hot_experts`` / ``cold_experts`` (a layer's routed experts ranked by per-token selection probability,
ties by index, the more selected half hot: cold experts in 4 bits and hot ones in 16 is the
mixed-precision MoE recipe of e.g. Li et al. 2024, "Examining Post-Training Quantization for
Mixture-of-Experts", which keeps more bits where more tokens go), then its unit kind, then the list form
(every unit); a unit no role names keeps ``workload.precision``.

One mechanism carries every figure: the workload is extracted and costed at each precision used, exactly
as a study at that precision (workloads.extract_transformer: weight bytes at the precision, activations
and KV cache at it but never below a byte; arch.op_costs: the chiplet's rate at the precision, e.g. the
8-bit tensor-core rate for fp8 and int8 where the chiplet has one), and each unit's rows (its weights,
KV cache, compute time and energy, its operators, the hand-offs it sends) are taken from the tables of
its own precision. So 4-bit weights read a quarter of the bf16 bytes and hold a quarter of the HBM, and
latency, energy, memory and traffic follow each unit's choice through the unchanged evaluator. The
chiplets' own figures (area, cost, static, idle and peak power) are those at the widest precision used:
the datapath must hold it.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

import workloads

from ..errors import StudyError
from ..study.spec import Study
from .tables import UNIT_KINDS, EvalTables

#: roles naming routed experts by how often they are selected (module docstring)
EXPERT_ROLES = ("hot_experts", "cold_experts")
#: fields of `EvalTables` with one row per unit, per operator (CSR ``op_ptr``) and per edge
UNIT_FIELDS = ("unit_capacity_bytes", "unit_kv_bytes", "unit_weight_read", "unit_time_s", "unit_energy_j",
               "unit_other_dram", "unit_out_bytes")
OP_FIELDS = ("op_time_s", "op_weight_bytes", "op_other_bytes", "op_inv_steps", "op_energy_j")
EDGE_FIELDS = ("edge_bytes",)


def expert_heat(tables: EvalTables) -> dict[int, str]:
    """Unit index -> ``hot_experts`` or ``cold_experts`` for every routed expert: per layer (the unit's
    name before its last dot), the more selected half hot."""
    layers: dict[str, list[int]] = {}
    expert = UNIT_KINDS.index("expert")
    for u, kind in enumerate(tables.unit_kind):
        if kind == expert:
            layers.setdefault(tables.unit_names[u].rpartition(".")[0], []).append(u)
    out = {}
    for units in layers.values():
        q = np.asarray(tables.unit_selection, float)[units]
        for rank, i in enumerate(np.argsort(-q, kind="stable")):
            out[units[i]] = EXPERT_ROLES[0] if rank < len(units) // 2 else EXPERT_ROLES[1]
    return out


def unit_precisions(study: Study, tables: EvalTables) -> list[str]:
    """The precision of every unit of ``tables`` under the concrete ``study``'s assignment (module
    docstring); a `StudyError` naming ``search.precision.<role>`` for a role that names no unit."""
    choice = study.precision_choice() or {}
    heat = expert_heat(tables)
    names = {n: u for u, n in enumerate(tables.unit_names)}
    for role in choice:
        if role and role not in UNIT_KINDS and role not in EXPERT_ROLES and role not in names:
            raise StudyError(f"unknown role {role!r}; allowed: a unit kind ({', '.join(UNIT_KINDS[:6])}), "
                             f"{', '.join(EXPERT_ROLES)} or a unit's name (dse workload)",
                             key=f"search.precision.{role}")
    out = []
    for u, name in enumerate(tables.unit_names):
        for role in (name, heat.get(u), UNIT_KINDS[tables.unit_kind[u]], ""):
            if role is not None and role in choice:
                out.append(choice[role])
                break
        else:
            out.append(study.workload.precision)
    return out


def widest(precisions) -> str:
    """The precision of most bits among ``precisions`` (the first of equal width)."""
    return max(precisions, key=workloads.bytes_per_element)


def mixed_tables(study: Study, build: Callable[[Study], EvalTables]) -> EvalTables:
    """The tables of a concrete ``study`` whose units have precisions of their own (module docstring);
    ``build(study)`` builds one study's tables at its one precision (dse.model.tables.build_tables, or a
    cache of it)."""
    single = study.model_copy(update={"search": study.search.model_copy(update={"precision": None})})

    def at(precision: str) -> EvalTables:
        return build(single.model_copy(update={"workload": single.workload.model_copy(
            update={"precision": precision})}))

    first = at(study.workload.precision)
    precision = unit_precisions(study, first)
    used = list(dict.fromkeys(precision))
    by = {p: at(p) for p in used}
    base = by[widest(used)]
    for p, t in by.items():     # the same units and operators at every precision, only their bytes and costs differ
        if t.unit_names != base.unit_names or not np.array_equal(t.op_ptr, base.op_ptr) or \
                not np.array_equal(t.edge_src, base.edge_src):
            raise StudyError(f"the workload at {p} has other units or operators than at {widest(used)}",
                             key="search.precision")
    prec = np.array(precision)
    unit_rows = {p: prec == p for p in used}
    op_unit = np.repeat(np.arange(len(prec)), np.diff(base.op_ptr))
    changes = {}
    for fields, rows in ((UNIT_FIELDS, lambda p: unit_rows[p]), (OP_FIELDS, lambda p: unit_rows[p][op_unit]),
                         (EDGE_FIELDS, lambda p: unit_rows[p][base.edge_src])):
        for name in fields:
            value = np.array(getattr(base, name), dtype=float, copy=True)
            for p, t in by.items():
                value[rows(p)] = np.asarray(getattr(t, name), float)[rows(p)]
            changes[name] = value
    return dataclasses.replace(base, unit_precision=precision, **changes)
