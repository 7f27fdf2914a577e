"""Collectives between packages in the alpha-beta model, per level of the system (dse.system.hardware).

A step costs ``alpha + bytes / bandwidth`` on its level (Hockney's model as used by Thakur,
Rabenseifner & Gropp, "Optimization of Collective Communication Operations in MPICH", IJHPCA 2005):

* send of n bytes: ``alpha + n / b``;
* ring all-reduce over p packages: reduce-scatter then all-gather, ``2 (p - 1) (alpha + n / (p b))``;
* binomial-tree all-reduce: reduce then broadcast, ``2 ceil(log2 p) (alpha + n / b)`` (short messages);
* ring reduce-scatter and all-gather: ``(p - 1) (alpha + n / (p b))`` each;
* hierarchical all-reduce over m nodes of k packages: reduce-scatter in the node, ring all-reduce of
  each package's n / k shard across nodes (the k rails at once), all-gather in the node;
* all-to-all (direct, all peers at once): ``alpha + max(bytes sent, bytes received) / b`` per level, the
  levels in parallel; the busiest package sets the time.
* on a torus of k_1 x ... x k_d packages (TPU ICI, NeuronLink): the all-reduce runs a bidirectional ring
  in each dimension in turn, reduce-scatter along dimensions 1..d then all-gather back, each ring's data
  split in halves going opposite ways (2 b per package): with n_1 = n and n_(i+1) = n_i / k_i,
  ``sum_i 2 (k_i - 1) (alpha + n_i / (2 k_i b))`` (the multidimensional ring all-reduce of Patarasuk &
  Yuan, JPDC 2009, per dimension; as Mikami et al., "Massively distributed SGD: ImageNet/ResNet-50 training
  in a flash", 2018, run it on a 2D torus); reduce-scatter and all-gather each half of it.
  `allreduce_s` and `reduce_scatter_s` pick it when the level is a torus of exactly p packages, the ring
  otherwise.

Ring and tree steps use the pair bandwidth (one peer at a time); the all-to-all uses the package's
injection bandwidth. NCCL reports a collective's speed as bus bandwidth, the algorithm bandwidth n / t
times 2 (p - 1) / p for an all-reduce and (p - 1) / p for reduce-scatter, all-gather and all-to-all
(NCCL tests, doc/PERFORMANCE.md): `bus_bandwidth_Bps`. A ring all-reduce with alpha = 0 runs at a bus
bandwidth equal to the link's.
"""
from __future__ import annotations

import math

from .hardware import Level

BUS_FACTOR = {"all-reduce": lambda p: 2.0 * (p - 1) / p, "reduce-scatter": lambda p: (p - 1) / p,
              "all-gather": lambda p: (p - 1) / p, "all-to-all": lambda p: (p - 1) / p,
              "broadcast": lambda p: 1.0, "reduce": lambda p: 1.0, "send": lambda p: 1.0}


def send_s(nbytes: float, level: Level) -> float:
    return level.alpha_s + nbytes / level.pair_bandwidth_Bps if nbytes > 0 else 0.0


def ring_allreduce_s(p: int, nbytes: float, level: Level) -> float:
    if p < 2 or nbytes <= 0:
        return 0.0
    return 2 * (p - 1) * (level.alpha_s + nbytes / (p * level.pair_bandwidth_Bps))


def ring_reduce_scatter_s(p: int, nbytes: float, level: Level) -> float:
    """Ring reduce-scatter of n bytes (each package ends with n / p reduced); the all-gather costs the same."""
    if p < 2 or nbytes <= 0:
        return 0.0
    return (p - 1) * (level.alpha_s + nbytes / (p * level.pair_bandwidth_Bps))


ring_all_gather_s = ring_reduce_scatter_s


def torus_reduce_scatter_s(dims, nbytes: float, level: Level) -> float:
    """Reduce-scatter of n bytes over a torus of ``dims`` packages, dimension by dimension (module
    docstring); the all-gather costs the same."""
    t, n = 0.0, float(nbytes)
    if n <= 0:
        return 0.0
    for k in dims:
        if k > 1:
            t += (k - 1) * (level.alpha_s + n / (2.0 * k * level.pair_bandwidth_Bps))
            n /= k
    return t


def torus_allreduce_s(dims, nbytes: float, level: Level) -> float:
    """All-reduce of n bytes over a torus of ``dims`` packages: reduce-scatter then all-gather."""
    return 2.0 * torus_reduce_scatter_s(dims, nbytes, level)


def _on_torus(p: int, level: Level) -> bool:
    return bool(level.torus) and math.prod(level.torus) == p


def allreduce_s(p: int, nbytes: float, level: Level) -> float:
    """All-reduce over p packages of one level: per torus dimension where the level is a torus of p
    packages, else the ring (module docstring)."""
    return torus_allreduce_s(level.torus, nbytes, level) if _on_torus(p, level) else ring_allreduce_s(p, nbytes, level)


def reduce_scatter_s(p: int, nbytes: float, level: Level) -> float:
    """Reduce-scatter (or all-gather) over p packages of one level, as `allreduce_s` chooses."""
    if _on_torus(p, level):
        return torus_reduce_scatter_s(level.torus, nbytes, level)
    return ring_reduce_scatter_s(p, nbytes, level)


def tree_allreduce_s(p: int, nbytes: float, level: Level) -> float:
    if p < 2 or nbytes <= 0:
        return 0.0
    return 2 * math.ceil(math.log2(p)) * (level.alpha_s + nbytes / level.pair_bandwidth_Bps)


def hierarchical_allreduce_s(k: int, m: int, nbytes: float, fabric: Level, network: Level | None) -> float:
    """All-reduce over m nodes of k packages: reduce-scatter in the node, all-reduce across nodes, all-gather
    in the node (NCCL's and Thakur's hierarchical scheme)."""
    inside = 2.0 * reduce_scatter_s(k, nbytes, fabric)
    if m < 2:
        return inside
    if network is None:
        raise ValueError("an all-reduce across nodes needs a network level")
    return inside + ring_allreduce_s(m, nbytes / k, network)


def all_to_all_s(sent: float, received: float, level: Level) -> float:
    """One package's share of a direct all-to-all on one level."""
    heavier = max(sent, received)
    return level.alpha_s + heavier / level.bandwidth_Bps if heavier > 0 else 0.0


def bus_bandwidth_Bps(collective: str, p: int, nbytes: float, time_s: float) -> float:
    """NCCL's bus bandwidth of a collective of n bytes over p packages that took ``time_s``."""
    return nbytes / time_s * BUS_FACTOR[collective](p)
