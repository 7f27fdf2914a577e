"""Background moves contending with serving on the package network and in HBM (docs/runtime.md,
``migration.mode: background``).

While the old mapping keeps serving, its step of ``T`` seconds (the evaluator's step latency of the
serving mapping at the window's popularity, failed chiplets re-mapped) sends ``B_l`` bytes over each
directed link l of the package network (dse.model.traffic: the placement's hand-offs and all-reduces,
routed as the evaluator routes) and reads ``H_c`` bytes from each chiplet c's HBM and ``H_DDR`` from the
package's DDR (dse.model.breakdown.chiplet_dram_bytes: the evaluator's own per-copy DRAM bytes): rates
``r = bytes / T`` on every link and memory.

A move gets what serving leaves on each resource x it uses, ``bw_x - r_x``, and at least the policy's
``share`` of it (``migration.share``: the least bandwidth a move is given), times ``bandwidth_scale``,
never more than ``bw_x``: ``a_x``. The moves run concurrently: their bytes are summed per link, per memory
(reads at the source, writes at the destination; dse.runtime.move_price.price, the
same sums a stall's moves are priced on) and the moves take at least each resource's bytes over ``a_x``,
and at least the longest destination's copies one after the other, each at the least ``a_x`` along its
way (its two memories, the links of its route; a reload from DDR or the host crosses one link no
serving uses). Over that time ``t`` the moves take ``m_x = bytes_x / t`` of each resource on average;
where that is more than serving leaves, serving's step is at least ``B_x / (bw_x - m_x)``: serving's
throughput while the moves run is ``min(1, (bw_x - m_x) / r_x)`` at the worst resource (a bound: the
resource serialises those bytes). Energy is the moves' (bytes x (memories + hops x hop energy)),
unchanged."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..model.breakdown import chiplet_dram_bytes
from ..model.contract import DecodedDesigns
from ..model.records import design_records
from ..model.metrics import METRICS
from ..model.traffic import chiplet_traffic, link_loads, package_routes
from .migration import MigrationModel, MoveCost, Priced

LATENCY = METRICS.index("latency_s")


class LinkTraffic(NamedTuple):
    """Serving's bytes/s on every directed link of one design (``rate_Bps``), each link's ``bandwidth_Bps``
    and the package's ``routes`` (noc.Routes: the links a copy crosses); ``memory_Bps``: serving's DRAM
    bytes/s per memory resource of `MigrationModel.memories` (each chiplet's HBM, then the package's DDR;
    None: not counted)."""

    rate_Bps: np.ndarray
    bandwidth_Bps: np.ndarray
    routes: object
    memory_Bps: np.ndarray | None = None

    def crossed(self, source: int, dest: int) -> np.ndarray:
        """Channel ids of the route from ``source`` to ``dest``."""
        return self.routes.links(source, dest)


def serving_traffic(ev, package, d: DecodedDesigns) -> LinkTraffic:
    """`LinkTraffic` of the one design of ``d`` (package evaluator ``ev``, the study's `PackageSpec`):
    its step's link bytes (dse.model.traffic) and HBM and DDR bytes (dse.model.breakdown) over its step
    latency (the evaluator's)."""
    design = design_records(d, ev.tables, ev.link, ev.space.mapping, ev.topology, [0])[0]
    step_s = float(ev.decoded_metrics(d, with_faults=False)[0, LATENCY])
    loads = link_loads(design, chiplet_traffic(design, ev.tables), package)
    _, routes = package_routes(design, package)
    hbm, ddr = chiplet_dram_bytes(ev, d)        # a chiplet without HBM reads all its bytes from the DDR
    memory = np.zeros(len(design.hbm_stacks) + 1)   # as MigrationModel.memories: chiplets' HBM, then DDR
    memory[: len(hbm)] = hbm
    memory[-1] = float(ddr.sum())
    return LinkTraffic(loads["bytes_per_step"].to_numpy(float) / step_s, loads["bandwidth_Bps"].to_numpy(float),
                       routes, memory / step_s)


def contended_cost(mig: MigrationModel, unit: np.ndarray, dest: np.ndarray, sources: np.ndarray,
                   failed: frozenset[int], traffic: LinkTraffic, share: float) -> MoveCost:
    """Moves (as `MigrationModel.cost_arrays` takes them: unit indices, destinations, -1-padded sources;
    the same source, the nearest live copy) priced against serving's ``traffic`` (`contended`)."""
    return contended(mig, mig.priced(unit, dest, sources, failed), traffic, share)


def contended(mig: MigrationModel, moves: Priced, traffic: LinkTraffic, share: float) -> MoveCost:
    """Priced ``moves`` (`MigrationModel.priced`: their sources and summed link and memory bytes) against
    serving's ``traffic`` (module docstring): time at the contended bandwidths, energy as priced, and
    serving's throughput share while they run."""
    free = moves.cost
    if not free.moves:
        return free
    which, mem_bw = mig.memories()
    n = len(which)
    mem_rate = np.zeros(n + 1) if traffic.memory_Bps is None else traffic.memory_Bps
    cap, rate = traffic.bandwidth_Bps, traffic.rate_Bps

    def left(bw, r):
        return np.minimum(np.maximum(bw - r, share * bw) * mig.scale, bw)
    link_a, mem_a = left(cap, rate), left(mem_bw, mem_rate)
    source, dest, links, mem = moves.source, moves.dest, moves.links, moves.mem
    nbytes = np.asarray(mig.tables.unit_capacity_bytes, float)[moves.unit]
    bw = np.minimum(mem_a[np.append(which, n)[source]], mem_a[which[dest]])
    hop_bw = mig.link.bandwidth_Bps * mig.scale         # a reload's one link
    for i, (s, d) in enumerate(zip(source.tolist(), dest.tolist())):
        crossed = traffic.crossed(s, d) if s < n else np.zeros(0, np.int64)
        bw[i] = min(bw[i], float(np.min(link_a[crossed])) if len(crossed) else hop_bw)
    per_dest = np.bincount(dest, weights=nbytes / bw)
    time_s = max(float(per_dest.max()), float(np.max(links / link_a, initial=0.0)), float(np.max(mem / mem_a)))
    keep = 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        for used, bw_x, r_x in ((links, cap, rate), (mem, mem_bw, mem_rate)):
            kept = np.where((r_x > 0) & (used > 0), np.minimum(1.0, (bw_x - used / time_s) / r_x), 1.0)
            keep = min(keep, float(np.min(kept)))
    return free._replace(time_s=time_s, throughput=keep)
