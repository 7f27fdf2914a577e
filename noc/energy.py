"""Energy of traffic on a routed topology and die-to-die PHY area, by link technology.

Each byte pays, per hop, the link's energy per bit (both PHYs) and the router's energy per bit it
enters (noc/data/links.yaml: UCIe / LIPINCON / IFOP / SerDes figures; Gemini HPCA'24 for the router).
"""
from __future__ import annotations

import numpy as np

from .routing import Routes
from .topology import Topology


def traffic_energy_j(routes: Routes, traffic_bytes: np.ndarray) -> float:
    """Energy of moving a traffic matrix (bytes) over its routes."""
    return float(routes.link_loads(traffic_bytes) @ routes.topology.link_hop_energy_j_per_byte)


def energy_per_bit_j(routes: Routes) -> np.ndarray:
    """[n, n] energy of one bit from src to dst along its route."""
    t = routes.topology
    return (routes.incidence @ t.link_hop_energy_j_per_byte).reshape(t.n, t.n) / 8.0


def phy_area_mm2(topology: Topology) -> np.ndarray:
    """[n] die-to-die PHY area on each chiplet (one PHY per link it terminates)."""
    return topology.phy_area_mm2()
