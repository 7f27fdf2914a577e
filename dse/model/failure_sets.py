"""A design's failure sets, in the order the failure kernels take them (dse.model.failures.failure_pass):
every single chiplet failure (with its router where the routes have a table for it, dse.model.routes), each
physical link's, then the Monte Carlo sets of several failed chiplets of its package size
(`monte_carlo_sets`); each with the route table it runs on (-1: the design's own, by deltas)."""
from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, inline="always")
def single_sets(n, node_alt, link_alt, links, sets, size, routes):
    """The single failures of an n-chiplet design into ``sets`` / ``size`` / ``routes``: each chiplet (with
    its router when ``node_alt`` >= 0, dse.model.routes), then each of its ``links`` physical links. Returns
    (chiplet failures, link failures)."""
    chips = n if n > 1 else 0
    for i in range(chips):
        sets[i, 0] = i
        size[i] = 1
        routes[i] = node_alt + i if node_alt >= 0 else -1
    for j in range(links):
        size[chips + j] = 0
        routes[chips + j] = link_alt + j
    return chips, links


@nb.njit(cache=True, inline="always")
def in_full(offload, routes, n_sets, sh):
    """With host or SSD tiers (dse.model.offload), an SRAM-resident kind's SRAM in front of HBM (three tiers,
    dse.model.hbm_placement) or weight streaming (its fill and buffers), every failure is evaluated in full on the design's own routes
    (dse.model.failure_routes), not by deltas: the deltas re-place only the touched chiplets' HBM."""
    if offload:
        for k in range(n_sets):
            if routes[k] < 0:
                routes[k] = sh


@nb.njit(cache=True, inline="always")
def failure_sets(sh, n, node_alt, link_alt, n_phys, mc_alt, mc_sets, full, sets, size, routes):
    """A design's failure sets into ``sets`` / ``size`` / ``routes``: every single chiplet (and link), then
    the Monte Carlo sets of its package size; every one on the design's own routes (``sh``) where ``full``
    (`in_full`). Returns (single failures, Monte Carlo sets)."""
    chips, links = single_sets(n, node_alt[sh], link_alt[sh], n_phys[sh], sets, size, routes)
    singles = chips + links
    samples = mc_sets.shape[1]
    k_max = mc_sets.shape[2]
    for m in range(samples):
        size[singles + m] = min(k_max, n)
        routes[singles + m] = mc_alt[sh] + m if mc_alt[sh] >= 0 else -1
        for x in range(size[singles + m]):
            sets[singles + m, x] = mc_sets[n, m, x]
    in_full(full, routes, singles + samples, sh)
    return singles, samples


def monte_carlo_sets(max_chips: int, samples: int, failures: int, seed: int) -> np.ndarray:
    """Failure sets ``[n, sample, k]`` of distinct chiplets for every package size n (common random numbers)."""
    sets = np.zeros((max_chips + 1, samples, failures), np.int64)
    rng = np.random.default_rng(seed)
    for n in range(1, max_chips + 1):
        k = min(failures, n)
        for m in range(samples):
            chosen = rng.choice(n, size=k, replace=False)
            sets[n, m, :] = np.resize(chosen, failures)   # k < failures only when n is tiny: repeats are harmless
    return sets
