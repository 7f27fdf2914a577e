"""Which unit copies have no memory to run from: a constraint measure of the package evaluator.

A copy reads its weights, KV cache and activations from its chiplet's own HBM stacks or from the
package's DDR, which every chiplet reaches (dse.model.perf_model). The model has no other tier: no
remote HBM of a neighbouring chiplet over the package network. An SRAM-resident kind (arch.chiplet) without
HBM holds its copies in its SRAM (dse.model.hbm_placement.local_capacity): its path is there, and what does
not fit it, with no DDR below, is the design's capacity shortfall (infeasible, dse.model.objectives). A
copy that stores or moves DRAM bytes on any other chiplet with no HBM stack, in a package with no DDR channel,
has no memory path: the step model would stream its bytes at no bandwidth (a step of ~1e12 s), so such
a copy is counted (``units_without_memory``, dse.model.metrics) and the design is infeasible
(dse.model.objectives), not merely slow. A unit that neither stores nor moves DRAM bytes needs no path.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .tables import EvalTables


def needs_memory(t: EvalTables) -> np.ndarray:
    """``[U, K]``: whether a copy of unit u on a chiplet of kind k stores or moves DRAM bytes (weights,
    KV cache, other DRAM traffic such as activations)."""
    stores = (t.unit_capacity_bytes + t.unit_kv_bytes > 0) | (t.unit_weight_read > 0)
    return stores[:, None] | (t.unit_other_dram > 0)


def copies_without_memory(kind: np.ndarray, stacks: np.ndarray, ddr: np.ndarray, has_ddr: bool, slots: np.ndarray,
                          ncopy: np.ndarray, needs: np.ndarray, resident: np.ndarray | None = None) -> np.ndarray:
    """``[P, S]``: per design and chiplet slot, the unit copies there that need memory (`needs_memory`)
    and have none: the slot has no HBM stack and the package no DDR channel (``has_ddr``: the study has
    a DDR memory at all) and its kind is not SRAM-resident (``resident[k]``; None: no kind is). Arrays as in
    dse.model.contract.DecodedDesigns. A package with DDR gives every copy a path: only the designs without
    one are counted (DeepSeek-V3 per layer: a seventeenth of a population, each 15,000 units x 2 copies)."""
    P, S = kind.shape
    ddr_ok = (np.asarray(ddr) > 0) & has_ddr
    out = np.zeros((P, S), np.int64)
    rows = np.flatnonzero(~ddr_ok)
    if len(rows):
        sram = np.zeros(max(needs.shape[1], 1), np.bool_) if resident is None else np.asarray(resident, np.bool_)
        count_without_memory(rows, kind, stacks, slots, ncopy, np.asarray(needs, np.bool_), sram, out)
    return out


@nb.njit(cache=True)
def count_without_memory(rows, kind, stacks, slots, ncopy, needs, resident, out):
    """`copies_without_memory` of the designs ``rows`` (packages without DDR) into ``out``: one pass over
    their copies, no [P, U, copies] temporaries (issue 52, ninth round; the counts of the array form,
    tests/test_memory_path.py)."""
    for p in rows:
        for u in range(ncopy.shape[1]):
            for r in range(ncopy[p, u]):
                s = slots[p, u, r]
                k = kind[p, s]
                if stacks[p, s] <= 0 and not resident[k] and needs[u, k]:
                    out[p, s] += 1
