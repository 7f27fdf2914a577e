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
import numpy as np

from memory.placement import MERGE_MIN, fill_by_order, merge_runs, spill_first_n

from .copy_cost import copy_bytes

nowrap = nb.uintp      # see dse.model.perf_model: an unsigned index skips the negative-index wrap-around


@nb.njit(cache=True, inline="always", error_model="numpy")
def local_capacity(stacks_i, hbm_cap, sram_cap_k):
    """Bytes a chiplet holds its copies in before they spill to DDR: its HBM stacks' (plus, for an SRAM-resident
    kind, its SRAM in front of them: `sram_tier`), or, with none attached, an SRAM-resident kind's SRAM
    (``sram_cap_k``; 0 for other kinds: all their bytes in DDR)."""
    return stacks_i * hbm_cap + sram_cap_k if stacks_i > 0 else sram_cap_k


@nb.njit(cache=True, inline="always", error_model="numpy")
def streams(stream_buf, stacks_i, hbm_cap, sram_cap_k):
    """Whether a chiplet streams its DDR bytes into its local tier (weight streaming, ``stream_buf`` > 0: the
    two buffers' bytes, dse.model.tables.stream_buffer_bytes): only where that tier holds both buffers."""
    return stream_buf > 0.0 and local_capacity(stacks_i, hbm_cap, sram_cap_k) >= stream_buf


@nb.njit(cache=True, inline="always", error_model="numpy")
def stream_bandwidth(stream_buf, stacks_i, hbm_cap, sram_cap_k, ddr_bw):
    """The bandwidth a chiplet streams its DDR bytes into its local tier at: the DDR's (the path weights come
    over), where it `streams`; 0 where it does not (its kernels read the DDR directly)."""
    return ddr_bw if streams(stream_buf, stacks_i, hbm_cap, sram_cap_k) else 0.0


