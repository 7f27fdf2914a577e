"""Failed links and chiplets: which pairs stay reachable, the new routes, and the throughput retained.

A failed link takes both its channels down; a failed chiplet takes its router (nothing passes through
it) and its traffic. Two routers:

* plain (``detour=False``): the primary routes (e.g. XY) as they are; a pair whose route crosses a
  failure is lost. This is what dimension-order routing alone can serve.
* fault-aware (``detour=True``): pairs whose primary route is intact keep it; the others take a
  minimum-hop detour over the surviving links and chiplets (breadth-first search), if one exists.

Throughput retained: survivors keep injecting at the same rate; what they sent to failed chiplets goes
to the surviving ones in the same proportions (the work moves there), pairs left without a route are
lost, and the network saturates at its busiest channel (noc.latency). Retained = aggregate delivered
throughput at saturation after / before. With k of N chiplets failed it is at most about (N - k)/N.

Measures from the literature (reachability, throughput retained) as in shared/reference/hardware.md.
Random failures: Monte Carlo over k failed links and/or chiplets (or each link failing with
probability p), seeded, in Numba.
"""
from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from .errors import NocError
from .routing import Routes, write_tree_path, bfs_tree, route_link_loads
from .topology import Topology


@nb.njit(cache=True)
def _route_intact(route_ptr, route_links, p, link_dst, link_alive, node_alive):
    for k in range(route_ptr[p], route_ptr[p + 1]):
        link = route_links[k]
        if not link_alive[link] or not node_alive[link_dst[link]]:
            return False
    return True


