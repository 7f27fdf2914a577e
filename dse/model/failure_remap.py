"""A design after chiplet failures: the re-mapping, and the chiplets' HBM placement after it.

Re-mapping (`remap`): surviving copies of a replicated unit take over its tokens; a unit (or shard) left
without a chiplet moves to the survivor with the most free HBM (lowest index on ties), unit by unit in
order. A failed chiplet's compute and memory are lost. The chiplets whose contents change (the failed ones
and every holder of a moved unit, before or after) are placed in HBM/DDR again (dse.model.failures) unless
their placement cannot have changed (`placement_unchanged`); `gather_chiplet` lists a chiplet's copies after
the failure.
Used by the failure deltas (dse.model.failures) and by the failures evaluated in full (dse.model.failure_routes).

`remap` and `restore` are called, not inlined (unlike this package's other kernel helpers): inlined into the
failure pass, the arrays they take (13 and 6) were each given a reference (`NRT_incref`) at the call and had it
taken back (`NRT_decref`) after it, once per failure, atomic operations that Numba's reference-count pruning left
in place; called, they take their arguments as they are. Issue 52, fourteenth round: about 1.4 % of an exact
design at issue 7's scale, the same bits (docs/performance.md).
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .hbm_placement import item_size, local_capacity

nowrap = nb.uintp      # see dse.model.perf_model: an unsigned index skips the negative-index wrap-around


@nb.njit(cache=True, error_model="numpy")
def remap(unit_capacity, unit_kv, hbm_cap, sram_cap, kind, n, dead, n_dead, is_dead, slots, ncopy, split, stacks, chip_ptr, item_u,
          stored, slots2, count2, stored2, moved, moved_list, free):
    """Re-map the units of the failed chiplets ``dead[:n_dead]`` (flagged in ``is_dead``): their rows of
    ``slots2`` / ``count2`` and the whole of ``stored2`` become the mapping after the failure.

    ``slots2`` / ``count2`` must equal ``slots`` / ``ncopy`` on entry; only the rows of moved units change
    (`restore`). Needs the intact design's ``stored`` and item index. Marks ``moved`` and lists the units
    that had a copy on a failed chiplet in ``moved_list`` (ascending). Returns (their count, whether
    every unit found a chiplet: False when none survives).

    ``free`` (scratch, a chiplet each): from the first unit that needs a new chiplet on, each chiplet's
    free capacity (local capacity - ``stored2``, -inf when failed), updated where ``stored2`` changes, so the
    search for the emptiest survivor is one pass over an array (the same figures, bit for bit).
    """
    for i in range(n):
        stored2[nowrap(i)] = stored[nowrap(i)]
    n_moved = 0
    for x in range(n_dead):
        d = dead[nowrap(x)]
        stored2[nowrap(d)] = 0.0
        for y in range(chip_ptr[nowrap(d)], chip_ptr[nowrap(d + 1)]):
            u = item_u[nowrap(y)]
            if not moved[nowrap(u)]:
                moved[nowrap(u)] = True
                moved_list[nowrap(n_moved)] = u
                n_moved += 1
    if n_dead > 1:              # one chiplet's copies come in unit order already
        for x in range(1, n_moved):
            u = moved_list[nowrap(x)]
            k = x
            while k > 0 and moved_list[nowrap(k - 1)] > u:
                moved_list[nowrap(k)] = moved_list[nowrap(k - 1)]
                k -= 1
            moved_list[nowrap(k)] = u
    ready = False
    for x in range(n_moved):
        u = moved_list[nowrap(x)]
        c = ncopy[nowrap(u)]
        kept = 0
        for r in range(c):
            i = slots[nowrap(u), nowrap(r)]
            if not is_dead[nowrap(i)]:
                slots2[nowrap(u), nowrap(kept)] = i
                kept += 1
        for r in range(kept, c):
            slots2[nowrap(u), nowrap(r)] = -1
        if not split:               # survivors share the lost copy's tokens and KV cache
            for r in range(kept):
                i = slots2[nowrap(u), nowrap(r)]
                stored2[nowrap(i)] += unit_kv[nowrap(u)] / kept - unit_kv[nowrap(u)] / c
                if ready:
                    free[nowrap(i)] = local_capacity(stacks[nowrap(i)], hbm_cap, sram_cap[nowrap(kind[nowrap(i)])]) \
                        - stored2[nowrap(i)]
        need = c - kept if split else (1 if kept == 0 else 0)
        size = item_size(unit_capacity[nowrap(u)], unit_kv[nowrap(u)], c if split else 1, split)
        if need > 0 and not ready:
            ready = True
            for i in range(n):
                free[nowrap(i)] = -np.inf if is_dead[nowrap(i)] else \
                    local_capacity(stacks[nowrap(i)], hbm_cap, sram_cap[nowrap(kind[nowrap(i)])]) - stored2[nowrap(i)]
        for _ in range(need):
            best = -1
            best_free = -np.inf
            for i in range(n):
                if free[nowrap(i)] > best_free:
                    best, best_free = i, free[nowrap(i)]
            if best < 0:
                return n_moved, False
            slots2[nowrap(u), nowrap(kept)] = best
            stored2[nowrap(best)] += size
            free[nowrap(best)] = local_capacity(stacks[nowrap(best)], hbm_cap, sram_cap[nowrap(kind[nowrap(best)])]) \
                - stored2[nowrap(best)]
            kept += 1
        count2[nowrap(u)] = kept
    return n_moved, True


@nb.njit(cache=True, error_model="numpy")
def restore(n_moved, moved_list, moved, slots, ncopy, slots2, count2):
    """Undo `remap`: the moved units' rows of ``slots2`` / ``count2`` equal the intact mapping again."""
    for x in range(n_moved):
        u = moved_list[nowrap(x)]
        for r in range(ncopy[nowrap(u)]):
            slots2[nowrap(u), nowrap(r)] = slots[nowrap(u), nowrap(r)]
        count2[nowrap(u)] = ncopy[nowrap(u)]
        moved[nowrap(u)] = False


