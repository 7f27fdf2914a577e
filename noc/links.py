"""Die-to-die link technologies and the router on each chiplet, from ``noc/data/links.yaml``."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import yaml

from .errors import NocError


@dataclass(frozen=True)
class LinkTech:
    """One link technology (per direction) plus the router each hop crosses. SI units.

    ``phy_area_mm2`` is the PHY on each of the two chiplets a link joins. ``sync_latency_s`` is the
    software and synchronisation time of one step of a collective over the link (a ring all-reduce over
    p devices takes 2(p - 1) steps; Thakur, Rabenseifner & Gropp, IJHPCA 2005): 0 for die-to-die links a
    package's hardware synchronises, microseconds for NCCL over NVLink (fitted to nccl-tests, see
    noc/data/links.yaml).
    """

    name: str
    bandwidth_Bps: float
    latency_s: float
    energy_j_per_byte: float
    phy_area_mm2: float
    bond_yield: float
    router_latency_s: float
    router_energy_j_per_byte: float
    sync_latency_s: float = 0.0
    packaging: str = "organic-substrate"    # what the dies sit on (arch.packaging): cost model

    @property
    def hop_latency_s(self) -> float:
        return self.latency_s + self.router_latency_s

    @property
    def hop_energy_j_per_byte(self) -> float:
        return self.energy_j_per_byte + self.router_energy_j_per_byte


@lru_cache(maxsize=1)
def _table() -> dict:
    return yaml.safe_load((resources.files("noc") / "data" / "links.yaml").read_text())


def link_kinds() -> list[str]:
    """Technology names in file order; the first is the default of a package."""
    return [k for k in _table() if k != "router"]


def router_freq_hz() -> float:
    """Clock of the router on every chiplet (``router.freq_ghz`` of noc/data/links.yaml), in Hz."""
    return float(_table()["router"]["freq_ghz"]) * 1e9


def link_tech(name: str) -> LinkTech:
    table = _table()
    if name not in link_kinds():
        raise NocError(f"unknown link technology {name!r}; allowed: {', '.join(link_kinds())}")
    link, router = table[name], table["router"]
    cycle = 1e-9 / router["freq_ghz"]
    return LinkTech(
        name=name, bandwidth_Bps=link["bandwidth_gbps"] * 1e9, latency_s=link["latency_ns"] * 1e-9,
        energy_j_per_byte=link["energy_pj_per_bit"] * 8e-12, phy_area_mm2=link["phy_area_mm2"],
        bond_yield=link["bond_yield"],
        router_latency_s=router["latency_cycles"] * cycle,
        router_energy_j_per_byte=router["energy_pj_per_bit"] * 8e-12,
        sync_latency_s=link.get("sync_latency_us", 0.0) * 1e-6, packaging=link["packaging"])


def cycle_link(router_cycles: float, link_cycles: float, flit_bytes: float = 16.0, freq_hz: float = 1e9) -> LinkTech:
    """An abstract network in cycles and flits (as BookSim counts): one flit per cycle per channel.

    Results in SI units convert back with ``cycles = seconds x freq_hz`` and
    ``flits/cycle = bytes/s / (flit_bytes x freq_hz)``.
    """
    if router_cycles < 0 or link_cycles < 0:
        raise NocError(f"router and link latency must be >= 0 cycles, got {router_cycles} and {link_cycles}")
    return LinkTech(name="cycles", bandwidth_Bps=flit_bytes * freq_hz, latency_s=link_cycles / freq_hz,
                    energy_j_per_byte=0.0, phy_area_mm2=0.0, bond_yield=1.0,
                    router_latency_s=router_cycles / freq_hz, router_energy_j_per_byte=0.0)
