"""Tiers below the package: what HBM and DDR cannot hold lives in host DRAM or on SSD, fetched on a miss.

Placement (`place_below`): dse.model.hbm_placement fills each chiplet's HBM densest first; what spills
from every chiplet then competes for the package's DDR, host DRAM and SSD in that order, again densest
first (bytes read per step per byte stored: the fractional-knapsack optimum for the bytes read from the
slower tiers, memory.placement), so the hottest of the cold experts stay closest (the hot/cold tiering by
expert popularity: a routed expert's read rate is the chance one of the step's tokens selects it,
dse.model.kernel_tables.weight_per_copy). What no tier holds is the capacity shortfall, read as DDR-resident,
as before. Without host or SSD tiers none of this runs: the design is evaluated exactly as before.

Step (`fetch_stage`): a copy's host and SSD bytes that a step reads are fetched into HBM before its stage
computes (on a miss, no prefetch: MoE-Infinity, Xue et al. 2024, and Mixtral-offloading, Eliseev & Mazur
2023, fetch a missing expert on demand), so the stage takes its compute and DDR time plus
memory.offload.fetch_time_s of its fetched bytes (the host link, and the drives' read rate); the kernels
then read those bytes from HBM. Energy: each fetched byte is read from its tier (host DRAM at the DDR5
preset's energy per byte; the drives' active power over their read rate) and written into HBM (as an
HBM read; the link's own energy is left out).
"""
from __future__ import annotations

import numba as nb

from memory.offload import fetch_time_s
from memory.placement import spill_first_n

from .copy_cost import copy_bytes
from .hbm_placement import item_size

nowrap = nb.uintp      # see dse.model.perf_model


@nb.njit(cache=True, inline="always", error_model="numpy")
def scale_rest(m, buf_y, item_u, item_r, buf_size, buf_read, buf_spill, rest, into, keep_rest):
    """After one tier took its share: ``into[u, r]`` += the copy's part the tier holds (its remaining
    fraction ``rest`` x (1 - spill)); ``rest`` becomes the part left over; the buffers the bytes left."""
    for x in range(m):
        y = buf_y[nowrap(x)]
        u, r = item_u[nowrap(y)], item_r[nowrap(y)]
        s = buf_spill[nowrap(x)]
        left = rest[nowrap(u), nowrap(r)]
        into[nowrap(u), nowrap(r)] += left * (1.0 - s)
        if keep_rest:
            rest[nowrap(u), nowrap(r)] = left * s
        buf_size[nowrap(x)] *= s
        buf_read[nowrap(x)] *= s


@nb.njit(cache=True, inline="always", error_model="numpy")
def place_below(n, kind, chip_ptr, item_u, item_r, ncopy, split, unit_capacity, unit_kv, w_copy, other_dram,
                read_scale, ddr_cap, host_cap, ssd_cap, f, f_host, f_ssd, buf_size, buf_read, buf_density, buf_order,
                buf_spill, buf_y):
    """Every copy's spilled part (``f[u, r]``, from dse.model.hbm_placement) into DDR, host DRAM and SSD,
    densest first (module docstring): ``f`` keeps the DDR part (and what no tier holds), ``f_host`` and
    ``f_ssd`` get the rest. Returns the bytes no tier holds."""
    m = 0
    for i in range(n):
        for y in range(chip_ptr[nowrap(i)], chip_ptr[nowrap(i + 1)]):
            u, r = item_u[nowrap(y)], item_r[nowrap(y)]
            f_host[nowrap(u), nowrap(r)] = 0.0
            f_ssd[nowrap(u), nowrap(r)] = 0.0
            x = f[nowrap(u), nowrap(r)]
            if x > 0.0:
                c = ncopy[nowrap(u)]
                buf_size[nowrap(m)] = item_size(unit_capacity[nowrap(u)], unit_kv[nowrap(u)], c, split) * x
                buf_read[nowrap(m)] = copy_bytes(w_copy, other_dram, u, c, kind[nowrap(i)]) * read_scale[nowrap(u)] * x
                buf_y[nowrap(m)] = y
                m += 1
    # DDR: f keeps its part; the rest waits in f_ssd (scratch) for the host tier
    for x in range(m):
        y = buf_y[nowrap(x)]
        f_ssd[nowrap(item_u[nowrap(y)]), nowrap(item_r[nowrap(y)])] = f[nowrap(item_u[nowrap(y)]),
                                                                        nowrap(item_r[nowrap(y)])]
        f[nowrap(item_u[nowrap(y)]), nowrap(item_r[nowrap(y)])] = 0.0
    spill_first_n(m, buf_size, buf_read, ddr_cap, buf_density, buf_order, buf_spill)
    scale_rest(m, buf_y, item_u, item_r, buf_size, buf_read, buf_spill, f_ssd, f, True)
    spill_first_n(m, buf_size, buf_read, host_cap, buf_density, buf_order, buf_spill)
    scale_rest(m, buf_y, item_u, item_r, buf_size, buf_read, buf_spill, f_ssd, f_host, True)
    spill_first_n(m, buf_size, buf_read, ssd_cap, buf_density, buf_order, buf_spill)
    unplaced = 0.0
    for x in range(m):
        y = buf_y[nowrap(x)]
        u, r = item_u[nowrap(y)], item_r[nowrap(y)]
        s = buf_spill[nowrap(x)]
        left = f_ssd[nowrap(u), nowrap(r)]
        f[nowrap(u), nowrap(r)] += left * s             # no tier holds it: counted DDR-resident, as before
        f_ssd[nowrap(u), nowrap(r)] = left * (1.0 - s)
        unplaced += buf_size[nowrap(x)] * s
    return unplaced


@nb.njit(cache=True, error_model="numpy")
def stage_fetch(u0, u1, kind, slots, ncopy, w_copy, other_dram, f_host, f_ssd, T, hbm_e):
    """`fetch_stage` of the copies of units ``u0`` to ``u1 - 1`` (one stage): the bytes each reads a step
    (dse.model.copy_cost.copy_bytes) times its host and SSD fractions, summed in unit and copy order.
    A loop of its own, run only with tiers: the stage's copy loop carries nothing for them."""
    host_bytes = ssd_bytes = 0.0
    for u in range(u0, u1):
        c = ncopy[nowrap(u)]
        for r in range(c):
            b = copy_bytes(w_copy, other_dram, u, c, kind[nowrap(slots[nowrap(u), nowrap(r)])])
            host_bytes += b * f_host[nowrap(u), nowrap(r)]
            ssd_bytes += b * f_ssd[nowrap(u), nowrap(r)]
    return fetch_stage(host_bytes, ssd_bytes, T.link_bps, T.ssd_bps, T.host_e, T.ssd_e, hbm_e)


@nb.njit(cache=True, inline="always", error_model="numpy")
def fetch_stage(host_bytes, ssd_bytes, link_bps, ssd_bps, host_e, ssd_e, hbm_e):
    """(seconds, joules) of fetching a stage's host and SSD bytes into HBM (module docstring)."""
    t = fetch_time_s(host_bytes, ssd_bytes, link_bps, ssd_bps)
    return t, host_bytes * (host_e + hbm_e) + ssd_bytes * (ssd_e + hbm_e)
