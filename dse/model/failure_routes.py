"""Failures that change the package's routes, evaluated in full on the route table after them.

A failed router (study ``faults.failed_router: fails``) or link changes routes (dse.model.routes builds the
table after each failure: intact routes kept, broken ones detour), so the failure is not a delta on the intact
design (dse.model.failures): the re-mapped design's intact pass runs again on that table, in a second
workspace. Survivors that can no longer reach each other make the failure count as lost.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .failure_remap import remap, restore
from .perf_model import LATENCY, P99, SHORT, base_pass



@nb.njit(cache=True, error_model="numpy")
def rerouted_failures(T, R, n, kind, stacks, ddr, slots, ncopy, split, sets, set_size, set_routes, n_sets, W, W2,
                      out, short_limit):
    """dse.model.failures.failure_pass for the failure sets that change routes (``set_routes[k]`` >= 0: the
    route table after the failure, dse.model.routes): the re-mapped design is evaluated in full on that table,
    in ``W2``.
    Needs `base_pass` of the intact design in ``W`` (for `remap`) and leaves it there."""
    todo = False
    for k_set in range(n_sets):
        todo = todo or set_routes[k_set] >= 0
    if not todo:
        return
    slots2, count2, moved, moved_list, dead, is_dead = W.slots2, W.count2, W.moved, W.moved_list, W.dead, W.is_dead
    slots2[:, :] = slots
    count2[:] = ncopy
    for k_set in range(n_sets):
        if set_routes[k_set] < 0:
            continue
        n_dead = set_size[k_set]
        for x in range(n_dead):
            dead[x] = sets[k_set, x]
            is_dead[dead[x]] = True
        n_moved, ok = remap(T.unit_capacity, T.unit_kv, T.hbm_cap, T.kind_sram_cap, kind, n, dead, n_dead, is_dead, slots, ncopy, split,
                            stacks, W.chip_ptr, W.item_u, W.stored, slots2, count2, W.stored2, moved, moved_list,
                            W.free)
        expected = p99 = short = np.inf
        if ok:
            base = base_pass(T, R, set_routes[k_set], n, kind, stacks, ddr, slots2, count2, split, W2)
            short = base[SHORT]
            expected = p99 = np.nan
            if short <= short_limit:
                expected, p99 = base[LATENCY], base[P99]
        restore(n_moved, moved_list, moved, slots, ncopy, slots2, count2)
        for x in range(n_dead):
            is_dead[dead[x]] = False
        out[k_set, 0] = expected
        out[k_set, 1] = p99
        out[k_set, 2] = short
