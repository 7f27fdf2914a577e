"""What one copy of a unit costs where that depends on the study alone: computed once per study, looked up by the
intact pass (dse.model.perf_model.base_passes) instead of costed again for every copy of every design.

A copy's `copy_roofline` (dse.model.copy_cost) reads its unit u, its copy count c, its chiplet's kind k, the
memory it reads from and f, the fraction of its bytes in DDR. Two cases leave the design out of it:

* f = 0 (every byte in the chiplet's local tier, two tiers, no weight streaming): the local tier is the
  chiplet's ``v`` HBM stacks (or an SRAM-resident kind's SRAM with none); the DDR enters as 0 / B_ddr = 0, so the
  cost is a function of (u, c, k, v);
* every byte from DDR (f = 1, or a chiplet with no local tier, where `copy_roofline` sets f = 1): the local
  tier's terms are 0 x its figures = 0, so the cost is a function of (u, c, k, the package's DDR channels).

`copy_table` holds those costs (time, DDR bytes, DRAM energy, clock energy change) for the copy counts,
stack counts and DDR channels the study's space allows; ``fixed`` holds for every (u, c, k) the copy's DRAM
bytes (`copy_bytes`) and its share of the unit's operator energy (energy / c). Every entry is made by the
same Numba helpers from the same inputs as the pass would, so a lookup gives the same bits (IEEE arithmetic,
no fast-math); what the table does not cover (0 < f < 1, a count outside its range, three tiers, weight
streaming, tiers below the package) is costed as before. A table of more than `MAX_TABLE` floats (a very
large model over wide ranges) is left empty: the pass then costs every copy.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .copy_cost import copy_bytes, copy_roofline, kind_terms, local_memory, power_terms

nowrap = nb.uintp      # see dse.model.perf_model: an unsigned index skips the negative-index wrap-around

MAX_TABLE = 1 << 21     # floats (16 MiB) at most in `copy_table`
COST_FIELDS = 4         # time [s], DDR bytes, DRAM energy [J], clock energy change [J] (dse.model.copy_cost.CopyCost)


def copy_tables(T, copies: int, n_stacks: int, n_ddr: int) -> tuple[np.ndarray, np.ndarray]:
    """(``table`` [U, copies, K, n_stacks + n_ddr, 4], ``fixed`` [U, copies, K, 2]) of the kernel tables T for
    1..copies copies, 0..n_stacks - 1 stacks and 0..n_ddr - 1 DDR channels; ``table`` has no rows when it
    would exceed `MAX_TABLE` or when the study has three tiers, weight streaming or tiers below the package
    (its copies are costed in the pass)."""
    U, K = T.unit_capacity.shape[0], T.kind_mem_eff.shape[0]
    fixed = np.zeros((U, copies, K, 2))
    fill_fixed(T.unit_w_copy, T.unit_other_dram, T.unit_energy, fixed)
    V = n_stacks + n_ddr
    if U * copies * K * V * COST_FIELDS > MAX_TABLE or T.sram_over_hbm or T.offload or T.stream_buf > 0.0:
        return np.zeros((0, copies, K, V, COST_FIELDS)), fixed
    table = np.zeros((U, copies, K, V, COST_FIELDS))
    fill_table(T, table, n_stacks)
    return table, fixed


@nb.njit(cache=True, error_model="numpy")
def fill_fixed(w_copy, other_dram, unit_energy, fixed):
    """``fixed[u, c - 1, k]``: (`copy_bytes`, the unit's operator energy on kind k / c)."""
    for u in range(fixed.shape[0]):
        for c in range(1, fixed.shape[1] + 1):
            for k in range(fixed.shape[2]):
                fixed[u, c - 1, k, 0] = copy_bytes(w_copy, other_dram, u, c, k)
                fixed[u, c - 1, k, 1] = unit_energy[u, k] / c


@nb.njit(cache=True, error_model="numpy")
def fill_table(T, table, n_stacks):
    """``table[u, c - 1, k, v]``: the `copy_roofline` of one of c copies of unit u on kind k, all its bytes in
    the local tier of v stacks (v < ``n_stacks``; NaN where that tier does not exist: no stacks and no
    SRAM-resident SRAM) or all from DDR over v - ``n_stacks`` channels."""
    hbm_bw, hbm_e, ddr_e, sram_bw, sram_e = T.hbm_bw, T.hbm_e, T.ddr_e, T.kind_sram_bw, T.kind_sram_e
    for u in range(table.shape[0]):
        alone = 0.0 if T.unit_is_expert[u] else 1.0
        for c in range(1, table.shape[1] + 1):
            for k in range(table.shape[2]):
                b = copy_bytes(T.unit_w_copy, T.unit_other_dram, u, c, k)
                for v in range(table.shape[3]):
                    if v < n_stacks:
                        memory = local_memory(v, hbm_bw, hbm_e, sram_bw[k], sram_e[k], 1.0, ddr_e, 0.0)
                        f = 0.0
                        if memory.hbm_Bps <= 0.0:
                            table[u, c - 1, k, v, :] = np.nan
                            continue
                    else:
                        memory = local_memory(0, hbm_bw, hbm_e, 0.0, 0.0, max((v - n_stacks) * T.ddr_bw, 1.0), ddr_e,
                                              0.0)
                        f = 1.0
                    cc = copy_roofline(u, k, c, T.unit_w_ratio[u, c], b, f, 0.0, memory,
                                       kind_terms(T.kind_mem_eff, T.kind_overhead, T.kind_dispatch, k, alone),
                                       T.op_ptr, T.op_time, T.op_w, T.op_o, T.op_prob, T.op_inv,
                                       power_terms(T.kind_limit, T.kind_floor, T.kind_static_w, T.kind_active_w, k),
                                       T.op_e)
                    table[u, c - 1, k, v, 0] = cc.time_s
                    table[u, c - 1, k, v, 1] = cc.ddr_bytes
                    table[u, c - 1, k, v, 2] = cc.dram_j
                    table[u, c - 1, k, v, 3] = cc.clock_j


@nb.njit(cache=True, inline="always", error_model="numpy")
def table_entry(table, n_stacks, c, k, stacks_i, hbm_bw, sram_bw_k, ddr, f):
    """The `copy_tables` entry v of a copy (one of c, on kind k, a chiplet of ``stacks_i`` stacks, ``ddr``
    channels, DDR fraction f), or -1 where it must be costed: f strictly between 0 and 1 or a count
    outside the table. The local tier's bandwidth as dse.model.copy_cost.local_memory reads it.

    Both entries (from DDR, from the local tier) are worked out and one is selected, with ``&`` / ``|`` rather
    than ``and`` / ``or``, so the choice compiles to selects, not branches: which one a copy takes follows its
    chiplet's stack count and DDR fraction, at random over a population's copies (issue 7's benchmark: 37 % of
    its chiplets have no stack), where a branch is mispredicted often (issue 52, eleventh round: the intact
    pass about 2.5 us a design faster there; the same entry for every input, tests/test_table_entry_select.py)."""
    if table.shape[nowrap(0)] == 0 or c > table.shape[nowrap(1)] or stacks_i < 0 or ddr < 0:
        return -1
    local = stacks_i * hbm_bw if stacks_i > 0 else sram_bw_k
    from_ddr = n_stacks + ddr if ddr < table.shape[nowrap(3)] - n_stacks else -1
    from_local = stacks_i if (f == 0.0) & (stacks_i < n_stacks) else -1
    return from_ddr if (local <= 0.0) | (f == 1.0) else from_local
