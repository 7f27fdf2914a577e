"""Route tables of every package shape a study allows, flattened for the Numba evaluator.

Built from the package's network (mesh, torus or graph topology, a technology per link, XY or
shortest-path routing; noc.route). For each table: per ordered chiplet pair, the directed links its
route crosses (CSR: ``pair_ptr`` / ``route_links``, link ids local to the shape), the pair's zero-load
latency and energy per byte along the route (sums over its links and routers; infinite latency for
pairs that cannot reach each other), and per link the inverse of the bandwidth it delivers under a
hand-off's many-to-many load: eta x its bandwidth, eta the routers' allocator efficiency (study key
``hardware.package.router``, noc.router_efficiency: BookSim2's iSLIP router by default, whose separable
allocator keeps a channel that several inputs contend for busy eta = 0.836 of its cycles; Dally & Towles
ch. 19.3). A ring all-reduce (dse.model.hand_offs.allreduce) gives each router output one input, which
iSLIP matches every cycle, so it keeps the links' full bandwidth. Tables are
concatenated; ``pair_base[t]`` and ``link_base[t]`` say where table t's rows start.

The kernels walk a route from ``pad_ptr`` / ``pad_links``: the same links in the same order, each route padded
to a multiple of `ROUTE_LANES` with links L + 1 .. L + 3 of its table's L (lanes past the package's links in
each load row, never read: dse.model.workspace), so a walk takes steps of four links whatever the route's
length (dse.model.hand_offs.add_route): a loop exit mispredicted per chunk rather than per route.
The failure pass walks a second copy of the intact packages' tables (``walk_ptr`` / ``walk_links``, `walk_routes`):
every route at least one step, each pair's padding on its own set of spare lanes (dse.model.hand_offs.add_route_once).

Tables 0 .. shapes-1 are the intact packages in `shape_index` order. After them come the packages
after a failure that changes routes (noc.faults.fault_routes with detours: routes that avoid the
failure are kept, the others take a minimum-hop detour over what survives), when the study asks for
them (``faults.links``, ``faults.failed_router: fails``). Per intact shape s:

* ``node_alt[s] + i``: chiplet i's router has failed with it (-1: routers keep forwarding);
* ``link_alt[s] + j`` for j < ``n_phys[s]``: physical link j (both its channels, in `physical_links`
  order) has failed (``n_phys[s]`` = 0: link failures are not studied);
* ``mc_alt[s] + m``: the chiplets of Monte Carlo failure set m have failed with their routers (-1: none).
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

import noc

from ..errors import StudyError
from ..study.schema.package import PackageSpec

ROUTE_LANES = 4                  # links per step of a route walk; a load row's spare lanes (dse.model.workspace)
SPARE_SETS = 8                   # sets of ROUTE_LANES spare lanes a failure's route walks pad onto (`walk_routes`)
MAX_FAULT_PAIRS = 10_000_000     # chiplet pairs over all route tables after failures (~50-100 bytes each)

RouteTables = namedtuple("RouteTables", ["pair_ptr", "route_links", "pair_latency", "pair_energy", "link_inv_bw",
                                         "link_base", "pair_base", "n_links", "shape_rows", "shape_cols",
                                         "node_alt", "link_alt", "n_phys", "mc_alt", "pad_ptr", "pad_links",
                                         "walk_ptr", "walk_links"])


def shape_index(rows: int, cols: int, row_range: tuple[int, int], col_range: tuple[int, int]) -> int:
    return (rows - row_range[0]) * (col_range[1] - col_range[0] + 1) + (cols - col_range[0])


def physical_links(topology: noc.Topology) -> list[tuple[int, int]]:
    """The package's physical links as (lower chiplet, higher chiplet), in channel order."""
    return [(int(a), int(b)) for a, b in zip(topology.link_src, topology.link_dst) if a < b]


def build_route_tables(package: PackageSpec, links: bool = False, routers_fail: bool = False,
                       mc_sets: np.ndarray | None = None) -> RouteTables:
    """Route tables of every shape of the package's mesh ranges, then those after the failures asked for:
    each physical link (``links``), each chiplet with its router and each Monte Carlo set ``mc_sets[n, m]``
    of an n-chiplet package (``routers_fail``)."""
    shapes = package.mesh.shapes()
    intact = [noc.route(package.network(r, c), package.routing_algorithm) for r, c in shapes]
    tables = list(intact)
    node_alt, link_alt, n_phys, mc_alt = [], [], [], []
    samples = 0 if mc_sets is None else mc_sets.shape[1]
    _check_size(intact, links, routers_fail, samples)
    for routes in intact:
        t = routes.topology
        node_alt.append(len(tables) if routers_fail else -1)
        if routers_fail:
            tables += [noc.fault_routes(routes, failed_nodes=[i]) for i in range(t.n)]
        phys = physical_links(t) if links else []
        link_alt.append(len(tables))
        n_phys.append(len(phys))
        tables += [noc.fault_routes(routes, failed_links=[pair]) for pair in phys]
        mc_alt.append(len(tables) if routers_fail and samples else -1)
        if routers_fail:
            tables += [noc.fault_routes(routes, failed_nodes=sorted(set(mc_sets[t.n, m].tolist())))
                       for m in range(samples)]
    packed = _pack(tables, package.switch_efficiency, len(intact))
    return RouteTables(**packed, shape_rows=np.array([r for r, _ in shapes], np.int64),
                       shape_cols=np.array([c for _, c in shapes], np.int64),
                       node_alt=np.array(node_alt, np.int64), link_alt=np.array(link_alt, np.int64),
                       n_phys=np.array(n_phys, np.int64), mc_alt=np.array(mc_alt, np.int64))


