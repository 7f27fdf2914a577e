"""What moving experts costs: their weight bytes over the package's modelled bandwidths, the time the
moves take and their energy (docs/runtime.md).

A copy placed on chiplet d is copied from a live copy of the unit on chiplet s when there is one: read
from s's memory, carried over the package network's shortest route (hops of the study's link), written to
d's memory; the move's bandwidth is the slowest of the link and the two memories (HBM: sustained
bandwidth per stack x stacks, `EvalTables.hbm_bw_Bps`; a chiplet without HBM keeps weights in DDR). A
unit with no live copy (its chiplet failed) is reloaded from the package's DDR (or, without DDR, from
the host over one link). Energy per byte: the source memory's read, each hop's link and router energy
(`noc.LinkTech.hop_energy_j_per_byte`), the destination memory's write (the memories' energy per byte).
Moves into different chiplets run in parallel; moves into one chiplet follow each other: the moves take
the longest chiplet's total. ``bandwidth_scale`` scales every bandwidth (a what-if knob)."""
from __future__ import annotations

from typing import NamedTuple

import networkx as nx
import numpy as np

from ..model.tables import EvalTables
from ..study.schema.package import PackageSpec
from ..study.space import Design
from .mapping import on_chips


class MoveCost(NamedTuple):
    bytes: float
    time_s: float
    energy_j: float
    moves: int
    throughput: float = 1.0         # serving's throughput share while it runs (dse.runtime.contention)


NO_MOVE = MoveCost(0.0, 0.0, 0.0, 0)


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
    def unit(self) -> dict[str, int]:
        """Unit name -> index in the tables (built once per tables, shared through ``memo``)."""
        if "units" not in self.memo:
            self.memo["units"] = {u: i for i, u in enumerate(self.tables.unit_names)}
        return self.memo["units"]

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

    def memory(self, slot: int) -> tuple[float, float]:
        """(bandwidth B/s, energy J/B) of the memory holding weights on chiplet ``slot``."""
        stacks = self.design.hbm_stacks[slot]
        if stacks and self.tables.hbm is not None:
            return stacks * self.tables.hbm_bw_Bps, self.tables.hbm.energy_j_per_byte
        return self.ddr()

    def ddr(self) -> tuple[float, float]:
        """(bandwidth, energy per byte) of the package's DDR; without DDR the host over one link."""
        if self.design.ddr_channels and self.tables.ddr is not None:
            return self.design.ddr_channels * self.tables.ddr_bw_Bps, self.tables.ddr.energy_j_per_byte
        return self.link.bandwidth_Bps, 0.0

    def copy_cost(self, nbytes: float, dest: int, source: int | None) -> tuple[float, float]:
        """(time s, energy J) of ``nbytes`` copied to chiplet ``dest`` from ``source`` (None: reloaded)."""
        bw_d, e_d = self.memory(dest)
        if source is None:
            bw_s, e_s = self.ddr()
            hops = 1
        else:
            bw_s, e_s = self.memory(source)
            hops = self.hops[source][dest]
        bw = min(bw_s, bw_d, self.link.bandwidth_Bps if hops else np.inf) * self.scale
        return nbytes / bw, nbytes * (e_s + hops * self.link.hop_energy_j_per_byte + e_d)

    def cost(self, moves: list[tuple[str, int, list[int]]], failed: frozenset[int] = frozenset()) -> MoveCost:
        """The cost of ``moves`` (dse.runtime.mapping.moved_copies), copying from the nearest live copy."""
        if not moves:
            return NO_MOVE
        per_dest: dict[int, float] = {}
        total_b = total_e = 0.0
        hops, index, capacity = self.hops, self.unit, self.tables.unit_capacity_bytes
        per_byte = self.per_byte
        for unit, dest, sources in moves:
            nbytes = float(capacity[index[unit]])
            live = [s for s in sources if s not in failed and s != dest]
            source = min(live, key=lambda s: hops[s][dest]) if live else None
            if (dest, source) not in per_byte:
                per_byte[dest, source] = self.copy_cost(1.0, dest, source)
            t, e = per_byte[dest, source]
            per_dest[dest] = per_dest.get(dest, 0.0) + t * nbytes
            total_b += nbytes
            total_e += e * nbytes
        return MoveCost(total_b, max(per_dest.values()), total_e, len(moves))

    def tables_of(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per byte, copying into chiplet d from s (``[S, S + 1]``, the last column: reloaded): seconds and
        joules (`copy_cost`, on arrays), and the hops between chiplets ``[S, S]`` (once per model)."""
        if "arrays" not in self.per_byte:
            n = len(self.design.hbm_stacks)
            key = ("hop-array", self.design.rows, self.design.cols)
            if key not in self.memo:
                far = n * n             # not connected: never the nearest copy
                self.memo[key] = np.array([[self.hops.get(a, {}).get(b, far) for b in range(n)]
                                           for a in range(n)], np.int64)
            hops = self.memo[key]
            stacks = np.asarray(self.design.hbm_stacks)
            ddr_bw, ddr_e = self.ddr()
            hbm = stacks > 0 if self.tables.hbm is not None else np.zeros(n, bool)
            bw = np.where(hbm, stacks * self.tables.hbm_bw_Bps, ddr_bw)
            energy = np.where(hbm, self.tables.hbm.energy_j_per_byte if self.tables.hbm else 0.0, ddr_e)
            bw_s = np.append(bw, ddr_bw)[None, :]           # [dest, source]: the source's memory
            e_s = np.append(energy, ddr_e)[None, :]
            h = np.hstack([hops.T, np.ones((n, 1), np.int64)])
            link = np.where(h > 0, self.link.bandwidth_Bps, np.inf)
            t = 1.0 / (np.minimum(np.minimum(bw_s, bw[:, None]), link) * self.scale)
            e = e_s + h * self.link.hop_energy_j_per_byte + energy[:, None]
            self.per_byte["arrays"] = (t, e, hops)
        return self.per_byte["arrays"]

    def cost_arrays(self, unit: np.ndarray, dest: np.ndarray, sources: np.ndarray,
                    failed: frozenset[int] = frozenset()) -> MoveCost:
        """`cost` of moves given as arrays (dse.runtime.mapping.moved_arrays: ``sources`` -1 padded)."""
        if not len(unit):
            return NO_MOVE
        t, e, hops = self.tables_of()
        n = len(hops)
        live = (sources >= 0) & (sources != dest[:, None]) & ~on_chips(sources, failed)
        dist = np.where(live, hops[np.maximum(sources, 0), dest[:, None]], np.iinfo(np.int64).max)
        source = np.where(live.any(axis=1), sources[np.arange(len(unit)), np.argmin(dist, axis=1)], n)
        nbytes = np.asarray(self.tables.unit_capacity_bytes, float)[unit]
        per_dest = np.bincount(dest, weights=t[dest, source] * nbytes)
        ones = np.zeros(len(unit), np.int64)        # bincount adds in order (as `cost` does)
        total_b = float(np.bincount(ones, weights=nbytes)[0])
        total_e = float(np.bincount(ones, weights=e[dest, source] * nbytes)[0])
        return MoveCost(total_b, float(per_dest.max()), total_e, len(unit))
