"""Message latency on a routed topology: zero-load plus M/D/1 contention, and saturation throughput.

Zero-load latency of a packet of B bytes from s to d over the channels l of its route
(Dally & Towles, "Principles and Practices of Interconnection Networks", ch. 3 and 23):

    T0(s, d) = sum_l (link latency_l + router latency) + endpoint latency + B / min_l bandwidth_l

``endpoint latency`` is what every packet pays outside the hops (BookSim2's source router and its
injection and ejection channels: router + 2 link cycles); 0 by default, as for a hop-only package model.

Contention: every channel l is an M/D/1 queue with utilisation rho_l = load_l / bandwidth_l and
service time S_l = B / bandwidth_l; a packet waits rho S / (2 (1 - rho)) at each channel it crosses
(Kleinrock, Queueing Systems vol. 1, Pollaczek-Khinchine with deterministic service). With
``terminal_bw_Bps`` the injection and ejection channels of each chiplet are queues too.

Router allocation (``switch_efficiency`` eta, default 1): an input-queued virtual-channel router
cannot keep a busy output channel busy every cycle. Its separable switch allocator matches one
request per input and per output each cycle, so a flit waits behind flits of its own input bound
for other outputs (head-of-line and matching losses, Dally & Towles ch. 19.3 and 23.3; Karol, Hluchyj
and Morgan 1987). We model that as each channel serving at eta of its bandwidth in the queue terms:
rho_l = load_l / (eta bandwidth_l), so throughput saturates at eta times the channel bound, below the
bisection limit. ``SWITCH_EFFICIENCY_ISLIP`` is eta fitted on one figure, BookSim2's saturation of an
8 x 8 mesh under uniform traffic (iSLIP, one iteration, 4 VCs of 8 flits: 0.418 of the 0.5 bound).

Sources: with ``bernoulli_sources`` a chiplet emits at most one packet per packet time (BookSim2's
Bernoulli injection of one-flit packets), so its injection channel never queues (a Geo/D/1 queue
whose slot is the service time); Poisson sources (the default) queue there as M/D/1.

Saturation: the injection rate at which the busiest channel reaches rho = 1 (the bottleneck-channel
bound, Dally & Towles sec. 3.3.1): lambda* = eta / max_l (load_l per unit injection / bandwidth_l).
"""
from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from .errors import NocError
from .routing import Routes

#: allocator efficiency of an iSLIP (1 iteration, 4 VCs) router: BookSim2's 8 x 8 mesh saturates at
#: 0.418 flits/cycle/node against the 4b/k = 0.5 channel bound (tests/data/booksim_mesh.csv)
SWITCH_EFFICIENCY_ISLIP = 0.836

#: router models by name: ``islip`` is BookSim2's input-queued virtual-channel router (its default: iSLIP
#: allocators, 4 VCs), ``ideal`` an output-queued switch that keeps every busy output channel busy
ROUTERS = {"islip": SWITCH_EFFICIENCY_ISLIP, "ideal": 1.0}


def router_efficiency(router: str) -> float:
    """Allocator efficiency eta of a router model by name (``ROUTERS``)."""
    if router not in ROUTERS:
        raise NocError(f"unknown router {router!r}; allowed: {', '.join(ROUTERS)}")
    return ROUTERS[router]


@nb.njit(cache=True)
def md1_wait(rho, service_s):
    """Mean M/D/1 queueing delay; infinite at or above saturation."""
    if rho >= 1.0:
        return np.inf
    return rho * service_s / (2.0 * (1.0 - rho))


