"""Routed experts of a layer run as grouped kernels: one launch per operator for all of a chiplet's experts.

Serving stacks run a MoE layer's routed experts as one grouped GEMM per operator (vLLM's fused_moe,
TensorRT-LLM's MoE plugin, Megatron-LM's grouped GEMM), not one kernel per expert: the expert tiles share
a launch. So what a kernel costs whatever its size, the chiplet's ``kernel_overhead`` (launch, fill,
tail) and its host's issue time, is paid once per operator and layer on each chiplet that holds experts
of the layer, when any of them runs: with expert e running with probability p_e, the expected launches of
a chiplet are ``kernels x (1 - prod(1 - p_e))`` over the experts it holds (independent experts), where a
kernel per expert paid ``kernels x sum(p_e)``. The experts' compute and traffic are their own
(dse.model.copy_cost.copy_roofline, without the per-kernel terms).

The product is kept as a sum of logs per (stage, chiplet), so the failure path (dse.model.failures) moves
experts between chiplets by adding and subtracting terms.
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np

from .tables import UNIT_KINDS, EvalTables

#: 1 - p below this is taken as this: an expert certain to run keeps a finite log
CERTAIN = 1e-12

nowrap = nb.uintp


def group_tables(t: EvalTables) -> dict:
    """The kernel tables' fields for grouped experts: ``unit_group_lq``, log(1 - p) of each routed expert
    (p: it runs, given its stage runs; 0 for every other unit), and ``stage_group_kernels``, the kernels of
    a stage's grouped launch (the most any of its experts has; 0 for stages without experts, and for all
    when no kind pays anything per kernel: the step model then skips the groups)."""
    expert = t.unit_kind == UNIT_KINDS.index("expert")
    kernels = np.zeros(len(t.stage_repeat))
    if np.any(t.kind_kernel_overhead_s > 0) or np.any(t.kind_dispatch_ahead & (t.kind_dispatch_s > 0)):
        np.maximum.at(kernels, t.unit_stage[expert], np.diff(t.op_ptr).astype(float)[expert])
    return {"unit_group_lq": np.where(expert, np.log(np.maximum(1.0 - t.unit_prob, CERTAIN)), 0.0),
            "stage_group_kernels": kernels}


@nb.njit(cache=True, inline="always", error_model="numpy")
def add_groups(s, n, kind, lq, kernels, overhead, issue, active_w, hosts, ct, ht):
    """Each chiplet's grouped launches of stage s into its compute (``ct``) and host (``ht``) time; returns
    the active energy of those launches' overhead."""
    energy = 0.0
    for i in range(n):
        launches = kernels * (1.0 - math.exp(lq[nowrap(s), nowrap(i)]))
        k = kind[nowrap(i)]
        ct[nowrap(s), nowrap(i)] += overhead[nowrap(k)] * launches
        if hosts:
            ht[nowrap(s), nowrap(i)] += issue[nowrap(k)] * launches
        energy += active_w[nowrap(k)] * overhead[nowrap(k)] * launches
    return energy


@nb.njit(cache=True, inline="always", error_model="numpy")
def regroup(s, n, kind, lq, bk_lq, kernels, overhead, issue, hosts, ct, ht):
    """After experts moved: each chiplet's launches of stage s change from those of ``bk_lq`` to ``lq``."""
    for i in range(n):
        change = kernels * (math.exp(bk_lq[nowrap(s), nowrap(i)]) - math.exp(lq[nowrap(s), nowrap(i)]))
        if change != 0.0:
            k = kind[nowrap(i)]
            ct[nowrap(s), nowrap(i)] += overhead[nowrap(k)] * change
            if hosts:
                ht[nowrap(s), nowrap(i)] += issue[nowrap(k)] * change
