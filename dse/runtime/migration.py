"""What moving experts costs: their weight bytes over the package's modelled bandwidths, the time the
moves take and their energy (docs/runtime.md).

A copy placed on chiplet d is copied from a live copy of the unit on chiplet s when there is one: read
from s's memory, carried over the package network's route from s to d (the evaluator's routes,
dse.model.traffic.package_routes; with links down, the routes after them: intact routes kept, broken ones
detour by minimum hops, noc.fault_routes, and a copy it cannot reach is no source), written to d's
memory; a copy's bandwidth is
the slowest of the link and the two memories (HBM: sustained bandwidth per stack x stacks,
`EvalTables.hbm_bw_Bps`; a chiplet without HBM keeps weights in the package's DDR). A unit with no live
copy (its chiplet failed) is reloaded from the package's DDR over one link (or, without DDR, from the
host over one link). Energy per byte: the source memory's read, each hop's link and router energy
(`noc.LinkTech.hop_energy_j_per_byte`), the destination memory's write (the memories' energy per byte).

Time: the moves run concurrently and share what they cross. Their bytes are summed per directed link
(over each copy's route), per memory (each chiplet's HBM, and the package's DDR, which every chiplet
without HBM and every reload shares; a memory's reads and writes share its bandwidth) and per
destination; the moves take at least each resource's bytes over its bandwidth (a lower bound any schedule
obeys: a resource moves no faster than its bandwidth), and at least the longest destination's copies one
after the other, each at its own bandwidth (moves into one chiplet follow each other): the larger of the
two (a closed form, no event simulation). Two copies of B bytes sharing one link of bandwidth W take
2B / W, as one copy of 2B would. ``bandwidth_scale`` scales every bandwidth (a what-if knob)."""
from __future__ import annotations

from typing import NamedTuple

import networkx as nx
import numpy as np

import noc

from ..model.tables import EvalTables
from ..model.traffic import package_routes
from ..study.schema.package import PackageSpec
from ..study.space import Design
from .mapping import Placement
from .move_price import FAR, MoveCost, Moved, change_cost, price_change, price_moves


NO_MOVE = MoveCost(0.0, 0.0, 0.0, 0)
NO_REVIVE = np.zeros(0, np.int64)


class Priced(NamedTuple):
    """Moves and their `MoveCost`: each move's unit, destination and source (``S``: reloaded), and the
    bytes summed per directed link of the package network and per memory resource
    (`MigrationModel.memories`) that the time bound took (dse.runtime.contention prices them again)."""

    cost: MoveCost
    unit: np.ndarray
    dest: np.ndarray
    source: np.ndarray
    links: np.ndarray
    mem: np.ndarray

    @classmethod
    def of(cls, moved: Moved) -> "Priced":
        """`Priced` of the compiled pass's `Moved` (no moves: `NO_MOVE`)."""
        cost = MoveCost(float(moved.bytes), float(moved.time_s), float(moved.energy_j), len(moved.unit)) \
            if len(moved.unit) else NO_MOVE
        return cls(cost, moved.unit, moved.dest, moved.source, moved.links, moved.mem)


class MeshTerms(NamedTuple):
    """`MigrationModel.mesh_terms`: hops ``[S, S]``; by (dest, source), a reload's one hop last
    ``[S, S + 1]``: the link's bandwidth on the route (inf: no hop, B/s) and the hops' energy (J/B)."""

    hops: np.ndarray
    link_bw: np.ndarray
    hop_e: np.ndarray


