"""Package topologies: 2D mesh, 2D torus, or any graph of chiplet-to-chiplet links.

A topology is ``n`` chiplets (nodes ``0 .. n-1``; row-major ``row * cols + col`` on a grid) joined by
full-duplex links, each stored as two directed channels with the bandwidth, latency, energy and PHY
area of its technology (noc/data/links.yaml). The router on every chiplet (latency and energy per hop)
comes from the package's default technology.

Channel ids on a grid run node by node, and within a node east, west, south, north (those that exist);
``grid_link[node, d]`` maps a node and direction to its outgoing channel (-1 where there is none).
A torus wraps each dimension of size 3 or more; a dimension of size 2 has no separate wrap link
(it would join the same two chiplets twice), so a 2 x k torus is a mesh in that dimension.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import networkx as nx
import numpy as np

from .errors import NocError
from .links import LinkTech, link_tech

EAST, WEST, SOUTH, NORTH = 0, 1, 2, 3
KINDS = ("mesh", "torus", "graph")

Tech = str | LinkTech


def _tech(value: Tech, where: str) -> LinkTech:
    if isinstance(value, LinkTech):
        return value
    try:
        return link_tech(value)
    except NocError as exc:
        raise NocError(f"{where}: {exc}") from None


@dataclass(frozen=True, eq=False)
class Topology:
    """Nodes and directed channels with their technology figures (arrays indexed by channel id)."""

    kind: str
    n: int
    rows: int
    cols: int
    link_src: np.ndarray            # [L] int64
    link_dst: np.ndarray            # [L] int64
    link_tech: tuple[str, ...]      # [L] technology name
    link_bw_Bps: np.ndarray         # [L]
    link_latency_s: np.ndarray      # [L] crossing the link (no router)
    link_energy_j_per_byte: np.ndarray  # [L] crossing the link (no router)
    link_phy_area_mm2: np.ndarray   # [L] PHY on each end of the physical link
    router_latency_s: float
    router_energy_j_per_byte: float
    grid_link: np.ndarray = field(repr=False)   # [n, 4] channel id per direction, grids only

    @property
    def n_links(self) -> int:
        return len(self.link_src)

    @cached_property
    def adj_ptr(self) -> np.ndarray:
        """CSR of outgoing channels per node: ``adj_link[adj_ptr[i]:adj_ptr[i + 1]]`` in id order."""
        return np.concatenate([[0], np.cumsum(np.bincount(self.link_src, minlength=self.n))]).astype(np.int64)

    @cached_property
    def adj_link(self) -> np.ndarray:
        return np.argsort(self.link_src, kind="stable").astype(np.int64)

    @cached_property
    def link_reverse(self) -> np.ndarray:
        """Channel id of the opposite direction of each channel (same physical link)."""
        index = {(a, b): i for i, (a, b) in enumerate(zip(self.link_src.tolist(), self.link_dst.tolist()))}
        return np.array([index[(b, a)] for a, b in zip(self.link_src.tolist(), self.link_dst.tolist())], np.int64)

    @cached_property
    def link_hop_latency_s(self) -> np.ndarray:
        """Latency of one hop over each channel: the link plus the router it enters."""
        return self.link_latency_s + self.router_latency_s

    @cached_property
    def link_hop_energy_j_per_byte(self) -> np.ndarray:
        return self.link_energy_j_per_byte + self.router_energy_j_per_byte

    def link_id(self, a: int, b: int) -> int:
        """Channel from chiplet a to chiplet b."""
        hit = np.flatnonzero((self.link_src == a) & (self.link_dst == b))
        if len(hit) == 0:
            raise NocError(f"no link from chiplet {a} to chiplet {b}")
        return int(hit[0])

    def physical_links(self) -> list[tuple[int, int]]:
        """Each full-duplex link once, as (lower id, higher id)."""
        return sorted({(min(a, b), max(a, b)) for a, b in zip(self.link_src.tolist(), self.link_dst.tolist())})

    def to_networkx(self) -> nx.DiGraph:
        g = nx.DiGraph()
        g.add_nodes_from(range(self.n))
        for i in range(self.n_links):
            g.add_edge(int(self.link_src[i]), int(self.link_dst[i]), id=i, tech=self.link_tech[i],
                       bandwidth_Bps=float(self.link_bw_Bps[i]), latency_s=float(self.link_latency_s[i]))
        return g

    def phy_area_mm2(self) -> np.ndarray:
        """D2D PHY area on each chiplet: one PHY per link it terminates (counted once per direction pair)."""
        area = np.zeros(self.n)
        np.add.at(area, self.link_src, self.link_phy_area_mm2)
        return area

    def describe(self) -> str:
        shape = f"{self.rows} x {self.cols} " if self.kind != "graph" else ""
        return f"{shape}{self.kind}, {self.n} chiplets, {self.n_links // 2} links"


def _build(kind: str, n: int, rows: int, cols: int, pairs: list[tuple[int, int]], techs: list[LinkTech],
           default: LinkTech, grid_link: np.ndarray | None = None) -> Topology:
    """Directed channels from a list of (src, dst) channels and their technologies."""
    src = np.array([a for a, _ in pairs], np.int64)
    dst = np.array([b for _, b in pairs], np.int64)
    return Topology(
        kind=kind, n=n, rows=rows, cols=cols, link_src=src, link_dst=dst,
        link_tech=tuple(t.name for t in techs),
        link_bw_Bps=np.array([t.bandwidth_Bps for t in techs], float),
        link_latency_s=np.array([t.latency_s for t in techs], float),
        link_energy_j_per_byte=np.array([t.energy_j_per_byte for t in techs], float),
        link_phy_area_mm2=np.array([t.phy_area_mm2 for t in techs], float),
        router_latency_s=default.router_latency_s, router_energy_j_per_byte=default.router_energy_j_per_byte,
        grid_link=grid_link if grid_link is not None else np.full((n, 4), -1, np.int64))


def _overrides(overrides, n: int, where: str) -> dict[tuple[int, int], LinkTech]:
    out = {}
    for (a, b), t in (overrides or {}).items():
        if not (0 <= a < n and 0 <= b < n):
            raise NocError(f"{where}: link ({a}, {b}) names a chiplet outside 0..{n - 1}")
        out[(min(a, b), max(a, b))] = _tech(t, f"{where} ({a}, {b})")
    return out


def _grid(kind: str, rows: int, cols: int, tech: Tech, overrides) -> Topology:
    if not (isinstance(rows, (int, np.integer)) and isinstance(cols, (int, np.integer))) or rows < 1 or cols < 1:
        raise NocError(f"a {kind} needs rows >= 1 and cols >= 1, got {rows} x {cols}")
    rows, cols = int(rows), int(cols)
    n = rows * cols
    default = _tech(tech, "link")
    special = _overrides(overrides, n, "link technology override")
    wrap_c = kind == "torus" and cols >= 3
    wrap_r = kind == "torus" and rows >= 3
    pairs, techs = [], []
    grid_link = np.full((n, 4), -1, np.int64)
    for node in range(n):
        r, c = divmod(node, cols)
        for d, (dr, dc) in enumerate(((0, 1), (0, -1), (1, 0), (-1, 0))):
            r1, c1 = r + dr, c + dc
            if wrap_c:
                c1 %= cols
            if wrap_r:
                r1 %= rows
            if not (0 <= r1 < rows and 0 <= c1 < cols) or (r1, c1) == (r, c):
                continue
            other = r1 * cols + c1
            grid_link[node, d] = len(pairs)
            pairs.append((node, other))
            techs.append(special.get((min(node, other), max(node, other)), default))
    joined = {(min(a, b), max(a, b)) for a, b in pairs}
    for key in special:
        if key not in joined:
            raise NocError(f"link technology override ({key[0]}, {key[1]}): chiplets {key[0]} and {key[1]} "
                           f"are not neighbours on the {rows} x {cols} {kind}")
    return _build(kind, n, rows, cols, pairs, techs, default, grid_link)


def mesh(rows: int, cols: int, tech: Tech = "ucie-advanced",
         overrides: dict[tuple[int, int], Tech] | None = None) -> Topology:
    """A rows x cols 2D mesh; ``overrides`` gives some links {(a, b): technology}."""
    return _grid("mesh", rows, cols, tech, overrides)


def torus(rows: int, cols: int, tech: Tech = "ucie-advanced",
          overrides: dict[tuple[int, int], Tech] | None = None) -> Topology:
    """A rows x cols 2D torus (wrap-around links in every dimension of size >= 3)."""
    return _grid("torus", rows, cols, tech, overrides)


def from_links(n: int, links, tech: Tech = "ucie-advanced") -> Topology:
    """Any package graph: ``links`` is a list of (a, b) or (a, b, technology) full-duplex links."""
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise NocError(f"a graph topology needs at least one chiplet, got n = {n!r}")
    default = _tech(tech, "link")
    pairs, techs, seen = [], [], set()
    for i, item in enumerate(links):
        where = f"links[{i}]"
        if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
            raise NocError(f"{where}: expected (a, b) or (a, b, technology), got {item!r}")
        a, b = item[0], item[1]
        if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in (a, b)):
            raise NocError(f"{where}: chiplet ids must be whole numbers, got {item!r}")
        if not (0 <= a < n and 0 <= b < n):
            raise NocError(f"{where}: chiplet ids must be in 0..{n - 1}, got ({a}, {b})")
        if a == b:
            raise NocError(f"{where}: a link must join two different chiplets, got ({a}, {b})")
        key = (min(a, b), max(a, b))
        if key in seen:
            raise NocError(f"{where}: chiplets {a} and {b} are already linked")
        seen.add(key)
        t = _tech(item[2], f"{where} technology") if len(item) == 3 else default
        pairs += [(int(a), int(b)), (int(b), int(a))]
        techs += [t, t]
    return _build("graph", int(n), 0, 0, pairs, techs, default)


def from_networkx(graph: nx.Graph, tech: Tech = "ucie-advanced") -> Topology:
    """A topology from an undirected networkx graph on nodes 0..n-1 (edge attribute ``tech`` optional)."""
    nodes = sorted(graph.nodes)
    if nodes != list(range(len(nodes))):
        raise NocError("graph nodes must be the integers 0..n-1")
    links = [(a, b, d["tech"]) if "tech" in d else (a, b) for a, b, d in graph.edges(data=True)]
    return from_links(len(nodes), links, tech)


def build(kind: str, rows: int = 0, cols: int = 0, tech: Tech = "ucie-advanced", links=None,
          overrides=None, n: int | None = None) -> Topology:
    """One entry point for every kind: mesh / torus take rows x cols, a graph takes ``links`` on n chiplets."""
    if kind == "mesh":
        return mesh(rows, cols, tech, overrides)
    if kind == "torus":
        return torus(rows, cols, tech, overrides)
    if kind == "graph":
        return from_links(n if n is not None else rows * cols, links or [], tech)
    raise NocError(f"unknown topology {kind!r}; allowed: {', '.join(KINDS)}")
