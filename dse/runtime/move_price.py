"""A policy's moves priced in one compiled pass (the model of dse.runtime.migration, docs/runtime.md).

The copies a new mapping places where the old one had none (unit by unit, copy by copy; then, for each
revived slot in ascending order, every copy on it: a spare is reloaded), each one's source (its nearest
live copy on the package network, ``S`` when it has none: reloaded from the DDR or the host), and the
sums the time bound takes: per destination its copies' seconds one after the other, per directed link
the bytes of the copies whose route crosses it, per memory resource the reads at the sources and then
the writes at the destinations; the moves take the larger of the longest destination's serial time and
every link's and memory's bytes over its bandwidth.

Each sum adds the same terms in the same order as the NumPy form it replaced (``np.bincount`` adds in
input order, a maximum is order-free), so every figure is bit-identical to it."""
from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

FAR = np.iinfo(np.int64).max


class MoveCost(NamedTuple):
    """What moves cost: bytes moved, time (s), energy (J), copies, and serving's throughput share while
    they run (1: a stall's figure; dse.runtime.contention: a background move's)."""

    bytes: float
    time_s: float
    energy_j: float
    moves: int
    throughput: float = 1.0


@nb.njit(cache=True)
def moves_between(old_slots, old_ncopy, new_slots, new_ncopy, revive):
    """(unit ``[M]``, destination slot ``[M]``, slots it can be copied from ``[M, C]``, -1 padded) of the
    copies ``new`` places where ``old`` had none (sources: the unit's copies in ``old``), then for each
    slot of ``revive`` (ascending) every unit with a copy there (sources: its other copies in ``new``)."""
    n_units, c_new = new_slots.shape
    c_old = old_slots.shape[1]
    width = max(c_old, c_new)
    cap = n_units * c_new + len(revive) * n_units
    unit = np.empty(cap, np.int64)
    dest = np.empty(cap, np.int64)
    sources = np.full((cap, width), -1, np.int64)
    m = 0
    for u in range(n_units):
        n_old = min(old_ncopy[u], c_old)
        for k in range(min(new_ncopy[u], c_new)):
            slot = new_slots[u, k]
            had = False
            for j in range(n_old):
                if old_slots[u, j] == slot:
                    had = True
                    break
            if not had:
                unit[m], dest[m] = u, slot
                for j in range(n_old):
                    sources[m, j] = old_slots[u, j]
                m += 1
    for r in revive:
        for u in range(n_units):
            n_new = min(new_ncopy[u], c_new)
            there = False
            for k in range(n_new):
                if new_slots[u, k] == r:
                    there = True
                    break
            if there:
                unit[m], dest[m] = u, r
                for k in range(n_new):
                    if new_slots[u, k] != r:
                        sources[m, k] = new_slots[u, k]
                m += 1
    return unit[:m], dest[:m], sources[:m]


@nb.njit(cache=True)
def nearest_sources(dest, sources, failed, hops):
    """Each move's source: the first of its live copies (not failed, not its destination) with the
    fewest hops to the destination; ``S`` (the chiplet count) where it has none."""
    n = hops.shape[0]
    out = np.empty(len(dest), np.int64)
    for i in range(len(dest)):
        best, best_d = n, FAR
        for j in range(sources.shape[1]):
            s = sources[i, j]
            if s >= 0 and s != dest[i] and not failed[s]:
                h = hops[s, dest[i]]
                if h < best_d:
                    best, best_d = s, h
        out[i] = best
    return out


@nb.njit(cache=True)
def _max(a, b):
    """Python's ``max(a, b)``: ``a`` unless ``b`` is larger (a NaN first stays)."""
    return b if b > a else a


@nb.njit(cache=True)
def _array_max(x, y, initial):
    """``np.max(x / y, initial=initial)`` (a NaN propagates)."""
    out = initial
    for i in range(len(x)):
        v = x[i] / y[i]
        if v > out or v != v:
            out = v
        if out != out:
            break
    return out


