"""Bisection of a topology: the fewest channels (and least bandwidth) crossing any halving of its nodes.

Per direction, over partitions into floor(n/2) and ceil(n/2) nodes (Dally & Towles sec. 3.3). Exact by
enumeration up to ``EXACT_MAX_NODES`` chiplets (Numba). Beyond that a mesh or torus takes the cut across
its longer dimension (min(rows, cols) channels for a mesh, twice that for a torus whose longer
dimension wraps: exact when that dimension is even) and a graph takes the best of Kernighan-Lin
bisections (networkx; an upper bound).
"""
from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numba as nb
import numpy as np

from .topology import Topology

EXACT_MAX_NODES = 20


@dataclass(frozen=True)
class Bisection:
    links: int              # channels crossing in one direction
    bandwidth_Bps: float    # their bandwidth, one direction
    exact: bool


@nb.njit(cache=True)
def _exact(n, src, dst, bw):
    """(min channels, min bandwidth) one way across any balanced partition; node 0 fixed in side A."""
    half = n // 2
    best_links = 1 << 30
    best_bw = np.inf
    for mask in range(1 << (n - 1)):
        side = (mask << 1) | 1          # node 0 always in A
        count = 0
        m = side
        while m:
            count += m & 1
            m >>= 1
        if count != half and count != n - half:
            continue
        ab_links = 0
        ba_links = 0
        ab_bw = 0.0
        ba_bw = 0.0
        for l in range(src.shape[0]):
            a_in = (side >> src[l]) & 1
            b_in = (side >> dst[l]) & 1
            if a_in == 1 and b_in == 0:
                ab_links += 1
                ab_bw += bw[l]
            elif a_in == 0 and b_in == 1:
                ba_links += 1
                ba_bw += bw[l]
        best_links = min(best_links, min(ab_links, ba_links))
        best_bw = min(best_bw, min(ab_bw, ba_bw))
    return best_links, best_bw


def bisection(topology: Topology) -> Bisection:
    t = topology
    if t.n < 2:
        return Bisection(0, 0.0, True)
    if t.n <= EXACT_MAX_NODES:
        links, bw = _exact(t.n, t.link_src, t.link_dst, t.link_bw_Bps)
        return Bisection(int(links), float(bw), True)
    if t.kind in ("mesh", "torus"):
        long_dim = max(t.rows, t.cols)
        links = min(t.rows, t.cols) * (2 if t.kind == "torus" and long_dim >= 3 else 1)
        return Bisection(links, links * float(t.link_bw_Bps.min()), long_dim % 2 == 0)
    g = nx.Graph()
    g.add_nodes_from(range(t.n))
    for i in range(t.n_links):
        g.add_edge(int(t.link_src[i]), int(t.link_dst[i]), weight=float(t.link_bw_Bps[i]))
    best = None
    for seed in range(8):
        a, _ = nx.algorithms.community.kernighan_lin_bisection(g, weight="weight", seed=seed)
        side = np.zeros(t.n, bool)
        side[list(a)] = True
        cross = side[t.link_src] & ~side[t.link_dst]
        cand = (int(cross.sum()), float(t.link_bw_Bps[cross].sum()))
        best = cand if best is None or cand[1] < best[1] else best
    return Bisection(best[0], best[1], False)
