"""A background move contending with serving's own traffic on the package network (docs/runtime.md,
``migration.mode: background``).

While the old mapping keeps serving, its step sends ``B_l`` bytes over each directed link l of the package
network every step of ``T`` seconds (dse.model.traffic: the placement's hand-offs and all-reduces, routed
as the evaluator routes; T the evaluator's step latency of the serving mapping at the window's popularity,
failed chiplets re-mapped), a rate ``r_l = B_l / T``. A copy moved from chiplet s to chiplet d over the
links of its route gets what serving leaves on the busiest of them, ``min_l (bw_l - r_l)``, and at least
the policy's ``share`` of the link (``migration.share``: the least bandwidth a move is given), capped by
the two memories' bandwidths, all times ``bandwidth_scale`` (dse.runtime.migration's bandwidths); a copy
reloaded from DDR or the host crosses no package link here. Where the move takes more than serving
leaves, serving's traffic on that link gets ``bw_l - b`` and its step is at least ``B_l / (bw_l - b)``:
serving's throughput while the move runs is ``min(1, (bw_l - b) / r_l)`` at the worst link any copy
crosses (a bound: the link serialises those bytes). Copies into different chiplets run in parallel, each
priced alone; into one chiplet, one after the other (dse.runtime.migration). Energy is the move's
(bytes x (memories + hops x hop energy)), unchanged. HBM contention (serving's weight reads against the
move's) is not modelled."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..model.contract import DecodedDesigns
from ..model.metrics import METRICS
from ..model.traffic import chiplet_traffic, link_loads, package_routes
from .link_energy import design_of
from .migration import MigrationModel, MoveCost

LATENCY = METRICS.index("latency_s")


class LinkTraffic(NamedTuple):
    """Serving's bytes/s on every directed link of one design (``rate_Bps``), each link's ``bandwidth_Bps``
    and the package's ``routes`` (noc.Routes: the links a copy crosses)."""

    rate_Bps: np.ndarray
    bandwidth_Bps: np.ndarray
    routes: object

    def crossed(self, source: int, dest: int) -> np.ndarray:
        """Channel ids of the route from ``source`` to ``dest``."""
        return self.routes.links(source, dest)


def serving_traffic(ev, package, d: DecodedDesigns) -> LinkTraffic:
    """`LinkTraffic` of the one design of ``d`` (package evaluator ``ev``, the study's `PackageSpec`):
    its step's link bytes (dse.model.traffic) over its step latency (the evaluator's)."""
    design = design_of(ev, d, 0)
    step_s = float(ev.decoded_metrics(d, with_faults=False)[0, LATENCY])
    loads = link_loads(design, chiplet_traffic(design, ev.tables), package)
    _, routes = package_routes(design, package)
    return LinkTraffic(loads["bytes_per_step"].to_numpy(float) / step_s, loads["bandwidth_Bps"].to_numpy(float),
                       routes)


def contended_cost(mig: MigrationModel, unit: np.ndarray, dest: np.ndarray, sources: np.ndarray,
                   failed: frozenset[int], traffic: LinkTraffic, share: float) -> MoveCost:
    """Moves (as `MigrationModel.cost_arrays` takes them: unit indices, destinations, -1-padded sources;
    the same source, the nearest live copy) priced against serving's ``traffic`` (module docstring): time
    at the contended bandwidths, energy as `MigrationModel.cost_arrays`, and serving's throughput share
    while they run."""
    if not len(unit):
        return mig.cost_arrays(unit, dest, sources, failed)
    per_dest: dict[int, float] = {}
    total_b = total_e = 0.0
    keep = 1.0
    hops, capacity = mig.hops, mig.tables.unit_capacity_bytes
    for u, d, row in zip(unit.tolist(), dest.tolist(), sources.tolist()):
        nbytes = float(capacity[u])
        live = [s for s in row if s >= 0 and s not in failed and s != d]
        source = min(live, key=lambda s: hops[s][d]) if live else None
        _, e = mig.copy_cost(1.0, d, source)
        bw_d = mig.memory(d)[0]
        bw_s = mig.memory(source)[0] if source is not None else mig.ddr()[0]
        bw = min(bw_s, bw_d)
        links = traffic.crossed(source, d) if source is not None else np.zeros(0, np.int64)
        if len(links):
            cap, rate = traffic.bandwidth_Bps[links], traffic.rate_Bps[links]
            taken = min(bw, max(float(np.min(cap - rate)), share * float(np.min(cap))))
            taken = min(taken * mig.scale, float(np.min(cap)))
            left = cap - taken
            with np.errstate(divide="ignore", invalid="ignore"):
                keep = min(keep, float(np.min(np.where(rate > 0, np.minimum(1.0, left / rate), 1.0))))
        else:
            taken = bw * mig.scale
        per_dest[d] = per_dest.get(d, 0.0) + nbytes / taken
        total_b += nbytes
        total_e += e * nbytes
    return MoveCost(total_b, max(per_dest.values()), total_e, len(unit), keep)
