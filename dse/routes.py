"""Route tables of every package shape a study allows, flattened for the Numba evaluator.

Built from the package's ``noc`` route bank (mesh, torus or graph topology, a technology per link,
XY or shortest-path routing). For each shape the table lists, per ordered chiplet pair, the directed
links its route crosses (CSR: ``pair_ptr`` / ``route_links``, link ids local to the shape), the pair's
zero-load latency and energy per byte along the route (sums over its links and routers; infinite for
pairs the topology cannot connect), and per link the inverse of its bandwidth. Shapes are concatenated;
``pair_base[shape]`` and ``link_base[shape]`` say where a shape's rows start.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .schema.hardware import PackageSpec

RouteTables = namedtuple("RouteTables", ["pair_ptr", "route_links", "pair_latency", "pair_energy", "link_inv_bw",
                                         "link_base", "pair_base", "n_links", "shape_rows", "shape_cols"])


def shape_index(rows: int, cols: int, row_range: tuple[int, int], col_range: tuple[int, int]) -> int:
    return (rows - row_range[0]) * (col_range[1] - col_range[0] + 1) + (cols - col_range[0])


def build_route_tables(package: PackageSpec) -> RouteTables:
    """Route tables for every shape of the package's mesh ranges, in `shape_index` order."""
    bank = package.route_bank()
    shapes = package.mesh.shapes()
    pair_ptr, route_links, pair_latency, pair_energy, inv_bw = [np.zeros(1, np.int64)], [], [], [], []
    link_base, pair_base, n_links = [], [], []
    n_pairs = n_route = n_link = 0
    for c, _ in enumerate(shapes):
        n = int(bank.n_nodes[c])
        L = int(bank.n_links[c])
        p0, l0, a0, k0 = bank.ptr_start[c], bank.links_start[c], bank.pair_start[c], bank.link_start[c]
        ptr = bank.route_ptr[p0:p0 + n * n + 1]
        pair_base.append(n_pairs)
        link_base.append(n_link)
        n_links.append(L)
        pair_ptr.append(ptr[1:] + n_route)
        route_links.append(bank.route_links[l0:l0 + ptr[-1]])
        hops = bank.pair_hops[a0:a0 + n * n]
        pair_latency.append(np.where(hops >= 0, bank.pair_latency_s[a0:a0 + n * n], np.inf))
        pair_energy.append(np.where(hops >= 0, bank.pair_energy_j_per_byte[a0:a0 + n * n], 0.0))
        inv_bw.append(1.0 / bank.link_bw_Bps[k0:k0 + L])
        n_pairs += n * n
        n_route += int(ptr[-1])
        n_link += L
    rows = [r for r, _ in shapes]
    cols = [c for _, c in shapes]
    return RouteTables(
        pair_ptr=np.concatenate(pair_ptr).astype(np.int64), route_links=np.concatenate(route_links).astype(np.int64),
        pair_latency=np.concatenate(pair_latency), pair_energy=np.concatenate(pair_energy),
        link_inv_bw=np.concatenate(inv_bw), link_base=np.array(link_base, np.int64),
        pair_base=np.array(pair_base, np.int64), n_links=np.array(n_links, np.int64),
        shape_rows=np.array(rows, np.int64), shape_cols=np.array(cols, np.int64))
