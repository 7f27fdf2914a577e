"""Package network: topologies, routing, link loads, latency under load, energy, collectives and faults.

Typical use::

    t = noc.mesh(4, 4, "ucie-advanced")          # or noc.torus, noc.from_links(n, [(a, b, tech), ...])
    r = noc.route(t, "xy")                        # CSR route table; "shortest" for any topology
    loads = r.link_loads(traffic_bytes)           # one sparse product
    lat = noc.loaded_latency(r, traffic_Bps, packet_bytes=64)
    sat = noc.saturation(r, noc.traffic.uniform(t.n))
    rep = noc.analyse_faults(r, pattern, failed_links=[(0, 1)])
"""
from . import traffic
from .bank import RouteBank, bank_graph, bank_links, bank_pairs, bank_routes, max_serialisation_s, route_bank
from .bisection import Bisection, bisection
from .collectives import (Collective, Phase, all_to_all, broadcast, collective_energy_j, collective_time_s, gather,
                          phase_time_s, ring_allreduce, tree_allreduce)
from .energy import energy_per_bit_j, phy_area_mm2, traffic_energy_j
from .errors import NocError
from .faults import (FaultReport, MonteCarloFaults, analyse_faults, fault_routes, monte_carlo_faults,
                     reroute_table)
from .latency import (ROUTERS, SWITCH_EFFICIENCY_ISLIP, LoadedLatency, Saturation, loaded_latency, md1_wait,
                      router_efficiency, saturation, zero_load_latency_s)
from .links import LinkTech, cycle_link, link_kinds, link_tech, router_freq_hz
from .mesh import add_xy_route_load, average_hops_uniform, bisection_links, xy_hops, xy_link_loads
from .routing import ALGORITHMS, Routes, add_route_load, route, route_hops, route_link_loads
from .topology import KINDS, Topology, build, from_links, from_networkx, mesh, torus

__all__ = [
    "NocError", "LinkTech", "link_kinds", "link_tech", "cycle_link", "router_freq_hz",
    "Topology", "KINDS", "mesh", "torus", "from_links", "from_networkx", "build",
    "Routes", "ALGORITHMS", "route", "add_route_load", "route_hops", "route_link_loads",
    "RouteBank", "route_bank", "bank_routes", "bank_pairs", "bank_links", "bank_graph", "max_serialisation_s",
    "LoadedLatency", "Saturation", "SWITCH_EFFICIENCY_ISLIP", "ROUTERS", "router_efficiency", "zero_load_latency_s",
    "loaded_latency", "saturation", "md1_wait",
    "Bisection", "bisection", "traffic",
    "Collective", "Phase", "all_to_all", "ring_allreduce", "tree_allreduce", "broadcast", "gather",
    "phase_time_s", "collective_time_s", "collective_energy_j",
    "traffic_energy_j", "energy_per_bit_j", "phy_area_mm2",
    "FaultReport", "MonteCarloFaults", "fault_routes", "analyse_faults", "monte_carlo_faults", "reroute_table",
    "xy_hops", "add_xy_route_load", "xy_link_loads", "average_hops_uniform", "bisection_links",
]
