"""Where a design's unit copies sit: each chiplet's HBM, densest first, the rest spilled to the package's DDR.

An SRAM-resident kind (arch.SystolicChiplet.sram_Bps) with HBM stacks attached has three tiers: its SRAM, then
its HBM, then DDR (SambaNova SN40L). Its local capacity is SRAM + HBM, filled in the same density order; the
SRAM holds the densest bytes of that order, so a copy's SRAM fraction is ``1 -`` its spill beyond the SRAM
alone and its DDR fraction its spill beyond both: two cuts of one order (`place_chiplet`; the identity is
tests/test_memory_placement.py's). ``g[u, r]`` (``W.f_sram``): the SRAM fraction, where such a kind exists.

A chiplet holds its copies' weights (a full copy per replica, 1/c per shard) and KV cache (1/c per copy). They
fill its HBM densest first (bytes read per step per byte stored: the fractional-knapsack optimum for DDR
traffic, memory.placement.spill_first_n), so hot experts sit in HBM and cold ones in DDR; spill beyond the
DDR's capacity is the design's capacity shortfall (dse.model.perf_model). ``f[u, r]``: the DDR fraction of
copy r of unit u.
"""
from __future__ import annotations

import numba as nb

from memory.placement import spill_first_n

from .copy_cost import copy_bytes

nowrap = nb.uintp      # see dse.model.perf_model: an unsigned index skips the negative-index wrap-around


@nb.njit(cache=True, inline="always", error_model="numpy")
def local_capacity(stacks_i, hbm_cap, sram_cap_k):
    """Bytes a chiplet holds its copies in before they spill to DDR: its HBM stacks' (plus, for an SRAM-resident
    kind, its SRAM in front of them: `sram_tier`), or, with none attached, an SRAM-resident kind's SRAM
    (``sram_cap_k``; 0 for other kinds: all their bytes in DDR)."""
    return stacks_i * hbm_cap + sram_cap_k if stacks_i > 0 else sram_cap_k


@nb.njit(cache=True, inline="always", error_model="numpy")
def sram_tier(stacks_i, sram_cap_k):
    """Bytes of an SRAM-resident kind's SRAM that sit in front of its HBM (the first of three tiers): all of it
    when HBM stacks are attached, else 0 (without HBM the SRAM is the local tier itself)."""
    return sram_cap_k if stacks_i > 0 else 0.0


@nb.njit(cache=True, inline="always", error_model="numpy")
def item_size(capacity_u, kv_u, c, split):
    """Bytes one of c copies (or shards) of a unit stores: weights and its share of the KV cache."""
    return (capacity_u / c if split else capacity_u) + kv_u / c


@nb.njit(cache=True, inline="always", error_model="numpy")
def placement_is_trivial(capacity, stored):
    """A chiplet without HBM keeps everything in DDR, one whose copies fit keeps everything in HBM:
    no density order is needed (memory.placement.spill_first_n)."""
    return capacity <= 0.0 or stored <= capacity


@nb.njit(cache=True, inline="always", error_model="numpy")
def trivial_spill(capacity, size):
    """DDR fraction of a copy of ``size`` bytes on a chiplet whose placement is trivial."""
    return 1.0 if capacity <= 0.0 and size > 0.0 else 0.0


@nb.njit(cache=True, inline="always", error_model="numpy")
def place_chiplet(hbm_capacity, sram_capacity, kind_i, item_u, item_r, start, n_items, ncopy, split, unit_capacity,
                  unit_kv, w_copy, other_dram, read_scale, buf_size, buf_read, buf_density, buf_order, buf_spill, frac,
                  frac_sram):
    """Put a chiplet's copies (units ``item_u``, copy indices ``item_r``, from ``start``) into its local tier of
    ``hbm_capacity`` bytes densest first (memory.placement); ``frac[u, r]`` gets each copy's DDR fraction.
    ``frac_sram[u, r]`` (where it has rows) gets each copy's fraction in the first ``sram_capacity`` bytes of
    that tier (an SRAM-resident kind's SRAM in front of its HBM; 0 for none): the same order cut there.
    Returns (bytes stored, bytes spilled to DDR)."""
    stored = 0.0
    for x in range(n_items):
        u = item_u[nowrap(start + x)]
        c = ncopy[nowrap(u)]
        buf_size[nowrap(x)] = item_size(unit_capacity[nowrap(u)], unit_kv[nowrap(u)], c, split)
        buf_read[nowrap(x)] = copy_bytes(w_copy, other_dram, u, c, kind_i) * read_scale[nowrap(u)]
        stored += buf_size[nowrap(x)]
    spilled = spill_first_n(n_items, buf_size, buf_read, hbm_capacity, buf_density, buf_order, buf_spill)
    for x in range(n_items):
        frac[nowrap(item_u[nowrap(start + x)]), nowrap(item_r[nowrap(start + x)])] = buf_spill[nowrap(x)]
    if frac_sram.shape[nowrap(0)] > 0:
        if sram_capacity > 0.0:
            spill_first_n(n_items, buf_size, buf_read, sram_capacity, buf_density, buf_order, buf_spill)
        for x in range(n_items):
            frac_sram[nowrap(item_u[nowrap(start + x)]), nowrap(item_r[nowrap(start + x)])] = \
                1.0 - buf_spill[nowrap(x)] if sram_capacity > 0.0 else 0.0
    return stored, spilled