@nb.njit(cache=True, inline="always", error_model="numpy")
def resident_capacity(stream_buf, stacks_i, hbm_cap, sram_cap_k):
    """`local_capacity` less the streaming buffers where the chiplet `streams`: what its copies stay in."""
    cap = local_capacity(stacks_i, hbm_cap, sram_cap_k)
    return cap - stream_buf if streams(stream_buf, stacks_i, hbm_cap, sram_cap_k) else cap


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
def index_sized(n, slots, ncopy, split, unit_capacity, unit_kv, chip_ptr, cursor, item_u, item_r, total):
    """Group the copies by chiplet: CSR ``chip_ptr`` over ``item_u`` / ``item_r``, in (u, r) order; and on
    the counting pass each chiplet's bytes ``total[i]``: its copies' sizes
    (`item_size`, once per unit) summed in (u, r) order, the order of its items, so the same sum as one over
    them (issue 52, ninth round)."""
    for i in range(n + 1):
        chip_ptr[nowrap(i)] = 0
    for i in range(n):
        total[nowrap(i)] = 0.0
    for u in range(slots.shape[nowrap(0)]):
        c = ncopy[nowrap(u)]
        size = item_size(unit_capacity[nowrap(u)], unit_kv[nowrap(u)], c, split)
        for r in range(c):
            i = slots[nowrap(u), nowrap(r)]
            chip_ptr[nowrap(i + 1)] += 1
            total[nowrap(i)] += size
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
def place_design_ordered(n, kind, stacks, slots, ncopy, split, hbm_cap, sram_cap, stream_buf, unit_capacity, unit_kv,
                         w_copy, other_dram, read_scale, chip_ptr, cursor, item_u, item_r, stored, overflow, f, f_sram,
                         buf_size, buf_read, buf_density, buf_order, buf_spill, item_order, chip_sorted):
    """Every chiplet's copies into its local tier (`local_capacity`: ``stacks[i]`` x ``hbm_cap``, or an
    SRAM-resident kind's ``sram_cap`` without HBM, or both; less weight streaming's buffers,
    `resident_capacity`, ``stream_buf`` > 0), densest first: indexes the copies
    by chiplet (`index_sized`), fills ``f`` (and ``f_sram``, the SRAM's share in front of HBM, where it has
    rows), each chiplet's bytes ``stored`` and its ``overflow`` to DDR. Returns the bytes spilled to DDR in all.
    ``chip_sorted[i]``: chiplet i's copies were put in density order (two tiers, more than fit); that order,
    as indices into ``item_u`` / ``item_r``, is ``item_order[chip_ptr[i]:chip_ptr[i + 1]]`` (`place_merged`
    re-places a chiplet after a failure from it).

    The chiplets' bytes are summed while the copies are indexed (`index_sized`, into ``stored``); a chiplet
    whose placement is trivial takes no copy's size unless it has no local tier (a copy's DDR fraction is
    0 where the tier holds all: `trivial_spill`). The same figures, bit for bit, as summing each chiplet's
    items again (issue 52, ninth round)."""
    three = f_sram.shape[nowrap(0)] > 0
    index_sized(n, slots, ncopy, split, unit_capacity, unit_kv, chip_ptr, cursor, item_u, item_r, stored)
    for i in range(n):
        a, b = chip_ptr[nowrap(i)], chip_ptr[nowrap(i + 1)]
        total = stored[nowrap(i)]
        cap = resident_capacity(stream_buf, stacks[nowrap(i)], hbm_cap, sram_cap[nowrap(kind[nowrap(i)])])
        fast = min(sram_tier(stacks[nowrap(i)], sram_cap[nowrap(kind[nowrap(i)])]), cap) if three else 0.0
        chip_sorted[nowrap(i)] = False
        if placement_is_trivial(cap, total) and (fast <= 0.0 or total <= fast):
            for y in range(a, b):
                u = item_u[nowrap(y)]
                f[nowrap(u), nowrap(item_r[nowrap(y)])] = 0.0 if cap > 0.0 else trivial_spill(
                    cap, item_size(unit_capacity[nowrap(u)], unit_kv[nowrap(u)], ncopy[nowrap(u)], split))
                if three:
                    f_sram[nowrap(u), nowrap(item_r[nowrap(y)])] = 1.0 if fast > 0.0 else 0.0
            overflow[nowrap(i)] = total if cap <= 0.0 and total > 0.0 else 0.0
        else:
            stored_i, overflow_i = place_chiplet(cap, fast, kind[nowrap(i)], item_u, item_r, a, b - a, ncopy, split,
                                                 unit_capacity, unit_kv, w_copy, other_dram, read_scale, buf_size,
                                                 buf_read, buf_density, buf_order, buf_spill, f, f_sram)
            stored[nowrap(i)], overflow[nowrap(i)] = stored_i, overflow_i
            if not three:       # not trivial: spill_first_n sorted them (with SRAM the last sort may be skipped)
                for x in range(b - a):
                    item_order[nowrap(a + x)] = a + buf_order[nowrap(x)]
                chip_sorted[nowrap(i)] = True
    spill = 0.0
    for i in range(n):
        spill += overflow[nowrap(i)]
    return spill


@nb.njit(cache=True, inline="always", error_model="numpy")
def place_design(n, kind, stacks, slots, ncopy, split, hbm_cap, sram_cap, stream_buf, unit_capacity, unit_kv, w_copy,
                 other_dram, read_scale, chip_ptr, cursor, item_u, item_r, stored, overflow, f, f_sram, buf_size,
                 buf_read, buf_density, buf_order, buf_spill):
    """`place_design_ordered` without keeping the density orders (for a caller that reads the placement only:
    dse.model.population_kernel.remapped_design)."""
    return place_design_ordered(n, kind, stacks, slots, ncopy, split, hbm_cap, sram_cap, stream_buf, unit_capacity,
                                unit_kv,
                                w_copy, other_dram, read_scale, chip_ptr, cursor, item_u, item_r, stored, overflow, f,
                                f_sram, buf_size, buf_read, buf_density, buf_order, buf_spill,
                                np.empty(item_u.shape[0], np.int64), np.empty(n, np.bool_))


