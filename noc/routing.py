"""Routes on a topology, stored once per topology as a CSR route table.

``route_links[route_ptr[p]:route_ptr[p + 1]]`` are the channels, in order, that pair ``p = src * n + dst``
crosses. The same two arrays are the CSR form of the route incidence matrix R (pairs x channels), so the
channel loads of a traffic matrix T are one sparse product ``T.ravel() @ R`` (``Routes.link_loads``), and
many traffic matrices at once are one sparse matrix product. Numba code reads the arrays directly
(`add_route_load`, `route_link_loads`).

Algorithms (each gives one deterministic path per pair, i.e. oblivious routing):

* ``xy``: dimension order on a mesh or torus, along the row (columns) first, then along the column;
  on a torus each dimension goes the shorter way round. A tie (k/2 apart) goes the positive way from
  an even coordinate and the negative way from an odd one: for k divisible by 4 this loads both
  directions exactly as BookSim2's random tie split does on average (Dally & Towles' 8b/k bound).
* ``shortest``: a minimum-hop path by breadth-first search, taking channels in id order on ties
  (any topology).

A pair with no path (a fault, a disconnected graph) is marked unreachable and has an empty route.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numba as nb
import numpy as np
import scipy.sparse as sp

from .errors import NocError
from .topology import EAST, NORTH, SOUTH, WEST, Topology

ALGORITHMS = ("xy", "shortest")


@nb.njit(cache=True)
def add_route_load(route_ptr, route_links, src, dst, n, amount, loads):
    """Add ``amount`` to every channel of the route from src to dst."""
    p = src * n + dst
    for k in range(route_ptr[p], route_ptr[p + 1]):
        loads[route_links[k]] += amount


@nb.njit(cache=True)
def route_hops(route_ptr, src, dst, n):
    """Channels crossed from src to dst (0 for src == dst or an unreachable pair)."""
    p = src * n + dst
    return route_ptr[p + 1] - route_ptr[p]


@nb.njit(cache=True)
def route_link_loads(route_ptr, route_links, traffic, n_links):
    """Load on every channel for a traffic matrix (same units as the matrix)."""
    n = traffic.shape[0]
    loads = np.zeros(n_links)
    for i in range(n):
        for j in range(n):
            if traffic[i, j] != 0.0:
                add_route_load(route_ptr, route_links, i, j, n, traffic[i, j], loads)
    return loads


@nb.njit(cache=True)
def _dim_step(a, b, size, wrap):
    """(steps, direction) to go from coordinate a to b in one dimension."""
    if a == b:
        return 0, 1
    if wrap:
        fwd = (b - a) % size
        if fwd < size - fwd or (fwd == size - fwd and a % 2 == 0):
            return fwd, 1
        return size - fwd, -1
    if b > a:
        return b - a, 1
    return a - b, -1


@nb.njit(cache=True)
def _dor_walk(s, d, cols, rows, wrap_c, wrap_r, grid_link, out, k):
    """Write the XY route from s to d into out[k:], return the end index."""
    r, c = s // cols, s % cols
    r1, c1 = d // cols, d % cols
    steps, sign = _dim_step(c, c1, cols, wrap_c)
    for _ in range(steps):
        node = r * cols + c
        out[k] = grid_link[node, EAST if sign > 0 else WEST]
        k += 1
        c = (c + sign) % cols
    steps, sign = _dim_step(r, r1, rows, wrap_r)
    for _ in range(steps):
        node = r * cols + c
        out[k] = grid_link[node, SOUTH if sign > 0 else NORTH]
        k += 1
        r = (r + sign) % rows
    return k


@nb.njit(cache=True)
def dor_table(rows, cols, wrap_r, wrap_c, grid_link):
    """(route_ptr, route_links) of dimension-order routing on a rows x cols mesh or torus."""
    n = rows * cols
    ptr = np.zeros(n * n + 1, np.int64)
    for s in range(n):
        for d in range(n):
            hc, _ = _dim_step(s % cols, d % cols, cols, wrap_c)
            hr, _ = _dim_step(s // cols, d // cols, rows, wrap_r)
            ptr[s * n + d + 1] = ptr[s * n + d] + hc + hr
    links = np.empty(ptr[n * n], np.int64)
    for s in range(n):
        for d in range(n):
            _dor_walk(s, d, cols, rows, wrap_c, wrap_r, grid_link, links, ptr[s * n + d])
    return ptr, links


@nb.njit(cache=True)
def bfs_tree(s, adj_ptr, adj_link, link_dst, link_alive, node_alive, parent, dist, queue):
    """Minimum-hop tree from s over live channels and chiplets: parent channel and distance per node."""
    parent[:] = -1
    dist[:] = -1
    if not node_alive[s]:
        return
    dist[s] = 0
    head, tail = 0, 1
    queue[0] = s
    while head < tail:
        u = queue[head]
        head += 1
        for k in range(adj_ptr[u], adj_ptr[u + 1]):
            link = adj_link[k]
            v = link_dst[link]
            if link_alive[link] and node_alive[v] and dist[v] < 0:
                dist[v] = dist[u] + 1
                parent[v] = link
                queue[tail] = v
                tail += 1


@nb.njit(cache=True)
def write_tree_path(d, parent, link_src, out, k, length):
    """Write the tree path to d (``length`` channels) into out[k:k + length] in travel order."""
    node = d
    for i in range(length - 1, -1, -1):
        link = parent[node]
        out[k + i] = link
        node = link_src[link]


@nb.njit(cache=True)
def shortest_table(n, adj_ptr, adj_link, link_src, link_dst, link_alive, node_alive):
    """(route_ptr, route_links, reachable) of minimum-hop routing over live channels and chiplets."""
    parents = np.empty((n, n), np.int64)
    dists = np.empty((n, n), np.int64)
    queue = np.empty(n, np.int64)
    for s in range(n):
        bfs_tree(s, adj_ptr, adj_link, link_dst, link_alive, node_alive, parents[s], dists[s], queue)
    ptr = np.zeros(n * n + 1, np.int64)
    reachable = np.zeros(n * n, np.bool_)
    for s in range(n):
        for d in range(n):
            h = dists[s, d]
            reachable[s * n + d] = h >= 0
            ptr[s * n + d + 1] = ptr[s * n + d] + max(h, 0)
    links = np.empty(ptr[n * n], np.int64)
    for s in range(n):
        for d in range(n):
            h = ptr[s * n + d + 1] - ptr[s * n + d]
            if h > 0:
                write_tree_path(d, parents[s], link_src, links, ptr[s * n + d], h)
    return ptr, links, reachable


@dataclass(frozen=True, eq=False)
class Routes:
    """One route per (src, dst) pair of a topology: the CSR route table and which pairs are served."""

    topology: Topology
    algorithm: str
    route_ptr: np.ndarray       # [n*n + 1] int64
    route_links: np.ndarray     # [sum of hops] int64 channel ids
    reachable: np.ndarray       # [n, n] bool

    @property
    def n(self) -> int:
        return self.topology.n

    @cached_property
    def hops(self) -> np.ndarray:
        """[n, n] channels crossed per pair; -1 where the pair is unreachable."""
        h = np.diff(self.route_ptr).reshape(self.n, self.n)
        return np.where(self.reachable, h, -1)

    def links(self, src: int, dst: int) -> np.ndarray:
        p = src * self.n + dst
        return self.route_links[self.route_ptr[p]:self.route_ptr[p + 1]]

    def path(self, src: int, dst: int) -> list[int]:
        """Chiplets visited from src to dst ([] if unreachable)."""
        if not self.reachable[src, dst]:
            return []
        return [src] + self.topology.link_dst[self.links(src, dst)].tolist()

    @cached_property
    def incidence(self) -> sp.csr_matrix:
        """R[p, l] = 1 when pair p = src * n + dst crosses channel l."""
        data = np.ones(len(self.route_links))
        return sp.csr_matrix((data, self.route_links, self.route_ptr), shape=(self.n * self.n, self.topology.n_links))

    def link_loads(self, traffic: np.ndarray) -> np.ndarray:
        """Channel loads of one traffic matrix [n, n] (or of many, [m, n, n] -> [m, L]) in its units."""
        t = np.asarray(traffic, float)
        if t.shape[-2:] != (self.n, self.n):
            raise NocError(f"traffic matrix must be {self.n} x {self.n} for this topology, got {t.shape}")
        flat = t.reshape(-1, self.n * self.n)
        loads = np.asarray((self.incidence.T @ flat.T).T)
        return loads[0] if t.ndim == 2 else loads

    def unserved(self, traffic: np.ndarray | None = None) -> list[tuple[int, int]]:
        """Pairs (with traffic, if given) the routes cannot serve."""
        bad = ~self.reachable
        if traffic is not None:
            bad &= np.asarray(traffic) > 0
        np.fill_diagonal(bad, False)
        return [(int(a), int(b)) for a, b in zip(*np.nonzero(bad))]

    def average_hops(self, include_self: bool = True) -> float:
        """Mean hops over reachable pairs under uniform traffic; with ``include_self`` the n^2 pairs of
        Dally & Towles (every node also sends to itself), else the n(n - 1) distinct pairs."""
        h = self.hops.astype(float)
        mask = self.reachable.copy()
        if not include_self:
            np.fill_diagonal(mask, False)
        return float(h[mask].sum() / max(mask.sum(), 1))


def route(topology: Topology, algorithm: str = "xy") -> Routes:
    """Route every pair of a topology with ``xy`` (mesh, torus) or ``shortest`` (any topology)."""
    t = topology
    if algorithm == "xy":
        if t.kind not in ("mesh", "torus"):
            raise NocError(f"routing 'xy' needs a mesh or torus, not a {t.kind}; use 'shortest'")
        ptr, links = dor_table(t.rows, t.cols, t.kind == "torus" and t.rows >= 3,
                               t.kind == "torus" and t.cols >= 3, t.grid_link)
        reachable = np.ones((t.n, t.n), bool)
    elif algorithm == "shortest":
        ptr, links, reach = shortest_table(t.n, t.adj_ptr, t.adj_link, t.link_src, t.link_dst,
                                           np.ones(t.n_links, np.bool_), np.ones(t.n, np.bool_))
        reachable = reach.reshape(t.n, t.n)
    else:
        raise NocError(f"unknown routing {algorithm!r}; allowed: {', '.join(ALGORITHMS)}")
    return Routes(topology=t, algorithm=algorithm, route_ptr=ptr, route_links=links, reachable=reachable)
