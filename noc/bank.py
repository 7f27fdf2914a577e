"""Route tables of every package shape a study allows, packed in flat arrays for Numba kernels.

A `RouteBank` concatenates, for configurations c = 0 .. C-1 (one topology each, e.g. every
rows x cols mesh of a study), the CSR route table, per-pair figures and per-channel figures.
``shape_index[rows, cols]`` gives the configuration of a grid shape (-1 if the study does not allow
it). Inside ``@njit`` code take views of one configuration and use the ``noc.routing`` helpers:

    c = bank.shape_index[rows, cols]
    n, route_ptr, route_links = bank_routes(bank, c)
    add_route_load(route_ptr, route_links, src, dst, n, amount, loads)     # loads: >= bank.n_links[c]
    hops, path_latency_s, path_energy_j_per_byte = bank_pairs(bank, c)     # flat, index src * n + dst
    link_bw_Bps, hop_latency_s, hop_energy_j_per_byte = bank_links(bank, c)
    adj_ptr, adj_link, link_src, link_dst = bank_graph(bank, c)           # for noc.faults.reroute_table

``path_latency_s`` is the zero-load path latency (sum over the route of link + router latency),
``path_energy_j_per_byte`` the energy of one byte along it; ``hops`` is -1 for unreachable pairs.
"""
from __future__ import annotations

from collections import namedtuple

import numba as nb
import numpy as np

from .routing import route
from .topology import Topology

RouteBank = namedtuple("RouteBank", [
    "shape_index", "n_nodes", "n_links", "pair_start", "ptr_start", "links_start", "link_start", "adj_start",
    "route_ptr", "route_links", "pair_hops", "pair_latency_s", "pair_energy_j_per_byte",
    "link_bw_Bps", "link_hop_latency_s", "link_hop_energy_j_per_byte", "link_src", "link_dst",
    "adj_ptr", "adj_link"])


def route_bank(topologies: list[Topology], routing: str = "xy") -> RouteBank:
    """Route every topology with ``routing`` and pack the tables (grids indexed by their shape)."""
    parts = {name: [] for name in RouteBank._fields if name != "shape_index"}
    counts = {"pair": 0, "ptr": 0, "links": 0, "link": 0, "adj": 0}
    max_r = max([t.rows for t in topologies] + [0])
    max_c = max([t.cols for t in topologies] + [0])
    shape_index = np.full((max_r + 1, max_c + 1), -1, np.int64)
    for c, t in enumerate(topologies):
        r = route(t, routing)
        if t.kind != "graph":
            shape_index[t.rows, t.cols] = c
        n, L = t.n, t.n_links
        parts["n_nodes"].append([n])
        parts["n_links"].append([L])
        for key, name in (("pair", "pair_start"), ("ptr", "ptr_start"), ("links", "links_start"),
                          ("link", "link_start"), ("adj", "adj_start")):
            parts[name].append([counts[key]])
        counts["pair"] += n * n
        counts["ptr"] += n * n + 1
        counts["links"] += len(r.route_links)
        counts["link"] += L
        counts["adj"] += n + 1
        parts["route_ptr"].append(r.route_ptr)
        parts["route_links"].append(r.route_links)
        parts["pair_hops"].append(r.hops.ravel())
        parts["pair_latency_s"].append(r.incidence @ t.link_hop_latency_s)
        parts["pair_energy_j_per_byte"].append(r.incidence @ t.link_hop_energy_j_per_byte)
        parts["link_bw_Bps"].append(t.link_bw_Bps)
        parts["link_hop_latency_s"].append(t.link_hop_latency_s)
        parts["link_hop_energy_j_per_byte"].append(t.link_hop_energy_j_per_byte)
        parts["link_src"].append(t.link_src)
        parts["link_dst"].append(t.link_dst)
        parts["adj_ptr"].append(t.adj_ptr)
        parts["adj_link"].append(t.adj_link)
    ints = {"n_nodes", "n_links", "pair_start", "ptr_start", "links_start", "link_start", "adj_start", "route_ptr",
            "route_links", "pair_hops", "link_src", "link_dst", "adj_ptr", "adj_link"}
    arrays = {name: np.concatenate(v).astype(np.int64 if name in ints else float) if v else
              np.zeros(0, np.int64 if name in ints else float) for name, v in parts.items()}
    return RouteBank(shape_index=shape_index, **arrays)


@nb.njit(cache=True)
def bank_routes(bank, c):
    """(n, route_ptr, route_links) of configuration c (route_ptr relative to route_links)."""
    n = bank.n_nodes[c]
    p0 = bank.ptr_start[c]
    l0 = bank.links_start[c]
    ptr = bank.route_ptr[p0:p0 + n * n + 1]
    return n, ptr, bank.route_links[l0:l0 + ptr[n * n]]


@nb.njit(cache=True)
def bank_pairs(bank, c):
    """(hops, path_latency_s, path_energy_j_per_byte) of configuration c, flat [n * n]."""
    n = bank.n_nodes[c]
    a = bank.pair_start[c]
    b = a + n * n
    return bank.pair_hops[a:b], bank.pair_latency_s[a:b], bank.pair_energy_j_per_byte[a:b]


@nb.njit(cache=True)
def bank_links(bank, c):
    """(bandwidth_Bps, hop_latency_s, hop_energy_j_per_byte) per channel of configuration c."""
    a = bank.link_start[c]
    b = a + bank.n_links[c]
    return bank.link_bw_Bps[a:b], bank.link_hop_latency_s[a:b], bank.link_hop_energy_j_per_byte[a:b]


@nb.njit(cache=True)
def bank_graph(bank, c):
    """(adj_ptr, adj_link, link_src, link_dst) of configuration c, for rerouting around failures."""
    n = bank.n_nodes[c]
    a = bank.adj_start[c]
    l0 = bank.link_start[c]
    l1 = l0 + bank.n_links[c]
    return bank.adj_ptr[a:a + n + 1], bank.adj_link[l0:l1], bank.link_src[l0:l1], bank.link_dst[l0:l1]


@nb.njit(cache=True)
def max_serialisation_s(loads, link_bw_Bps):
    """Bytes on the busiest channel over its bandwidth (loads[:len(link_bw_Bps)] in bytes)."""
    worst = 0.0
    for l in range(link_bw_Bps.shape[0]):
        worst = max(worst, loads[l] / link_bw_Bps[l])
    return worst
