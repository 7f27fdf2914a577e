"""The hardware around the packages: the scale-up fabric of a node, the scale-out network between nodes,
and system presets (``dse/system/data/systems.yaml``, every figure with its source).

Each level is reduced to what the alpha-beta cost model of dse.system.collectives needs per package
(Thakur, Rabenseifner & Gropp, IJHPCA 2005; the NCCL convention of a per-device bandwidth):

* ``alpha_s``: time of one step of a collective or of one send: wire latency (links, NICs and the
  switches crossed) plus the software step (``sync_latency``);
* ``bandwidth_Bps``: bytes per second one package injects into the level (per direction);
* ``pair_bandwidth_Bps``: what two packages exchange when only they talk (below ``bandwidth_Bps`` for a
  full mesh of point-to-point links, where each pair has one link);
* ``energy_j_per_byte``: dynamic energy of a byte crossing the level.

Fabric: a package link technology (noc/data/links.yaml) used as the scale-up link of every package;
switched (NVSwitch class: one link's rate to any peer), a full mesh (``links_per_peer`` links to each
peer: Gaudi's RoCE ports) or a torus of direct links (``torus``: its dimensions, TPU ICI and Trainium's
NeuronLink). On a torus a package injects over 2 links per dimension, but uniform traffic (an all-to-all)
loads the bisection: on a k-ary n-cube with channels of b per direction the busiest channel carries k / 8
of each node's rate, so a node sustains ``min(2 n b, 8 b / k)`` with k the longest dimension (Dally &
Towles, "Principles and Practices of Interconnection Networks", 2004, section 3.3: bisection of a torus,
2 k^(n-1) channels each way); its pair bandwidth is one link's. Network: each
package's share of its node's NICs (``nics_per_node / packages_per_node`` NICs each); a rail-optimised
network joins same-rank NICs of every node through one leaf switch (one switch crossed); a fat tree of
two levels crosses three switches between leaves (one when the nodes share a leaf).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import yaml

import noc

from ..errors import StudyError
from ..study.schema.system import SystemSpec

#: packages per node when neither the study nor a preset says: the 8 GPUs of an NVIDIA HGX baseboard
#: (HGX A100 / H100 8-GPU, the DGX nodes of systems.yaml)
DEFAULT_PACKAGES_PER_NODE = 8


@lru_cache(maxsize=1)
def systems_table() -> dict:
    return yaml.safe_load((resources.files("dse.system") / "data" / "systems.yaml").read_text())


def fabric_names() -> list[str]:
    return list(systems_table()["fabrics"])


def network_names() -> list[str]:
    return list(systems_table()["networks"])


def preset_names() -> list[str]:
    return list(systems_table()["presets"])


@dataclass(frozen=True)
class Level:
    """One level of the system's network in alpha-beta terms (see module docstring). SI units."""

    name: str
    alpha_s: float
    bandwidth_Bps: float
    pair_bandwidth_Bps: float
    energy_j_per_byte: float
    hops: int = 1                 # links a byte crosses (for byte-hop counts)
    sync_s: float = 0.0           # the software part of alpha_s (the rest is wire, NICs and switches)
    switched: bool = True         # every package reaches every other through a switch (else a full mesh)
    torus: tuple = ()             # dimensions of a torus of direct links (empty: switched or a full mesh)

    def __post_init__(self):
        if not (self.bandwidth_Bps > 0 and self.pair_bandwidth_Bps > 0 and self.alpha_s >= 0):
            raise StudyError(f"level {self.name!r} needs a bandwidth > 0 and a latency >= 0", key="system")


def default_packages_per_node(fabric: str) -> int:
    """Packages of a node when neither the study nor a preset says: a torus fabric's size, else
    `DEFAULT_PACKAGES_PER_NODE`."""
    torus = systems_table()["fabrics"].get(fabric, {}).get("torus", ())
    return math.prod(torus) if torus else DEFAULT_PACKAGES_PER_NODE


