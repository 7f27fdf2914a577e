"""Synthetic traffic patterns as matrices: row i is the share of node i's injection sent to each node.

Multiply by an injection rate (bytes/s per node) to get a traffic matrix. Definitions follow
Dally & Towles (ch. 3.2) and BookSim2's ``traffic =`` options:

* ``uniform``: every node sends to every node with equal probability, itself included (the convention
  behind the 2(k^2 - 1)/(3k) average hop count and BookSim2's uniform); ``include_self=False`` spreads
  over the n - 1 others.
* ``transpose``: (row r, col c) sends to (c, r); needs a square grid; diagonal nodes send to themselves.
* ``hotspot``: a share ``fraction`` of every node's traffic goes to the hot nodes (evenly), the rest
  uniformly.
* ``neighbor``: (r, c) sends to (r, c + 1 mod cols), BookSim2's neighbour pattern.
"""
from __future__ import annotations

import numpy as np

from .errors import NocError

PATTERNS = ("uniform", "transpose", "hotspot", "neighbor")


def uniform(n: int, include_self: bool = True) -> np.ndarray:
    if n < 1:
        raise NocError(f"uniform traffic needs at least one node, got {n}")
    if include_self or n == 1:
        return np.full((n, n), 1.0 / n)
    p = np.full((n, n), 1.0 / (n - 1))
    np.fill_diagonal(p, 0.0)
    return p


def transpose(rows: int, cols: int) -> np.ndarray:
    if rows != cols:
        raise NocError(f"transpose traffic needs a square grid, got {rows} x {cols}")
    n = rows * cols
    p = np.zeros((n, n))
    for r in range(rows):
        for c in range(cols):
            p[r * cols + c, c * cols + r] = 1.0
    return p


def hotspot(n: int, hot=(0,), fraction: float = 0.25, include_self: bool = True) -> np.ndarray:
    hot = list(hot)
    if not hot or any(not (0 <= h < n) for h in hot):
        raise NocError(f"hotspot nodes must be in 0..{n - 1}, got {hot}")
    if not 0.0 <= fraction <= 1.0:
        raise NocError(f"hotspot fraction must be in [0, 1], got {fraction}")
    p = (1.0 - fraction) * uniform(n, include_self)
    p[:, hot] += fraction / len(hot)
    return p


def neighbor(rows: int, cols: int) -> np.ndarray:
    n = rows * cols
    p = np.zeros((n, n))
    for i in range(n):
        r, c = divmod(i, cols)
        p[i, r * cols + (c + 1) % cols] = 1.0
    return p


def pattern(name: str, rows: int, cols: int, **options) -> np.ndarray:
    """A named pattern on a rows x cols grid of n = rows x cols nodes."""
    n = rows * cols
    if name == "uniform":
        return uniform(n, **options)
    if name == "transpose":
        return transpose(rows, cols)
    if name == "hotspot":
        return hotspot(n, **options)
    if name == "neighbor":
        return neighbor(rows, cols)
    raise NocError(f"unknown traffic pattern {name!r}; allowed: {', '.join(PATTERNS)}")