class Moved(NamedTuple):
    """Moves priced: each one's unit, destination and source (``S``: reloaded), their bytes, time (s) and
    energy (J), and the bytes summed per directed link and per memory resource."""

    unit: np.ndarray
    dest: np.ndarray
    source: np.ndarray
    bytes: float
    time_s: float
    energy_j: float
    links: np.ndarray
    mem: np.ndarray


@nb.njit(cache=True)
def price(unit, dest, source, unit_bytes, t, e, which, mem_bw, route_ptr, route_links, n_routes, link_bw,
          scale):
    """`Moved`: moves with their sources priced (module docstring). ``t``/``e``: seconds/joules per byte
    into d from s ``[S, S + 1]`` (last column: reloaded); ``which``: each chiplet's memory resource
    ``[S]`` (``S``: the DDR); ``mem_bw`` ``[S + 1]`` and ``link_bw`` unscaled, ``scale`` scales them."""
    n = len(which)
    per_dest = np.zeros(n)
    links = np.zeros(len(link_bw))
    mem = np.zeros(n + 1)
    total_b, total_e = 0.0, 0.0
    for i in range(len(unit)):
        b, d, s = unit_bytes[unit[i]], dest[i], source[i]
        per_dest[d] += t[d, s] * b
        total_b += b
        total_e += e[d, s] * b
        if s < n:
            p = s * n_routes + d
            for q in range(route_ptr[p], route_ptr[p + 1]):
                links[route_links[q]] += b
    for i in range(len(unit)):              # reads at the sources, then writes at the destinations
        mem[which[source[i]] if source[i] < n else n] += unit_bytes[unit[i]]
    for i in range(len(unit)):
        mem[which[dest[i]]] += unit_bytes[unit[i]]
    serial = per_dest[0]
    for d in range(1, n):
        if per_dest[d] > serial or per_dest[d] != per_dest[d]:
            serial = per_dest[d]
        if serial != serial:
            break
    shared = _max(_array_max(links, link_bw, 0.0), _array_max(mem, mem_bw, -np.inf)) / scale
    return Moved(unit, dest, source, total_b, _max(serial, shared), total_e, links, mem)


@nb.njit(cache=True)
def price_moves(unit, dest, sources, failed, unit_bytes, t, e, hops, which, mem_bw, route_ptr, route_links,
                n_routes, link_bw, scale):
    """`price` of moves given with their candidate sources (`nearest_sources` picks each one's)."""
    return price(unit, dest, nearest_sources(dest, sources, failed, hops), unit_bytes, t, e, which, mem_bw,
                 route_ptr, route_links, n_routes, link_bw, scale)


@nb.njit(cache=True)
def price_change(old_slots, old_ncopy, new_slots, new_ncopy, revive, failed, unit_bytes, t, e, hops, which,
                 mem_bw, route_ptr, route_links, n_routes, link_bw, scale):
    """`moves_between` two mappings (and the revived slots), priced (`price_moves`)."""
    unit, dest, sources = moves_between(old_slots, old_ncopy, new_slots, new_ncopy, revive)
    return price_moves(unit, dest, sources, failed, unit_bytes, t, e, hops, which, mem_bw, route_ptr,
                       route_links, n_routes, link_bw, scale)


@nb.njit(cache=True)
def change_cost(old_slots, old_ncopy, new_slots, new_ncopy, revive, failed, unit_bytes, t, e, hops, which,
                mem_bw, route_ptr, route_links, n_routes, link_bw, scale):
    """`price_change`'s `MoveCost` alone (no arrays to hand back: a stall's moves need no more)."""
    moved = price_change(old_slots, old_ncopy, new_slots, new_ncopy, revive, failed, unit_bytes, t, e, hops,
                         which, mem_bw, route_ptr, route_links, n_routes, link_bw, scale)
    if not len(moved.unit):
        return MoveCost(0.0, 0.0, 0.0, 0, 1.0)
    return MoveCost(moved.bytes, moved.time_s, moved.energy_j, len(moved.unit), 1.0)