@nb.njit(cache=True, inline="always", error_model="numpy")
def place_merged(capacity, kind_i, a, b, item_u, item_order, moved, buf_pos, buf_u, buf_r, n_items, ncopy, split,
                 unit_capacity, unit_kv, w_copy, other_dram, read_scale, buf_size, buf_read, buf_density, buf_order,
                 buf_spill, buf_in, frac):
    """`place_chiplet` (two tiers) of a chiplet that survived a failure, from its intact density order.

    ``buf_u`` / ``buf_r[:n_items]``: its copies after re-mapping in (u, r) order
    (dse.model.failure_remap.gather_chiplet), ``buf_pos[y - a]`` the position there of its intact copy
    ``y`` of an unmoved unit; ``item_order[a:b]`` its intact copies in density order (`place_design_ordered`,
    ``chip_sorted``). Those of unmoved units keep their sizes and reads, so that order, without the moved
    units, is theirs; only the moved units' copies (their copy count changed) are sorted, and the two lists
    merged (Knuth, *The Art of Computer Programming* vol. 3, 5.2.4). Falling density, equal densities in
    (u, r) order: the one order the stable sort of memory.placement.spill_first_n gives, so the fractions
    ``frac[u, r]`` are the same bits. Where that cannot be assured (a NaN density, the intact order not in
    that order) the copies are sorted in full by spill_first_n. Returns the bytes spilled to DDR."""
    total = 0.0
    for x in range(n_items):
        u = buf_u[nowrap(x)]
        c = ncopy[nowrap(u)]
        buf_size[nowrap(x)] = item_size(unit_capacity[nowrap(u)], unit_kv[nowrap(u)], c, split)
        buf_read[nowrap(x)] = copy_bytes(w_copy, other_dram, u, c, kind_i) * read_scale[nowrap(u)]
        total += buf_size[nowrap(x)]
    merged = total > capacity and capacity > 0.0     # else spill_first_n needs no order
    m = 0
    if merged:
        for x in range(n_items):
            buf_density[nowrap(x)] = (buf_read[nowrap(x)] / buf_size[nowrap(x)] if buf_size[nowrap(x)] > 0.0
                                      else np.inf)
            merged = merged and buf_density[nowrap(x)] == buf_density[nowrap(x)]
            if moved[nowrap(buf_u[nowrap(x)])]:
                buf_in[nowrap(m)] = x
                m += 1
    merged = merged and (b > a or m == n_items)       # no intact order (b = a): all copies moved in, or sort
    if merged:
        if m > MERGE_MIN:
            merge_runs(m, buf_density, buf_in)
        else:
            for j in range(m):
                x = buf_in[nowrap(j)]
                k = j
                while k > 0 and buf_density[nowrap(buf_in[nowrap(k - 1)])] < buf_density[nowrap(x)]:
                    buf_in[nowrap(k)] = buf_in[nowrap(k - 1)]
                    k -= 1
                buf_in[nowrap(k)] = x
        k = 0
        p = 0
        prev = -1
        for q in range(a, b):
            y = item_order[nowrap(q)]
            if moved[nowrap(item_u[nowrap(y)])]:
                continue
            xa = buf_pos[nowrap(y - a)]
            if prev >= 0 and not (buf_density[nowrap(prev)] > buf_density[nowrap(xa)] or
                                  (buf_density[nowrap(prev)] == buf_density[nowrap(xa)] and prev < xa)):
                merged = False
                break
            prev = xa
            while p < m and (buf_density[nowrap(buf_in[nowrap(p)])] > buf_density[nowrap(xa)] or
                             (buf_density[nowrap(buf_in[nowrap(p)])] == buf_density[nowrap(xa)] and
                              buf_in[nowrap(p)] < xa)):
                buf_order[nowrap(k)] = buf_in[nowrap(p)]
                k += 1
                p += 1
            buf_order[nowrap(k)] = xa
            k += 1
        while p < m:
            buf_order[nowrap(k)] = buf_in[nowrap(p)]
            k += 1
            p += 1
        merged = merged and k == n_items
    if merged:      # spill_first_n's fill, on the merged order
        overflow = fill_by_order(n_items, buf_order, buf_size, capacity, buf_spill)
    else:
        overflow = spill_first_n(n_items, buf_size, buf_read, capacity, buf_density, buf_order, buf_spill)
    for x in range(n_items):
        frac[nowrap(buf_u[nowrap(x)]), nowrap(buf_r[nowrap(x)])] = buf_spill[nowrap(x)]
    return overflow
