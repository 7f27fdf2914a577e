"""Route tables of every package shape a study allows, flattened for the Numba evaluator.

For each shape (rows x cols of the mesh) the table lists, per ordered chiplet pair, the directed links
its route crosses (CSR: ``pair_ptr`` / ``route_links``), the pair's zero-load latency (hops x hop
latency) and, per link, the inverse of its bandwidth. Shapes are concatenated; ``pair_base[shape]`` and
``link_base[shape]`` say where a shape's rows start. Routes come from ``noc`` (XY on the mesh).
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

import noc

RouteTables = namedtuple("RouteTables", ["pair_ptr", "route_links", "pair_latency", "link_inv_bw", "link_base",
                                         "pair_base", "n_links", "shape_rows", "shape_cols"])


def shape_index(rows: int, cols: int, row_range: tuple[int, int], col_range: tuple[int, int]) -> int:
    return (rows - row_range[0]) * (col_range[1] - col_range[0] + 1) + (cols - col_range[0])


def build_route_tables(row_range: tuple[int, int], col_range: tuple[int, int], link: noc.LinkTech) -> RouteTables:
    """XY route tables for every mesh shape in the ranges, in `shape_index` order."""
    pair_ptr, route_links, pair_latency, link_inv_bw = [0], [], [], []
    link_base, pair_base, n_links, shape_rows, shape_cols = [], [], [], [], []
    for rows in range(row_range[0], row_range[1] + 1):
        for cols in range(col_range[0], col_range[1] + 1):
            n = rows * cols
            links = 4 * n
            pair_base.append(len(pair_latency))
            link_base.append(len(link_inv_bw))
            n_links.append(links)
            shape_rows.append(rows)
            shape_cols.append(cols)
            link_inv_bw.extend([1.0 / link.bandwidth_Bps] * links)
            scratch = np.zeros(links)
            for src in range(n):
                for dst in range(n):
                    scratch[:] = 0.0
                    if src != dst:
                        noc.add_xy_route_load(src, dst, cols, 1.0, scratch)
                    crossed = np.flatnonzero(scratch)
                    route_links.extend(crossed.tolist())
                    pair_ptr.append(len(route_links))
                    pair_latency.append(len(crossed) * link.hop_latency_s)
    # pair_ptr has one leading 0 and then one end offset per pair of every shape, so the routes of pair
    # p (global index) are route_links[pair_ptr[p]:pair_ptr[p + 1]].
    return RouteTables(
        pair_ptr=np.array(pair_ptr, np.int64), route_links=np.array(route_links, np.int64),
        pair_latency=np.array(pair_latency), link_inv_bw=np.array(link_inv_bw),
        link_base=np.array(link_base, np.int64), pair_base=np.array(pair_base, np.int64),
        n_links=np.array(n_links, np.int64), shape_rows=np.array(shape_rows, np.int64),
        shape_cols=np.array(shape_cols, np.int64))