class MigrationModel:
    """Prices moves of unit copies within one design's package (module docstring)."""

    def __init__(self, tables: EvalTables, package: PackageSpec, design: Design, bandwidth_scale: float = 1.0,
                 memo: dict | None = None):
        self.tables, self.design, self.scale = tables, design, bandwidth_scale
        self.package, self.memo = package, memo if memo is not None else {}
        self.link = tables.link
        self._hops = None
        self.per_byte: dict[tuple, tuple[float, float]] = {}   # (dest, source) -> (s/B, J/B): linear in bytes

    @property
    def hops(self) -> dict:
        """Hops between every two chiplets on the package network's shortest routes (once per mesh shape,
        shared through ``memo``; built when a move is first priced)."""
        if self._hops is None:
            key = ("hops", self.design.rows, self.design.cols)
            if key not in self.memo:
                graph = self.package.network(self.design.rows, self.design.cols).to_networkx()
                self.memo[key] = dict(nx.all_pairs_shortest_path_length(graph))
            self._hops = self.memo[key]
        return self._hops

    def ddr(self) -> tuple[float, float]:
        """(bandwidth, energy per byte) of the package's DDR; without DDR the host over one link."""
        if self.design.ddr_channels and self.tables.ddr is not None:
            return self.design.ddr_channels * self.tables.ddr_bw_Bps, self.tables.ddr.energy_j_per_byte
        return self.link.bandwidth_Bps, 0.0

    def hop_array(self, links: frozenset = frozenset()) -> np.ndarray:
        """Hops between every two chiplets ``[S, S]`` on the package network's shortest routes (once per
        mesh shape), or with ``links`` down on the routes after them (`routes_after`: the evaluator's
        detours), where an unreachable pair is never a copy's source (`FAR`)."""
        n = len(self.design.hbm_stacks)
        key = ("hop-array", self.design.rows, self.design.cols, links)
        if key not in self.memo:
            if links:
                after = self.routes_after(links)
                self.memo[key] = np.where(after.reachable, np.diff(after.route_ptr).reshape(after.n, after.n),
                                          FAR)[:n, :n]
            else:
                far = n * n             # not connected: never the nearest copy
                self.memo[key] = np.array([[self.hops.get(a, {}).get(b, far) for b in range(n)]
                                           for a in range(n)], np.int64)
        return self.memo[key]

    def tables_of(self, links: frozenset = frozenset()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per byte, copying into chiplet d from s (``[S, S + 1]``, the last column: reloaded): seconds (the
        slowest of the two memories and the link) and joules (source memory + hops x (link + router) +
        destination memory), and the hops between chiplets ``[S, S]`` (`hop_array`; once per model and
        set of ``links`` down)."""
        if ("arrays", links) not in self.per_byte:
            n = len(self.design.hbm_stacks)
            mesh = self.mesh_terms(links)
            stacks = np.asarray(self.design.hbm_stacks)
            ddr_bw, ddr_e = self.ddr()
            hbm = stacks > 0 if self.tables.hbm is not None else np.zeros(n, bool)
            bw = np.where(hbm, stacks * self.tables.hbm_bw_Bps, ddr_bw)
            energy = np.where(hbm, self.tables.hbm.energy_j_per_byte if self.tables.hbm else 0.0, ddr_e)
            bw_s = np.append(bw, ddr_bw)[None, :]           # [dest, source]: the source's memory
            e_s = np.append(energy, ddr_e)[None, :]
            t = 1.0 / (np.minimum(np.minimum(bw_s, bw[:, None]), mesh.link_bw) * self.scale)
            e = e_s + mesh.hop_e + energy[:, None]
            self.per_byte["arrays", links] = (t, e, mesh.hops)
        return self.per_byte["arrays", links]

    def mesh_terms(self, links: frozenset) -> "MeshTerms":
        """What `tables_of` takes from the mesh alone (`MeshTerms`): the hops (`hop_array`), and by (dest,
        source) with a reload's one hop, the link's bandwidth (inf: no hop) and the hops' energy per byte
        (hops x (link + router)), computed as `tables_of` did; once per mesh shape, link technology and
        set of ``links`` down, shared through ``memo`` (the designs of a package variant)."""
        key = ("mesh-terms", self.design.rows, self.design.cols, len(self.design.hbm_stacks), links,
               self.link.bandwidth_Bps, self.link.hop_energy_j_per_byte)
        if key not in self.memo:
            hops = self.hop_array(links)
            h = np.hstack([hops.T, np.ones((len(hops), 1), np.int64)])
            self.memo[key] = MeshTerms(hops, np.where(h > 0, self.link.bandwidth_Bps, np.inf),
                                       h * self.link.hop_energy_j_per_byte)
        return self.memo[key]

    @property
    def routes(self):
        """The package network's routes for the design's shape (noc.Routes, as the evaluator routes: once
        per mesh shape, shared through ``memo``)."""
        key = ("routes", self.design.rows, self.design.cols)
        if key not in self.memo:
            self.memo[key] = package_routes(self.design, self.package)[1]
        return self.memo[key]

    def routes_after(self, links: frozenset):
        """`routes` with ``links`` ((a, b) chiplet pairs) down: intact routes kept, broken ones detour by
        minimum hops (noc.fault_routes, as the evaluator's re-routed tables; once per mesh shape and set)."""
        key = ("routes", self.design.rows, self.design.cols, links)
        if key not in self.memo:
            self.memo[key] = noc.fault_routes(self.routes, failed_links=sorted(links))
        return self.memo[key]

    def memories(self) -> tuple[np.ndarray, np.ndarray]:
        """Each chiplet's weight memory as a resource ``[S]`` (its slot when it has HBM, else ``S``: the
        package's DDR, which reloads read too) and the resources' bandwidths ``[S + 1]`` (B/s, unscaled)."""
        if "memories" not in self.per_byte:
            n = len(self.design.hbm_stacks)
            stacks = np.asarray(self.design.hbm_stacks)
            hbm = stacks > 0 if self.tables.hbm is not None else np.zeros(n, bool)
            ddr_bw = self.ddr()[0]
            self.per_byte["memories"] = (np.where(hbm, np.arange(n), n),
                                         np.append(np.where(hbm, stacks * self.tables.hbm_bw_Bps, ddr_bw), ddr_bw))
        return self.per_byte["memories"]

    def kernel_arrays(self, links: frozenset = frozenset()) -> tuple:
        """What `dse.runtime.move_price` prices with, after the moves and the failed chiplets: each unit's
        bytes, `tables_of`, `memories`, the routes' CSR arrays (`routes_after` with ``links`` down) and
        their links' bandwidths, the scale (once per model and set of links down, and remembered in the
        shared ``memo`` by what they depend on: the designs of a population that share a mesh, HBM stacks and
        DDR share them)."""
        if ("kernel", links) not in self.per_byte:
            d = self.design
            key = ("kernel", d.rows, d.cols, tuple(d.hbm_stacks), d.ddr_channels, self.scale, links)
            if key not in self.memo:
                self.memo[key] = self.priced_arrays(links)
            self.per_byte["kernel", links] = self.memo[key]
        return self.per_byte["kernel", links]

    def priced_arrays(self, links: frozenset) -> tuple:
        """`kernel_arrays` computed (this design's, with ``links`` down)."""
        t, e, hops = self.tables_of(links)
        which, mem_bw = self.memories()
        routes = self.routes_after(links) if links else self.routes
        return (
            np.asarray(self.tables.unit_capacity_bytes, float), t, e, hops, which, mem_bw,
            np.asarray(routes.route_ptr, np.int64), np.asarray(routes.route_links, np.int64), int(routes.n),
            np.asarray(routes.topology.link_bw_Bps, float), float(self.scale))

    def failed_mask(self, failed: frozenset[int]) -> np.ndarray:
        """``failed`` as a mask over the chiplets ``[S]``."""
        key = ("failed", failed)
        if key not in self.per_byte:
            mask = np.zeros(len(self.design.hbm_stacks), np.bool_)
            for c in failed:
                if 0 <= c < len(mask):
                    mask[c] = True
            self.per_byte[key] = mask
        return self.per_byte[key]

    def priced(self, unit: np.ndarray, dest: np.ndarray, sources: np.ndarray,
               failed: frozenset[int] = frozenset(), links: frozenset = frozenset()) -> Priced:
        """Moves given as arrays (``sources``: each move's candidate source slots, -1 padded), each copied
        from its nearest live copy, priced (dse.runtime.move_price.price_moves: the larger of the longest
        destination's serial time and every link's and memory's summed bytes over its bandwidth)."""
        unit = np.asarray(unit, np.int64)
        if not len(unit):
            return Priced(NO_MOVE, unit, unit, unit, np.zeros(0), np.zeros(0))
        moved = price_moves(unit, np.asarray(dest, np.int64), np.asarray(sources, np.int64).reshape(len(unit), -1),
                            self.failed_mask(failed), *self.kernel_arrays(links))
        return Priced.of(moved)

    def change_arrays(self, old: Placement, new: Placement, revive: set[int], failed: frozenset[int],
                      links: frozenset = frozenset()) -> tuple:
        """The arguments of dse.runtime.move_price.price_change for a change from ``old`` to ``new`` with the
        chiplets ``failed`` and the ``links`` down."""
        return (np.asarray(old.slots, np.int64), np.asarray(old.ncopy, np.int64), np.asarray(new.slots, np.int64),
                np.asarray(new.ncopy, np.int64), np.array(sorted(revive), np.int64) if revive else NO_REVIVE,
                self.failed_mask(failed)) + self.kernel_arrays(links)

    def priced_change(self, old: Placement, new: Placement, revive: set[int], failed: frozenset[int],
                      links: frozenset = frozenset()) -> Priced:
        """The copies ``new`` places where ``old`` had none, then every copy on a ``revive``d slot (a
        spare takes it: reloaded or copied from the unit's other copies), priced as `priced`, in one
        compiled call (dse.runtime.move_price.price_change)."""
        return Priced.of(price_change(*self.change_arrays(old, new, revive, failed, links)))

    def change_cost(self, old: Placement, new: Placement, revive: set[int], failed: frozenset[int],
                    links: frozenset = frozenset()) -> MoveCost:
        """`priced_change`'s `MoveCost` alone, in one compiled call (dse.runtime.move_price.change_cost)."""
        return change_cost(*self.change_arrays(old, new, revive, failed, links))

    def cost_arrays(self, unit: np.ndarray, dest: np.ndarray, sources: np.ndarray,
                    failed: frozenset[int] = frozenset(), links: frozenset = frozenset()) -> MoveCost:
        """The `MoveCost` of moves given as arrays (`priced`)."""
        return self.priced(unit, dest, sources, failed, links).cost