@nb.njit(cache=True, inline="always", error_model="numpy")
def index_items(n, slots, ncopy, chip_ptr, cursor, item_u, item_r):
    """Group the copies by chiplet: CSR ``chip_ptr`` over ``item_u`` / ``item_r``, in (u, r) order."""
    for i in range(n + 1):
        chip_ptr[nowrap(i)] = 0
    for u in range(slots.shape[nowrap(0)]):
        for r in range(ncopy[nowrap(u)]):
            chip_ptr[nowrap(slots[nowrap(u), nowrap(r)] + 1)] += 1
    for i in range(n):
        chip_ptr[nowrap(i + 1)] += chip_ptr[nowrap(i)]
        cursor[nowrap(i)] = chip_ptr[nowrap(i)]
    for u in range(slots.shape[nowrap(0)]):
        for r in range(ncopy[nowrap(u)]):
            i = slots[nowrap(u), nowrap(r)]
            item_u[nowrap(cursor[nowrap(i)])] = u
            item_r[nowrap(cursor[nowrap(i)])] = r
            cursor[nowrap(i)] += 1


@nb.njit(cache=True, inline="always", error_model="numpy")
def place_design(n, kind, stacks, slots, ncopy, split, hbm_cap, sram_cap, unit_capacity, unit_kv, w_copy, other_dram,
                 read_scale, chip_ptr, cursor, item_u, item_r, stored, overflow, f, f_sram, buf_size, buf_read,
                 buf_density, buf_order, buf_spill):
    """Every chiplet's copies into its local tier (`local_capacity`: ``stacks[i]`` x ``hbm_cap``, or an
    SRAM-resident kind's ``sram_cap`` without HBM, or both), densest first: indexes the copies
    by chiplet (`index_items`), fills ``f`` (and ``f_sram``, the SRAM's share in front of HBM, where it has
    rows), each chiplet's bytes ``stored`` and its ``overflow`` to DDR. Returns the bytes spilled to DDR in all."""
    three = f_sram.shape[nowrap(0)] > 0
    index_items(n, slots, ncopy, chip_ptr, cursor, item_u, item_r)
    spill = 0.0
    for i in range(n):
        a, b = chip_ptr[nowrap(i)], chip_ptr[nowrap(i + 1)]
        total = 0.0
        for y in range(a, b):
            u = item_u[nowrap(y)]
            total += item_size(unit_capacity[nowrap(u)], unit_kv[nowrap(u)], ncopy[nowrap(u)], split)
        cap = local_capacity(stacks[nowrap(i)], hbm_cap, sram_cap[nowrap(kind[nowrap(i)])])
        fast = sram_tier(stacks[nowrap(i)], sram_cap[nowrap(kind[nowrap(i)])]) if three else 0.0
        if placement_is_trivial(cap, total) and (fast <= 0.0 or total <= fast):
            for y in range(a, b):
                u = item_u[nowrap(y)]
                size = item_size(unit_capacity[nowrap(u)], unit_kv[nowrap(u)], ncopy[nowrap(u)], split)
                f[nowrap(u), nowrap(item_r[nowrap(y)])] = trivial_spill(cap, size)
                if three:
                    f_sram[nowrap(u), nowrap(item_r[nowrap(y)])] = 1.0 if fast > 0.0 else 0.0
            stored[nowrap(i)] = total
            overflow[nowrap(i)] = total if cap <= 0.0 and total > 0.0 else 0.0
        else:
            stored_i, overflow_i = place_chiplet(cap, fast, kind[nowrap(i)], item_u, item_r, a, b - a, ncopy, split,
                                                 unit_capacity, unit_kv, w_copy, other_dram, read_scale, buf_size,
                                                 buf_read, buf_density, buf_order, buf_spill, f, f_sram)
            stored[nowrap(i)], overflow[nowrap(i)] = stored_i, overflow_i
        spill += overflow[nowrap(i)]
    return spill
