"""Collective operations as traffic on a routed topology.

A collective is a list of phases; a phase is a traffic matrix (bytes from chiplet i to chiplet j, all
sent at once) repeated ``repeat`` times one after another. A phase lasts as long as its slowest flow's
path (sum of hop latencies + endpoint latency) plus the serialisation of the busiest channel
(its bytes / bandwidth): the alpha-beta model with link contention (Thakur, Rabenseifner & Gropp,
IJHPCA 2005; Patarasuk & Yuan, JPDC 2009 for the ring all-reduce). Participants are listed in ring /
tree order.

* all-to-all: every participant sends ``bytes_per_pair`` to every other one (MoE dispatch/combine).
* ring all-reduce of D bytes over p participants: reduce-scatter then all-gather, 2(p - 1) steps in
  which each sends D/p to its successor; on a ring this is 2(p - 1)(alpha + D / (p b)).
* tree all-reduce: reduce up a binary tree (heap order, parent of i is (i - 1) // 2) one level per
  phase, then broadcast back down: 2 x depth phases of D bytes per tree edge.
* broadcast: binomial tree, ceil(log2 p) phases, each holder sends D to one new participant.
* gather: every participant sends its D bytes to the root in one phase.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import NocError
from .routing import Routes


@dataclass(frozen=True)
class Phase:
    traffic: np.ndarray     # [n, n] bytes
    repeat: int = 1


@dataclass(frozen=True)
class Collective:
    name: str
    phases: list[Phase] = field(default_factory=list)

    @property
    def total_bytes(self) -> float:
        return float(sum(p.traffic.sum() * p.repeat for p in self.phases))


def _members(participants, n: int) -> list[int]:
    members = [int(p) for p in participants]
    if len(set(members)) != len(members):
        raise NocError(f"collective participants must be distinct, got {members}")
    if any(not (0 <= p < n) for p in members):
        raise NocError(f"collective participants must be chiplets 0..{n - 1}, got {members}")
    return members


def all_to_all(participants, bytes_per_pair: float, n: int) -> Collective:
    m = _members(participants, n)
    t = np.zeros((n, n))
    t[np.ix_(m, m)] = bytes_per_pair
    t[m, m] = 0.0
    return Collective("all-to-all", [Phase(t)])


def ring_allreduce(participants, message_bytes: float, n: int) -> Collective:
    m = _members(participants, n)
    p = len(m)
    if p < 2:
        return Collective("ring all-reduce", [])
    t = np.zeros((n, n))
    for i in range(p):
        t[m[i], m[(i + 1) % p]] += message_bytes / p
    return Collective("ring all-reduce", [Phase(t, 2 * (p - 1))])


def tree_allreduce(participants, message_bytes: float, n: int) -> Collective:
    m = _members(participants, n)
    p = len(m)
    depth = int(np.floor(np.log2(p))) if p > 1 else 0
    level = np.floor(np.log2(np.arange(p) + 1)).astype(int)
    up, down = [], []
    for d in range(depth, 0, -1):
        t = np.zeros((n, n))
        for i in np.flatnonzero(level == d):
            t[m[i], m[(i - 1) // 2]] += message_bytes
        up.append(Phase(t))
        down.insert(0, Phase(t.T.copy()))
    return Collective("tree all-reduce", up + down)


def broadcast(participants, message_bytes: float, n: int, root: int = 0) -> Collective:
    """Binomial-tree broadcast from ``participants[root]``."""
    m = _members(participants, n)
    order = m[root:] + m[:root]
    phases, have = [], 1
    while have < len(order):
        t = np.zeros((n, n))
        for i in range(have):
            if i + have < len(order):
                t[order[i], order[i + have]] += message_bytes
        phases.append(Phase(t))
        have *= 2
    return Collective("broadcast", phases)


def gather(participants, message_bytes: float, n: int, root: int = 0) -> Collective:
    m = _members(participants, n)
    t = np.zeros((n, n))
    for i, node in enumerate(m):
        if i != root:
            t[node, m[root]] += message_bytes
    return Collective("gather", [Phase(t)])


def phase_time_s(routes: Routes, traffic: np.ndarray, endpoint_latency_s: float = 0.0) -> float:
    """Slowest flow's path latency plus the busiest channel's serialisation (inf if a flow has no route)."""
    t = routes.topology
    used = traffic > 0
    np.fill_diagonal(used, False)
    if not used.any():
        return 0.0
    if not routes.reachable[used].all():
        return float("inf")
    path_s = (routes.incidence @ t.link_hop_latency_s).reshape(t.n, t.n)
    serial = routes.link_loads(traffic) / t.link_bw_Bps
    return float(path_s[used].max() + endpoint_latency_s + (serial.max() if len(serial) else 0.0))


def collective_time_s(routes: Routes, collective: Collective, endpoint_latency_s: float = 0.0) -> float:
    return float(sum(p.repeat * phase_time_s(routes, p.traffic, endpoint_latency_s) for p in collective.phases))


def collective_energy_j(routes: Routes, collective: Collective) -> float:
    """Bytes x (link + router) energy per hop over every channel the collective crosses."""
    e = routes.topology.link_hop_energy_j_per_byte
    return float(sum(p.repeat * routes.link_loads(p.traffic) @ e for p in collective.phases))