def md1_wait_array(rho: np.ndarray, service_s: np.ndarray) -> np.ndarray:
    rho = np.asarray(rho, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(rho < 1.0, rho * service_s / (2.0 * (1.0 - rho)), np.inf)


@nb.njit(cache=True)
def _route_min(route_ptr, route_links, values, empty):
    """Minimum of a per-channel value along every route (``empty`` for routes without channels)."""
    m = route_ptr.shape[0] - 1
    out = np.empty(m)
    for p in range(m):
        best = empty
        for k in range(route_ptr[p], route_ptr[p + 1]):
            best = min(best, values[route_links[k]])
        out[p] = best
    return out


def _check_traffic(routes: Routes, traffic: np.ndarray, name: str) -> np.ndarray:
    t = np.asarray(traffic, float)
    if t.shape != (routes.n, routes.n):
        raise NocError(f"{name} must be a {routes.n} x {routes.n} matrix, got shape {t.shape}")
    if (t < 0).any() or not np.isfinite(t).all():
        raise NocError(f"{name} must be finite and >= 0")
    return t


def zero_load_latency_s(routes: Routes, packet_bytes: float, endpoint_latency_s: float = 0.0,
                        terminal_bw_Bps: float | None = None) -> np.ndarray:
    """[n, n] zero-load latency of one packet per pair (inf where unreachable)."""
    if packet_bytes < 0:
        raise NocError(f"packet size must be >= 0 bytes, got {packet_bytes}")
    t = routes.topology
    hop_s = routes.incidence @ t.link_hop_latency_s
    empty = terminal_bw_Bps if terminal_bw_Bps else np.inf
    bw = _route_min(routes.route_ptr, routes.route_links, t.link_bw_Bps, empty)
    if terminal_bw_Bps:
        bw = np.minimum(bw, terminal_bw_Bps)
    serial = np.where(np.isfinite(bw), packet_bytes / bw, 0.0)
    lat = (hop_s + serial + endpoint_latency_s).reshape(t.n, t.n)
    return np.where(routes.reachable, lat, np.inf)


@dataclass(frozen=True)
class LoadedLatency:
    """Latency of a traffic matrix on a routed topology (SI units)."""

    pair_latency_s: np.ndarray      # [n, n] zero-load + waits, inf if unreachable or saturated
    average_latency_s: float        # mean over the traffic's bytes (inf when any used channel saturates)
    zero_load_average_s: float
    link_utilisation: np.ndarray    # [L]
    bottleneck_link: int
    max_utilisation: float

    @property
    def saturated(self) -> bool:
        return self.max_utilisation >= 1.0


def _check_efficiency(eta: float) -> float:
    if not 0.0 < eta <= 1.0:
        raise NocError(f"switch efficiency must be in (0, 1], got {eta}")
    return float(eta)


def loaded_latency(routes: Routes, traffic_Bps: np.ndarray, packet_bytes: float, endpoint_latency_s: float = 0.0,
                   terminal_bw_Bps: float | None = None, switch_efficiency: float = 1.0,
                   bernoulli_sources: bool = False) -> LoadedLatency:
    """Average and per-pair latency of packets of ``packet_bytes`` under a traffic matrix in bytes/s
    (router allocation and sources: module docstring)."""
    t = routes.topology
    traffic = _check_traffic(routes, traffic_Bps, "traffic")
    eta = _check_efficiency(switch_efficiency)
    t0 = zero_load_latency_s(routes, packet_bytes, endpoint_latency_s, terminal_bw_Bps)
    rho = routes.link_loads(traffic) / (eta * t.link_bw_Bps)
    wait = md1_wait_array(rho, packet_bytes / t.link_bw_Bps)
    pair_wait = (routes.incidence @ wait).reshape(t.n, t.n)     # inf only on routes through a full channel
    lat = t0 + pair_wait
    rho_max = float(rho.max()) if len(rho) else 0.0
    if terminal_bw_Bps:
        service = packet_bytes / terminal_bw_Bps
        rho_inj, rho_ej = traffic.sum(1) / (eta * terminal_bw_Bps), traffic.sum(0) / (eta * terminal_bw_Bps)
        inj = md1_wait_array(rho_inj, service)
        if bernoulli_sources:
            inj = np.where(rho_inj < 1.0, 0.0, np.inf)
        ej = md1_wait_array(rho_ej, service)
        lat = lat + inj[:, None] + ej[None, :]
        rho_max = max(rho_max, float(rho_inj.max()), float(rho_ej.max()))
    used = traffic > 0
    total = traffic[used].sum()
    if total > 0:
        average = float((traffic[used] * lat[used]).sum() / total) if np.isfinite(lat[used]).all() else np.inf
        zero = float((traffic[used] * t0[used]).sum() / total) if np.isfinite(t0[used]).all() else np.inf
    else:
        average = zero = 0.0
    return LoadedLatency(pair_latency_s=lat, average_latency_s=average, zero_load_average_s=zero,
                         link_utilisation=rho, bottleneck_link=int(np.argmax(rho)) if len(rho) else -1,
                         max_utilisation=rho_max)


@dataclass(frozen=True)
class Saturation:
    """Bottleneck-channel saturation of a traffic pattern."""

    injection_Bps: float            # per-node injection rate lambda* at which the busiest channel is full
    aggregate_Bps: float            # total delivered bandwidth at lambda*
    bottleneck_link: int            # -1 when a terminal channel is the bottleneck
    served_fraction: float          # share of the pattern's traffic the routes can deliver


def saturation(routes: Routes, pattern: np.ndarray, terminal_bw_Bps: float | None = None,
               switch_efficiency: float = 1.0) -> Saturation:
    """Saturation of ``lambda x pattern`` (row i: share of node i's injection sent to each node), eta
    (``switch_efficiency``) times the bottleneck-channel bound.

    Unreachable pairs are dropped (they carry nothing), as a fault-aware study counts throughput.
    """
    t = routes.topology
    p = _check_traffic(routes, pattern, "traffic pattern")
    eta = _check_efficiency(switch_efficiency)
    served = np.where(routes.reachable, p, 0.0)
    per_unit = routes.link_loads(served) / t.link_bw_Bps
    worst = float(per_unit.max()) if len(per_unit) else 0.0
    link = int(np.argmax(per_unit)) if len(per_unit) else -1
    if terminal_bw_Bps:
        term = max(float(served.sum(1).max()), float(served.sum(0).max())) / terminal_bw_Bps
        if term > worst:
            worst, link = term, -1
    lam = eta / worst if worst > 0 else np.inf
    total = p.sum()
    return Saturation(injection_Bps=lam, aggregate_Bps=lam * served.sum(), bottleneck_link=link,
                      served_fraction=float(served.sum() / total) if total > 0 else 1.0)