@nb.njit(cache=True, inline="always", error_model="numpy")
def placement_unchanged(capacity, stored_before, stored_after):
    """A chiplet without HBM keeps everything in DDR; one whose copies fit in HBM before and after keeps
    everything in HBM: then no copy's DDR share changes and no placement needs computing."""
    return capacity <= 0.0 or (stored_before <= capacity and stored_after <= capacity)


@nb.njit(cache=True, inline="always", error_model="numpy")
def gather_chiplet(i, n_moved, moved, moved_list, chip_ptr, item_u, item_r, slots2, count2, buf_u, buf_r, buf_pos):
    """Chiplet i's copies after re-mapping, in (u, r) order (the order `base_pass` would list them in):
    its intact copies of unmoved units plus the moved units' new copies on it. Returns their count.
    ``buf_pos[y - chip_ptr[i]]``: the position in that list of intact copy y of an unmoved unit."""
    n_items = 0
    y = chip_ptr[nowrap(i)]
    end = chip_ptr[nowrap(i + 1)]
    for x in range(n_moved + 1):
        bound = moved_list[nowrap(x)] if x < n_moved else 1 << 62
        while y < end and item_u[nowrap(y)] < bound:
            if not moved[nowrap(item_u[nowrap(y)])]:
                buf_pos[nowrap(y - chip_ptr[nowrap(i)])] = n_items
                buf_u[nowrap(n_items)] = item_u[nowrap(y)]
                buf_r[nowrap(n_items)] = item_r[nowrap(y)]
                n_items += 1
            y += 1
        if x < n_moved:
            for r in range(count2[nowrap(bound)]):
                if slots2[nowrap(bound), nowrap(r)] == i:
                    buf_u[nowrap(n_items)] = bound
                    buf_r[nowrap(n_items)] = r
                    n_items += 1
    return n_items

