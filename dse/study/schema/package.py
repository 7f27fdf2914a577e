"""Study schema: the package network of the ``hardware`` section (chiplet slots, topology, link
technologies and routing)."""
from __future__ import annotations

import dataclasses
from typing import Literal

from pydantic import Field, NonNegativeInt, field_validator, model_validator

import noc

from . import limits
from .common import IntRange, StrictModel, Tuple, check_range, invalid_at


class MeshSpec(StrictModel):
    #: mesh rows: a number or [low, high]
    rows: IntRange
    #: mesh columns: a number or [low, high]
    cols: IntRange

    @field_validator("rows", "cols")
    @classmethod
    def _positive(cls, value):
        check_range(value, 1)
        if value[1] > limits.MESH_SIDE.limit:
            raise ValueError(limits.MESH_SIDE.message())
        return value

    def shapes(self) -> list[tuple[int, int]]:
        return [(r, c) for r in range(self.rows[0], self.rows[1] + 1) for c in range(self.cols[0], self.cols[1] + 1)]


def _known_tech(value: str) -> str:
    if value not in noc.link_kinds():
        raise ValueError(f"unknown link technology {value!r}; allowed: {', '.join(noc.link_kinds())}")
    return value


def _neighbours(a: int, b: int, rows: int, cols: int, torus: bool) -> bool:
    (ra, ca), (rb, cb) = divmod(a, cols), divmod(b, cols)
    dr, dc = abs(ra - rb), abs(ca - cb)
    if torus:
        dr = min(dr, rows - dr) if rows >= 3 else dr
        dc = min(dc, cols - dc) if cols >= 3 else dc
    return dr + dc == 1


def _unreached(n: int, links: list[tuple[int, int]]) -> list[int]:
    """Chiplets 0..n-1 with no path of ``links`` to chiplet 0."""
    neighbours: dict[int, list[int]] = {}
    for a, b in links:
        neighbours.setdefault(a, []).append(b)
        neighbours.setdefault(b, []).append(a)
    reached, todo = {0}, [0]
    while todo:
        for nxt in neighbours.get(todo.pop(), []):
            if nxt not in reached:
                reached.add(nxt)
                todo.append(nxt)
    return [i for i in range(n) if i not in reached]


class LinkSpec(StrictModel):
    """One chiplet-to-chiplet link: the links of a ``graph`` package, or a technology override on a grid."""

    #: the two chiplet slots the link joins (row-major ids)
    between: Tuple(tuple[NonNegativeInt, NonNegativeInt])
    #: the link's technology (default: the package's)
    tech: str | None = None

    @field_validator("tech")
    @classmethod
    def _known(cls, value):
        return None if value is None else _known_tech(value)


class LinkOverrides(StrictModel):
    """Figures of the package's link technology a study changes (noc/data/links.yaml units): a link of
    a known technology at another width or speed, or a measured fabric."""

    #: bandwidth per direction, GB/s
    bandwidth_gbps: float | None = Field(None, gt=0, le=1e6)
    #: PHY-to-PHY latency of one crossing, ns
    latency_ns: float | None = Field(None, ge=0, le=1e9)
    #: energy per bit crossing the link, pJ
    energy_pj_per_bit: float | None = Field(None, ge=0, le=1e6)
    #: fixed synchronisation time per transfer, µs
    sync_latency_us: float | None = Field(None, ge=0, le=1e6)

    def apply(self, tech: noc.LinkTech) -> noc.LinkTech:
        changes = {"bandwidth_Bps": self.bandwidth_gbps and self.bandwidth_gbps * 1e9,
                   "latency_s": self.latency_ns is not None and self.latency_ns * 1e-9,
                   "energy_j_per_byte": self.energy_pj_per_bit is not None and self.energy_pj_per_bit * 8e-12,
                   "sync_latency_s": self.sync_latency_us is not None and self.sync_latency_us * 1e-6}
        given = {"bandwidth_Bps": self.bandwidth_gbps, "latency_s": self.latency_ns,
                 "energy_j_per_byte": self.energy_pj_per_bit, "sync_latency_s": self.sync_latency_us}
        return dataclasses.replace(tech, **{k: float(v) for k, v in changes.items() if given[k] is not None})