def fabric_level(name: str, packages_per_node: int) -> Level:
    """The scale-up level: a fabric of systems.yaml or a package link technology (switched)."""
    fabrics = systems_table()["fabrics"]
    torus: tuple = ()
    per_peer = 1
    if name in fabrics:
        f = fabrics[name]
        link_name, switched = f["link"], bool(f.get("switched", False))
        torus, per_peer = tuple(int(k) for k in f.get("torus", ())), int(f.get("links_per_peer", 1))
    elif name in noc.link_kinds():
        link_name, switched = name, True
    else:
        raise StudyError(f"unknown fabric {name!r}; allowed: {', '.join(fabrics)} or a link technology "
                         f"({', '.join(noc.link_kinds())})", key="system.fabric")
    link = noc.link_tech(link_name)
    pair = link.bandwidth_Bps * per_peer
    hops = 1
    if torus:
        if math.prod(torus) != packages_per_node:
            raise StudyError(f"fabric {name!r} is a {' x '.join(map(str, torus))} torus: packages_per_node must "
                             f"be {math.prod(torus)}, got {packages_per_node}", key="system.packages_per_node")
        per_package = min(2 * len(torus) * link.bandwidth_Bps, 8.0 * link.bandwidth_Bps / max(torus))
        hops = max(1, round(sum(k / 4 for k in torus)))   # mean hops of uniform traffic: k / 4 a dimension
    else:
        per_package = pair if switched else pair * max(packages_per_node - 1, 1)
    return Level(name=name, alpha_s=link.hop_latency_s + link.sync_latency_s, bandwidth_Bps=per_package,
                 pair_bandwidth_Bps=pair, energy_j_per_byte=link.hop_energy_j_per_byte * hops, hops=hops,
                 sync_s=link.sync_latency_s, switched=switched, torus=torus)


def switches_crossed(topology: str, nodes: int, radix: int) -> int:
    """Switches between two NICs of different nodes: rail-optimised one (the rail's leaf), a fat tree one
    when every node hangs off one leaf (radix / 2 down-ports), else three (leaf, spine, leaf)."""
    if topology == "rail-optimised" or nodes <= radix // 2:
        return 1
    return 3


def network_level(name: str, nics_per_node: int, packages_per_node: int, topology: str, nodes: int) -> Level:
    """The scale-out level as one package sees it: its share of the node's NICs."""
    networks = systems_table()["networks"]
    if name not in networks:
        raise StudyError(f"unknown network {name!r}; allowed: {', '.join(networks)}", key="system.network")
    if nics_per_node < 1:
        raise StudyError("a system of several nodes needs NICs: nics_per_node >= 1", key="system.nics_per_node")
    f = networks[name]
    switches = switches_crossed(topology, nodes, int(f["switch_radix"]))
    nic_Bps = f["bandwidth_gbps"] * 1e9
    share = nics_per_node / packages_per_node
    alpha = f["latency_ns"] * 1e-9 + switches * f["switch_latency_ns"] * 1e-9 + f["sync_latency_us"] * 1e-6
    bandwidth = nic_Bps * share
    return Level(name=name, alpha_s=alpha, bandwidth_Bps=bandwidth, pair_bandwidth_Bps=bandwidth,
                 energy_j_per_byte=(switches + 1) * f["energy_pj_per_bit"] * 8e-12, hops=switches + 1,
                 sync_s=f["sync_latency_us"] * 1e-6)


@dataclass(frozen=True)
class SystemHardware:
    """A study's system section resolved against its preset and the data files."""

    packages_per_node: int
    fabric: str
    network: str | None
    nics_per_node: int
    network_topology: str
    preset: str | None = None

    @classmethod
    def from_spec(cls, spec: SystemSpec) -> "SystemHardware":
        base: dict = {}
        if spec.preset is not None:
            presets = systems_table()["presets"]
            if spec.preset not in presets:
                raise StudyError(f"unknown system preset {spec.preset!r}; allowed: {', '.join(presets)}",
                                 key="system.preset")
            base = {k: v for k, v in presets[spec.preset].items() if k != "reference_package"}
        given = {k: getattr(spec, k) for k in ("packages_per_node", "fabric", "network", "nics_per_node",
                                               "network_topology") if getattr(spec, k) is not None}
        merged = {**base, **given}
        if "fabric" not in merged:
            raise StudyError("a system needs a fabric (or a preset): one of "
                             f"{', '.join(fabric_names())} or a link technology", key="system.fabric")
        hw = cls(packages_per_node=int(merged.get("packages_per_node", default_packages_per_node(merged["fabric"]))),
                 fabric=merged["fabric"], network=merged.get("network"),
                 nics_per_node=int(merged.get("nics_per_node", 0)),
                 network_topology=merged.get("network_topology", "rail-optimised"), preset=spec.preset)
        fabric_level(hw.fabric, hw.packages_per_node)          # unknown names fail here, with their key
        if hw.network is not None:
            network_level(hw.network, max(hw.nics_per_node, 1), hw.packages_per_node, hw.network_topology, 2)
        return hw

    def nodes(self, packages: int) -> int:
        return math.ceil(packages / self.packages_per_node)

    def fabric_level(self) -> Level:
        return fabric_level(self.fabric, self.packages_per_node)

    def network_level(self, nodes: int) -> Level | None:
        if self.network is None:
            return None
        return network_level(self.network, self.nics_per_node, self.packages_per_node, self.network_topology, nodes)
