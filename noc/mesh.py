"""2D mesh with dimension-order (XY) routing: hop counts, link loads and latency under load.

Nodes are numbered row-major, ``node = row * cols + col``. Each node owns four outgoing directed
links, indexed ``node * 4 + d`` with d = 0 east, 1 west, 2 south, 3 north (links that would leave the
mesh are never loaded). XY routing travels along the row first, then along the column.

Latency of a message of B bytes over h hops: ``h x hop_latency + B / bandwidth`` (zero-load, wormhole)
plus, per link crossed, the M/D/1 waiting time ``rho S / (2 (1 - rho))`` with S the service time of
the message on that link and rho the link's utilisation (shared/reference/hardware.md).
Average hops under uniform traffic on a k x k mesh is 2(k^2 - 1)/(3k) (Dally & Towles).
"""
from __future__ import annotations

import numba as nb
import numpy as np

EAST, WEST, SOUTH, NORTH = 0, 1, 2, 3


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


@nb.njit(cache=True)
def md1_wait(rho, service_s):
    """Mean M/D/1 queueing delay; infinite at or above saturation."""
    if rho >= 1.0:
        return np.inf
    return rho * service_s / (2.0 * (1.0 - rho))


def average_hops_uniform(rows: int, cols: int, include_self: bool = True) -> float:
    """Mean XY hop count under uniform traffic.

    With ``include_self`` every node sends to every node including itself (n^2 pairs), the convention of
    Dally & Towles' 2(k^2 - 1)/(3k); without it only distinct pairs count.
    """
    n = rows * cols
    total = sum(xy_hops(i, j, cols) for i in range(n) for j in range(n))
    return total / (n * n if include_self else n * (n - 1))


def bisection_links(rows: int, cols: int) -> int:
    """Links per direction crossing the narrower bisection of the mesh."""
    return min(rows, cols) if rows * cols > 1 else 0