def _check_size(intact: list[noc.Routes], links: bool, routers_fail: bool, samples: int) -> None:
    pairs = 0
    for routes in intact:
        t = routes.topology
        pairs += t.n * t.n * ((t.n + samples if routers_fail else 0) + (len(physical_links(t)) if links else 0))
    if pairs > MAX_FAULT_PAIRS:
        raise StudyError(f"the route tables after each failure would hold {pairs:,} chiplet pairs (at most "
                         f"{MAX_FAULT_PAIRS:,}): every failed router, link and (with failed_router: fails) Monte "
                         "Carlo set needs its own table per package shape; lower monte_carlo.samples, turn off "
                         "links or narrow the mesh ranges", key="faults")


def _pack(tables: list[noc.Routes], switch_efficiency: float, walked: int) -> dict:
    """Concatenate route tables into the flat arrays of `RouteTables` (links at ``switch_efficiency`` of
    their bandwidth); the failure pass's walks (`walk_routes`) of the first ``walked`` tables only, the intact
    packages' (a failure that changes routes is evaluated in full, on ``pad_ptr`` / ``pad_links``)."""
    pair_ptr, route_links, pair_latency, pair_energy, inv_bw = [np.zeros(1, np.int64)], [], [], [], []
    pad_ptr, pad_links = [np.zeros(1, np.int64)], []
    walk_ptr, walk_links = [np.zeros(1, np.int64)], []
    link_base, pair_base, n_links = [], [], []
    n_pairs = n_route = n_link = n_pad = n_walk = 0
    for number, routes in enumerate(tables):
        t = routes.topology
        n, L = t.n, t.n_links
        pair_base.append(n_pairs)
        link_base.append(n_link)
        n_links.append(L)
        pair_ptr.append(routes.route_ptr[1:] + n_route)
        route_links.append(routes.route_links)
        ptr, padded = padded_routes(np.asarray(routes.route_ptr, np.int64), np.asarray(routes.route_links, np.int64), L)
        pad_ptr.append(ptr[1:] + n_pad)
        pad_links.append(padded)
        n_pad += int(ptr[-1])
        if number < walked:
            ptr, padded = walk_routes(np.asarray(routes.route_ptr, np.int64), np.asarray(routes.route_links, np.int64),
                                      L)
            walk_ptr.append(ptr[1:] + n_walk)
            walk_links.append(padded)
            n_walk += int(ptr[-1])
        served = routes.hops.ravel() >= 0
        pair_latency.append(np.where(served, routes.incidence @ t.link_hop_latency_s, np.inf))
        pair_energy.append(np.where(served, routes.incidence @ t.link_hop_energy_j_per_byte, 0.0))
        inv_bw.append(1.0 / (switch_efficiency * t.link_bw_Bps))
        n_pairs += n * n
        n_route += int(routes.route_ptr[-1])
        n_link += L
    return dict(pair_ptr=np.concatenate(pair_ptr).astype(np.int64),
                route_links=np.concatenate(route_links).astype(np.int64),
                pair_latency=np.concatenate(pair_latency), pair_energy=np.concatenate(pair_energy),
                link_inv_bw=np.concatenate(inv_bw), link_base=np.array(link_base, np.int64),
                pair_base=np.array(pair_base, np.int64), n_links=np.array(n_links, np.int64),
                pad_ptr=np.concatenate(pad_ptr).astype(np.int64),
                pad_links=np.concatenate(pad_links).astype(np.int32),
                walk_ptr=np.concatenate(walk_ptr).astype(np.int64),
                walk_links=np.concatenate(walk_links).astype(np.int32))


def padded_routes(route_ptr: np.ndarray, route_links: np.ndarray, n_links: int) -> tuple[np.ndarray, np.ndarray]:
    """One table's routes (CSR ``route_ptr`` / ``route_links``) each padded to a multiple of `ROUTE_LANES`
    links: position k past the route's end holds link ``n_links + k % ROUTE_LANES`` (a spare lane)."""
    lengths = np.diff(route_ptr)
    padded = -(-lengths // ROUTE_LANES) * ROUTE_LANES
    ptr = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(padded, out=ptr[1:])
    pair = np.repeat(np.arange(len(lengths)), padded)
    k = np.arange(int(ptr[-1])) - ptr[pair]
    real = k < lengths[pair]
    links = n_links + k % ROUTE_LANES
    links[real] = route_links[route_ptr[pair[real]] + k[real]]
    return ptr, links


def walk_routes(route_ptr: np.ndarray, route_links: np.ndarray, n_links: int) -> tuple[np.ndarray, np.ndarray]:
    """The routes as `padded_routes` pads them, for the failure pass's walks (dse.model.hand_offs.add_route_once):
    an empty route (a chiplet to itself) takes one step of spare lanes, so every walk takes at least one step
    and its first needs no loop test; pair q's padding goes to the spare lanes ``n_links + ROUTE_LANES x (q %
    SPARE_SETS) + k % ROUTE_LANES`` (a load row of the failure pass has ``ROUTE_LANES x SPARE_SETS`` spare lanes,
    dse.model.workspace), so consecutive walks of different pairs mostly pad onto different lanes: each spare lane
    is added to, in memory, by every walk that pads onto it, and one set for all walks chained every walk to the
    one before through those additions."""
    lengths = np.diff(route_ptr)
    padded = np.maximum(-(-lengths // ROUTE_LANES), 1) * ROUTE_LANES
    ptr = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(padded, out=ptr[1:])
    pair = np.repeat(np.arange(len(lengths)), padded)
    k = np.arange(int(ptr[-1])) - ptr[pair]
    real = k < lengths[pair]
    links = n_links + ROUTE_LANES * (pair % SPARE_SETS) + k % ROUTE_LANES
    links[real] = route_links[route_ptr[pair[real]] + k[real]]
    return ptr, links
