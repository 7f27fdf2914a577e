"""The energy a failed package link adds to a step: the step's chiplet-to-chiplet traffic re-routed around
it (docs/runtime.md).

The evaluator prices a byte from chiplet a to chiplet b at the hops of its route times each hop's link and
router energy (dse.model.routes: ``pair_energy``; noc.energy.traffic_energy_j), and its link-failure
report gives the latency on the re-routed tables only. Here the same step's traffic (dse.model.traffic.
chiplet_traffic: the hand-offs and all-reduces of the placement, bytes per step) is priced on the intact
routes and on the routes after the failed links (noc.fault_routes: intact routes kept, broken ones detour
by minimum hops, as the evaluator's tables): the difference, over the step's tokens, is the energy per
token the detours add (longer routes, more hops, each at the link's pJ/bit)."""
from __future__ import annotations

import numpy as np

import noc

from ..model.contract import DecodedDesigns
from ..model.records import design_records
from ..model.traffic import chiplet_traffic, package_routes


def reroute_energy_j(routes: noc.Routes, traffic: np.ndarray, links) -> float:
    """Energy (J) that ``traffic`` (bytes, chiplet x chiplet) costs more on the routes after ``links``
    ((a, b) pairs) fail than on ``routes``; pairs left unreachable carry nothing (their bytes are lost, not
    priced)."""
    if not links:
        return 0.0
    after = noc.fault_routes(routes, failed_links=sorted(links))
    kept = np.where(after.reachable, traffic, 0.0)
    return noc.traffic_energy_j(after, kept) - noc.traffic_energy_j(routes, kept)


def link_energy_per_token(ev, package, d: DecodedDesigns, j: int, links, tokens_per_step: float) -> float:
    """Energy per token (J) the failed ``links`` add to design ``j`` of ``d`` (module docstring);
    ``package``: the study's `PackageSpec` (its network and routing)."""
    design = design_records(d, ev.tables, ev.link, ev.space.mapping, ev.topology, [j])[0]
    _, routes = package_routes(design, package)
    return reroute_energy_j(routes, chiplet_traffic(design, ev.tables), links) / tokens_per_step