@nb.njit(cache=True)
def reroute_table(n, route_ptr, route_links, adj_ptr, adj_link, link_src, link_dst, link_alive, node_alive, detour):
    """(route_ptr, route_links, reachable) after failures: intact routes kept, broken ones detoured
    (``detour``) or dropped. Unreachable pairs and pairs with a failed end get an empty route."""
    new_ptr = np.zeros(n * n + 1, np.int64)
    reachable = np.zeros(n * n, np.bool_)
    keep = np.zeros(n * n, np.bool_)
    parents = np.full((n, n), -1, np.int64)
    dists = np.full((n, n), -1, np.int64)
    have_tree = np.zeros(n, np.bool_)
    queue = np.empty(n, np.int64)
    for s in range(n):
        for d in range(n):
            p = s * n + d
            length = 0
            if node_alive[s] and node_alive[d]:
                if _route_intact(route_ptr, route_links, p, link_dst, link_alive, node_alive):
                    keep[p] = True
                    reachable[p] = True
                    length = route_ptr[p + 1] - route_ptr[p]
                elif detour:
                    if not have_tree[s]:
                        bfs_tree(s, adj_ptr, adj_link, link_dst, link_alive, node_alive, parents[s], dists[s], queue)
                        have_tree[s] = True
                    if dists[s, d] >= 0:
                        reachable[p] = True
                        length = dists[s, d]
            new_ptr[p + 1] = new_ptr[p] + length
    new_links = np.empty(new_ptr[n * n], np.int64)
    for p in range(n * n):
        k = new_ptr[p]
        if keep[p]:
            for j in range(route_ptr[p], route_ptr[p + 1]):
                new_links[k] = route_links[j]
                k += 1
        elif reachable[p] and new_ptr[p + 1] > k:
            write_tree_path(p % n, parents[p // n], link_src, new_links, k, new_ptr[p + 1] - k)
    return new_ptr, new_links, reachable


@nb.njit(cache=True)
def surviving_traffic(pattern, node_alive):
    """Pattern among surviving chiplets: each survivor's share to failed ones moves to the survivors."""
    n = pattern.shape[0]
    out = np.zeros((n, n))
    for s in range(n):
        if not node_alive[s]:
            continue
        total = 0.0
        alive_part = 0.0
        for d in range(n):
            total += pattern[s, d]
            if node_alive[d]:
                alive_part += pattern[s, d]
        if alive_part > 0.0:
            for d in range(n):
                if node_alive[d]:
                    out[s, d] = pattern[s, d] * total / alive_part
    return out


@nb.njit(cache=True)
def fault_stats(n, route_ptr, route_links, adj_ptr, adj_link, link_src, link_dst, link_bw, pattern,
                link_alive, node_alive, detour):
    """(reachable fraction of ordered pairs of distinct survivors, aggregate throughput at saturation)."""
    ptr, links, reach = reroute_table(n, route_ptr, route_links, adj_ptr, adj_link, link_src, link_dst,
                                      link_alive, node_alive, detour)
    traffic = surviving_traffic(pattern, node_alive)
    pairs = 0
    ok = 0
    served = 0.0
    for s in range(n):
        for d in range(n):
            if reach[s * n + d]:
                served += traffic[s, d]
            else:
                traffic[s, d] = 0.0
            if s != d and node_alive[s] and node_alive[d]:
                pairs += 1
                if reach[s * n + d]:
                    ok += 1
    loads = route_link_loads(ptr, links, traffic, link_bw.shape[0])
    worst = 0.0
    for l in range(loads.shape[0]):
        worst = max(worst, loads[l] / link_bw[l])
    throughput = served / worst if worst > 0.0 else (np.inf if served > 0.0 else 0.0)
    return (ok / pairs if pairs > 0 else 1.0), throughput


@nb.njit(cache=True)
def _pick(count, k, out_mask):
    """Mark k distinct random indices of 0..count-1 (partial Fisher-Yates)."""
    idx = np.arange(count)
    for i in range(min(k, count)):
        j = i + np.random.randint(count - i)
        idx[i], idx[j] = idx[j], idx[i]
        out_mask[idx[i]] = True


@nb.njit(cache=True)
def monte_carlo_kernel(n, route_ptr, route_links, adj_ptr, adj_link, link_src, link_dst, link_reverse, link_bw,
                       pattern, n_link_failures, link_fail_prob, n_node_failures, trials, seed, detour):
    """Per trial: (reachable fraction, throughput retained) under random failures."""
    np.random.seed(seed)
    L = link_src.shape[0]
    phys = np.empty(L, np.int64)
    n_phys = 0
    for l in range(L):
        if link_src[l] < link_dst[l]:
            phys[n_phys] = l
            n_phys += 1
    all_links = np.ones(L, np.bool_)
    all_nodes = np.ones(n, np.bool_)
    _, base = fault_stats(n, route_ptr, route_links, adj_ptr, adj_link, link_src, link_dst, link_bw, pattern,
                          all_links, all_nodes, detour)
    reach = np.empty(trials)
    kept = np.empty(trials)
    for t in range(trials):
        failed_phys = np.zeros(n_phys, np.bool_)
        _pick(n_phys, n_link_failures, failed_phys)
        if link_fail_prob > 0.0:
            for i in range(n_phys):
                if np.random.random() < link_fail_prob:
                    failed_phys[i] = True
        dead = np.zeros(n, np.bool_)
        _pick(n, n_node_failures, dead)
        link_alive = np.ones(L, np.bool_)
        for i in range(n_phys):
            if failed_phys[i]:
                link_alive[phys[i]] = False
                link_alive[link_reverse[phys[i]]] = False
        node_alive = ~dead
        r, thr = fault_stats(n, route_ptr, route_links, adj_ptr, adj_link, link_src, link_dst, link_bw, pattern,
                             link_alive, node_alive, detour)
        reach[t] = r
        kept[t] = thr / base if base > 0.0 else 0.0
    return reach, kept


def _masks(topology: Topology, failed_links, failed_nodes) -> tuple[np.ndarray, np.ndarray]:
    t = topology
    link_alive = np.ones(t.n_links, np.bool_)
    for item in failed_links:
        a, b = item
        link = t.link_id(a, b)
        link_alive[link] = False
        link_alive[t.link_reverse[link]] = False
    node_alive = np.ones(t.n, np.bool_)
    for node in failed_nodes:
        if not 0 <= node < t.n:
            raise NocError(f"failed chiplet {node} is not in 0..{t.n - 1}")
        node_alive[node] = False
    return link_alive, node_alive


def fault_routes(routes: Routes, failed_links=(), failed_nodes=(), detour: bool = True) -> Routes:
    """Routes after failing links (pairs of chiplets) and chiplets; see the module docstring."""
    t = routes.topology
    link_alive, node_alive = _masks(t, failed_links, failed_nodes)
    ptr, links, reach = reroute_table(t.n, routes.route_ptr, routes.route_links, t.adj_ptr, t.adj_link, t.link_src,
                                      t.link_dst, link_alive, node_alive, detour)
    name = f"{routes.algorithm}+detour" if detour else routes.algorithm
    return Routes(topology=t, algorithm=name, route_ptr=ptr, route_links=links, reachable=reach.reshape(t.n, t.n))


@dataclass(frozen=True)
class FaultReport:
    reachable_fraction: float           # ordered pairs of distinct surviving chiplets still served
    lost_pairs: list[tuple[int, int]]   # those that are not
    rerouted_pairs: int                 # served, but on a different route than before
    throughput_retained: float          # aggregate saturation throughput after / before
    routes: Routes


def analyse_faults(routes: Routes, pattern: np.ndarray, failed_links=(), failed_nodes=(),
                   detour: bool = True) -> FaultReport:
    """Reachability, new routes and throughput retained of one failure scenario."""
    t = routes.topology
    p = np.asarray(pattern, float)
    if p.shape != (t.n, t.n):
        raise NocError(f"traffic pattern must be {t.n} x {t.n}, got {p.shape}")
    link_alive, node_alive = _masks(t, failed_links, failed_nodes)
    after = fault_routes(routes, failed_links, failed_nodes, detour)
    reach, thr = fault_stats(t.n, routes.route_ptr, routes.route_links, t.adj_ptr, t.adj_link, t.link_src, t.link_dst,
                             t.link_bw_Bps, p, link_alive, node_alive, detour)
    _, base = fault_stats(t.n, routes.route_ptr, routes.route_links, t.adj_ptr, t.adj_link, t.link_src, t.link_dst,
                          t.link_bw_Bps, p, np.ones(t.n_links, np.bool_), np.ones(t.n, np.bool_), detour)
    alive = node_alive[:, None] & node_alive[None, :]
    np.fill_diagonal(alive, False)
    lost = [(int(a), int(b)) for a, b in zip(*np.nonzero(alive & ~after.reachable))]
    changed = 0
    for s, d in zip(*np.nonzero(alive & after.reachable)):
        if not np.array_equal(after.links(s, d), routes.links(s, d)):
            changed += 1
    return FaultReport(reachable_fraction=float(reach), lost_pairs=lost, rerouted_pairs=changed,
                       throughput_retained=float(thr / base) if base > 0 else 0.0, routes=after)


@dataclass(frozen=True)
class MonteCarloFaults:
    reachable_fraction: np.ndarray      # [trials]
    throughput_retained: np.ndarray     # [trials]

    def summary(self) -> dict:
        return {"trials": len(self.reachable_fraction),
                "reachable_mean": float(self.reachable_fraction.mean()),
                "all_reachable_prob": float((self.reachable_fraction >= 1.0).mean()),
                "retained_mean": float(self.throughput_retained.mean()),
                "retained_p05": float(np.quantile(self.throughput_retained, 0.05))}


def monte_carlo_faults(routes: Routes, pattern: np.ndarray, trials: int = 1000, seed: int = 0,
                       link_failures: int = 0, link_fail_prob: float = 0.0, chiplet_failures: int = 0,
                       detour: bool = True) -> MonteCarloFaults:
    """Random failures: ``link_failures`` distinct links and/or each link with ``link_fail_prob``, plus
    ``chiplet_failures`` distinct chiplets, per trial; reproducible for a given seed."""
    t = routes.topology
    if trials < 1:
        raise NocError(f"trials must be >= 1, got {trials}")
    if not 0.0 <= link_fail_prob <= 1.0:
        raise NocError(f"link_fail_prob must be in [0, 1], got {link_fail_prob}")
    n_phys = t.n_links // 2
    if not 0 <= link_failures <= n_phys:
        raise NocError(f"link_failures must be in 0..{n_phys}, got {link_failures}")
    if not 0 <= chiplet_failures <= t.n:
        raise NocError(f"chiplet_failures must be in 0..{t.n}, got {chiplet_failures}")
    p = np.asarray(pattern, float)
    if p.shape != (t.n, t.n):
        raise NocError(f"traffic pattern must be {t.n} x {t.n}, got {p.shape}")
    reach, kept = monte_carlo_kernel(t.n, routes.route_ptr, routes.route_links, t.adj_ptr, t.adj_link, t.link_src,
                                     t.link_dst, t.link_reverse, t.link_bw_Bps, p, int(link_failures),
                                     float(link_fail_prob), int(chiplet_failures), int(trials), int(seed), detour)
    return MonteCarloFaults(reachable_fraction=reach, throughput_retained=kept)