class PackageSpec(StrictModel):
    """The package network: topology, link technology (per package, or per link) and routing.

    ``mesh`` gives the chiplet slots (rows x cols, row-major ids) of every topology; a ``graph`` package
    has a fixed size and lists its ``links``; on a mesh or torus ``links`` override the technology of
    some links. Routing defaults to ``xy`` on grids and ``shortest`` on graphs. ``topology`` and ``link``
    may list several choices (``[mesh, torus]``): each combination is a package variant the search
    chooses among (`dse.study.spec.Study.variants`); `network` and `route_bank` need a single choice of each.
    ``router`` is the routers' model (noc.ROUTERS): ``islip`` (the default) BookSim2's input-queued
    virtual-channel router, whose switch allocator keeps a contended channel busy only
    noc.SWITCH_EFFICIENCY_ISLIP of the time; ``ideal`` keeps it busy every cycle.
    """

    topology: str | list[str] = "mesh"          # mesh | torus | graph, or a list of mesh and torus
    #: the chiplet slots: rows and cols, each a number or [low, high]
    mesh: MeshSpec
    link: str | list[str] = "ucie-advanced"      # or several technologies for the search to choose among
    #: graph: every link, [{between: [a, b]}]; mesh or torus: technology overrides of some links
    links: list[LinkSpec] = Field(default_factory=list)
    #: xy (grids' default) or shortest (graphs' default)
    routing: Literal["xy", "shortest"] | None = None
    #: the routers' model: islip (BookSim2's VC router, its allocator efficiency) or ideal (no allocator losses)
    router: Literal["islip", "ideal"] = "islip"
    link_overrides: LinkOverrides | None = None     # the package technology's figures, changed

    @field_validator("link")
    @classmethod
    def _known_link(cls, value):
        if isinstance(value, list):
            if not value:
                raise ValueError("link needs at least one technology")
            return [_known_tech(v) for v in value]
        return _known_tech(value)

    @field_validator("topology")
    @classmethod
    def _known_topology(cls, value):
        if isinstance(value, list):
            if not value or any(v not in ("mesh", "torus") for v in value) or len(set(value)) < len(value):
                raise ValueError(f"a list of topologies holds distinct choices among mesh, torus, got {value}")
        elif value not in ("mesh", "torus", "graph"):
            raise ValueError("unknown topology; allowed: mesh, torus, graph, or a list of mesh and torus")
        return value

    @property
    def link_choices(self) -> list[str]:
        return list(self.link) if isinstance(self.link, list) else [self.link]

    @property
    def topology_choices(self) -> list[str]:
        return list(self.topology) if isinstance(self.topology, list) else [self.topology]

    @model_validator(mode="after")
    def _consistent(self):
        rows, cols = self.mesh.rows, self.mesh.cols
        if self.topology == "graph":
            if rows[0] != rows[1] or cols[0] != cols[1]:
                raise invalid_at(("mesh",), "a graph package has a fixed number of chiplets: give mesh rows and "
                               "cols as single numbers (chiplets = rows x cols)", self.mesh.model_dump())
            if not self.links:
                raise invalid_at(("links",), "a graph package needs its links: [{between: [a, b]}, ...]", [])
            if self.routing == "xy":
                raise invalid_at(("routing",), "routing 'xy' needs a mesh or torus; use 'shortest' on a graph",
                               self.routing)
        n_max = rows[1] * cols[1]
        seen: dict[tuple[int, int], int] = {}
        for i, spec in enumerate(self.links):
            a, b = spec.between
            loc = ("links", i, "between")
            for x in (a, b):
                if x >= n_max:
                    raise invalid_at(loc, f"chiplet {x} is outside the package; ids are 0..{n_max - 1} "
                                   f"(row-major on the {rows[1]} x {cols[1]} grid)", list(spec.between))
            if a == b:
                raise invalid_at(loc, "a link joins two different chiplets", list(spec.between))
            key = (min(a, b), max(a, b))
            if key in seen:
                raise invalid_at(loc, f"chiplets {a} and {b} are already linked by links[{seen[key]}]",
                               list(spec.between))
            seen[key] = i
            if self.topology != "graph":
                grids = " or ".join(self.topology_choices)
                if spec.tech is None:
                    raise invalid_at(("links", i, "tech"), f"on a {grids} a links entry overrides a link's "
                                   f"technology and needs 'tech' (one of {', '.join(noc.link_kinds())})",
                                   spec.model_dump())
                for topology in self.topology_choices:
                    for r, c in self.mesh.shapes():
                        if max(a, b) < r * c and not _neighbours(a, b, r, c, topology == "torus"):
                            raise invalid_at(loc, f"chiplets {a} and {b} are not neighbours on the {r} x {c} "
                                           f"{topology}", list(spec.between))
        if self.topology == "graph":
            alone = _unreached(n_max, list(seen))
            if alone:
                raise invalid_at(("links",), f"chiplet {alone[0]} is not connected to chiplet 0 ({len(alone)} "
                               "chiplets unreachable); every chiplet of a graph package needs a path to every "
                               "other", [list(k) for k in seen])
        return self

    @property
    def routing_algorithm(self) -> str:
        return self.routing or ("shortest" if self.topology == "graph" else "xy")

    @property
    def switch_efficiency(self) -> float:
        """The routers' allocator efficiency eta (noc.router_efficiency)."""
        return noc.router_efficiency(self.router)

    def _single(self) -> None:
        if len(self.topology_choices) > 1 or len(self.link_choices) > 1:
            raise ValueError(f"package with topology {self.topology} and link {self.link} is several packages: "
                             "choose one (Study.variants)")

    def link_tech(self) -> noc.LinkTech:
        """The package's link technology with the study's ``link_overrides``."""
        self._single()
        tech = noc.link_tech(self.link)
        return self.link_overrides.apply(tech) if self.link_overrides else tech

    def network(self, rows: int, cols: int) -> noc.Topology:
        """The package network of one rows x cols design."""
        tech = self.link_tech()
        if self.topology == "graph":
            links = [(s.between[0], s.between[1], s.tech) if s.tech else tuple(s.between) for s in self.links]
            return noc.from_links(rows * cols, links, tech)
        n = rows * cols
        overrides = {tuple(s.between): s.tech for s in self.links if max(s.between) < n}
        return noc.build(self.topology, rows, cols, tech, overrides=overrides)

    def route_bank(self) -> noc.RouteBank:
        """Route tables of every package shape the study allows (see noc.bank)."""
        self._single()
        return noc.route_bank([self.network(r, c) for r, c in self.mesh.shapes()], self.routing_algorithm)
