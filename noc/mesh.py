"""2D mesh shortcuts: XY hop counts and link loads for Numba code, and the textbook mesh figures.

These kernels index a mesh's channels as ``node * 4 + d`` (d = 0 east, 1 west, 2 south, 3 north; slots
that would leave the mesh stay unused), row-major ``node = row * cols + col``, XY = along the row first.
The general machinery (any topology, CSR route tables, latency, faults) lives in noc.topology,
noc.routing, noc.latency and noc.faults; these agree with it on a mesh (tests/test_noc_routing.py).
Average hops under uniform traffic on a k x k mesh is 2(k^2 - 1)/(3k) (Dally & Towles).
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .bisection import bisection
from .latency import md1_wait
from .routing import route
from .topology import EAST, NORTH, SOUTH, WEST, mesh

__all__ = ["xy_hops", "add_xy_route_load", "xy_link_loads", "md1_wait", "average_hops_uniform", "bisection_links"]


@nb.njit(cache=True)
def xy_hops(src, dst, cols):
    """Manhattan distance between two nodes of a mesh with ``cols`` columns."""
    return abs(src % cols - dst % cols) + abs(src // cols - dst // cols)


@nb.njit(cache=True)
def add_xy_route_load(src, dst, cols, amount, loads):
    """Add ``amount`` to every directed link the XY route from src to dst crosses."""
    r, c = src // cols, src % cols
    r1, c1 = dst // cols, dst % cols
    while c != c1:
        node = r * cols + c
        if c1 > c:
            loads[node * 4 + EAST] += amount
            c += 1
        else:
            loads[node * 4 + WEST] += amount
            c -= 1
    while r != r1:
        node = r * cols + c
        if r1 > r:
            loads[node * 4 + SOUTH] += amount
            r += 1
        else:
            loads[node * 4 + NORTH] += amount
            r -= 1


@nb.njit(cache=True)
def xy_link_loads(traffic, cols):
    """Bytes on every directed link for a traffic matrix (bytes from node i to node j)."""
    n = traffic.shape[0]
    loads = np.zeros(n * 4)
    for i in range(n):
        for j in range(n):
            if i != j and traffic[i, j] > 0:
                add_xy_route_load(i, j, cols, traffic[i, j], loads)
    return loads


def average_hops_uniform(rows: int, cols: int, include_self: bool = True) -> float:
    """Mean XY hop count under uniform traffic on a rows x cols mesh.

    With ``include_self`` every node sends to every node including itself (n^2 pairs), the convention of
    Dally & Towles' 2(k^2 - 1)/(3k); without it only distinct pairs count.
    """
    return route(mesh(rows, cols), "xy").average_hops(include_self)


def bisection_links(rows: int, cols: int) -> int:
    """Channels per direction crossing the narrowest halving of the mesh."""
    return bisection(mesh(rows, cols)).links
