"""What crosses packages in one step of a layout: the expert dispatch and combine between the ranks of a
pipeline stage (an all-to-all per MoE layer instance, each way) and the hand-off between consecutive
pipeline stages, each on the level it crosses (fabric inside a node, network between nodes; alpha-beta
costs of dse.system.collectives).

Bytes come from the workload's hand-offs (dse.model.tables, at the batch one rank serves): rank r sends
rank q the bytes of its tokens routed to q's experts (the hand-offs into q's experts) and q returns
their outputs (the hand-offs out of q's experts), per layer instance. A pipeline hand-off carries the
largest hand-off into the next stage's first layer (the hidden state of the rank's tokens), from each
rank to the same rank of the next stage. These costs depend on the layout and the hardware around the
packages, not on the package design: they are computed once per layout.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model.tables import EvalTables
from .collectives import all_to_all_s, send_s
from .hardware import Level, SystemHardware
from .layout import Layout
from .slices import EXPERT


@dataclass
class StageTraffic:
    """Cross-package costs of one pipeline stage of one replica, per step."""

    time_s: float = 0.0            # all-to-alls on the stage's critical path
    send_s: float = 0.0            # hand-off to the next stage (0 for the last)
    fabric_s: float = 0.0          # time the busiest rank spends on the fabric, all-to-alls and hand-off
    network_s: float = 0.0         # the same on the network
    energy_j: float = 0.0
    byte_hops: float = 0.0

    def add(self, other: "StageTraffic", times: float) -> None:
        """Add ``times`` x the all-to-all costs ``other`` (its time, fabric, network, energy, byte-hops)."""
        self.time_s += times * other.time_s
        self.fabric_s += times * other.fabric_s
        self.network_s += times * other.network_s
        self.energy_j += times * other.energy_j
        self.byte_hops += times * other.byte_hops


@dataclass
class LayoutTraffic:
    """Per replica (data-parallel copy) and pipeline stage: `StageTraffic`."""

    stages: list[list[StageTraffic]] = field(default_factory=list)


def _levels(hw: SystemHardware, nodes: int) -> tuple[Level, Level | None]:
    return hw.fabric_level(), hw.network_level(nodes)


def expert_bytes(t: EvalTables, ranks: np.ndarray, experts: int, stage: int) -> tuple[np.ndarray, np.ndarray]:
    """(dispatch, combine) bytes per layer instance of a workload stage between one rank's tokens and each
    rank's experts: ``[experts]`` each."""
    src, dst = t.edge_src, t.edge_dst
    dispatch, combine = np.zeros(experts), np.zeros(experts)
    into = (t.unit_stage[dst] == stage) & (t.unit_kind[dst] == EXPERT) & (t.unit_kind[src] != EXPERT)
    out = (t.unit_stage[src] == stage) & (t.unit_kind[src] == EXPERT) & (t.unit_kind[dst] != EXPERT)
    per = t.edge_bytes * t.edge_repeat / t.stage_repeat[stage]
    np.add.at(dispatch, ranks[dst[into]], per[into])
    np.add.at(combine, ranks[src[out]], per[out])
    return dispatch, combine


def _all_to_all(to_rank: np.ndarray, from_rank: np.ndarray, node: np.ndarray, fabric: Level,
                network: Level | None) -> StageTraffic:
    """A direct all-to-all where rank r sends ``to_rank[q]`` to every other rank q and receives
    ``from_rank[r]`` from each: the busiest rank's time (on the fabric, on the network), energy and
    byte-hops."""
    E = len(to_rank)
    worst = fab_worst = net_worst = energy = hops = 0.0
    for r in range(E):
        same = (node == node[r]) & (np.arange(E) != r)
        other = node != node[r]
        sent_f, sent_n = to_rank[same].sum(), to_rank[other].sum()
        recv_f, recv_n = from_rank[r] * same.sum(), from_rank[r] * other.sum()
        t_f = all_to_all_s(sent_f, recv_f, fabric)
        t_n = all_to_all_s(sent_n, recv_n, network) if sent_n + recv_n > 0 else 0.0
        worst, fab_worst, net_worst = max(worst, t_f, t_n), max(fab_worst, t_f), max(net_worst, t_n)
        energy += sent_f * fabric.energy_j_per_byte + (sent_n * network.energy_j_per_byte if sent_n else 0.0)
        hops += sent_f * fabric.hops + (sent_n * network.hops if sent_n else 0.0)
    return StageTraffic(time_s=worst, fabric_s=fab_worst, network_s=net_worst, energy_j=energy, byte_hops=hops)


def handoff_bytes(t: EvalTables, held_next: np.ndarray, first_stage: int) -> float:
    """The hidden state entering a pipeline stage whose first held workload stage is ``first_stage``:
    the largest hand-off into it from a stage it does not hold or from the previous layer."""
    into = (t.unit_stage[t.edge_dst] == first_stage) & (
        (held_next[t.unit_stage[t.edge_src]] == 0) | (t.unit_stage[t.edge_src] >= first_stage))
    return float(t.edge_bytes[into].max()) if into.any() else 0.0


def layout_traffic(t: EvalTables, layout: Layout, held: list[np.ndarray], ranks: np.ndarray,
                   hw: SystemHardware) -> LayoutTraffic:
    """Cross-package costs of every stage of every replica of a layout (``held``: per pipeline stage the
    layer instances of each workload stage, dse.system.slices.layers_held; ``t``: tables at a rank's batch)."""
    fabric, network = _levels(hw, layout.nodes(hw.packages_per_node))
    per_node = hw.packages_per_node
    moe = [s for s in range(len(t.stage_repeat)) if ((t.unit_stage == s) & (t.unit_kind == EXPERT)).any()]
    volumes = {s: expert_bytes(t, ranks, layout.experts, s) for s in moe} if layout.experts > 1 else {}
    out = LayoutTraffic()
    classes: dict[int, list[StageTraffic]] = {}
    for d in range(layout.replicas):
        offset = layout.package(d, 0, 0) % per_node
        if offset in classes:                 # replicas that sit alike in their nodes cost alike
            out.stages.append(classes[offset])
            continue
        stages = []
        for p in range(layout.pipeline):
            st = StageTraffic()
            node = np.array([layout.node_of(p, r, per_node, d) for r in range(layout.experts)])
            for s, (dispatch, combine) in volumes.items():
                k = float(held[p][s])
                if k == 0:
                    continue
                for to_rank, from_rank in ((dispatch, dispatch), (combine, combine)):
                    st.add(_all_to_all(to_rank, from_rank, node, fabric, network), k)
            if p + 1 < layout.pipeline:
                first = int(np.flatnonzero(held[p + 1] > 0)[0])
                nbytes = handoff_bytes(t, held[p + 1], first)
                nxt = np.array([layout.node_of(p + 1, r, per_node, d) for r in range(layout.experts)])
                for r in range(layout.experts):
                    level = fabric if nxt[r] == node[r] else network
                    time = send_s(nbytes, level)
                    st.send_s = max(st.send_s, time)
                    st.energy_j += nbytes * level.energy_j_per_byte
                    st.byte_hops += nbytes * level.hops
                crosses = bool((nxt != node).any())
                if crosses:
                    st.network_s += st.send_s
                else:
                    st.fabric_s += st.send_s
            stages.append(st)
        classes[offset] = stages
        out.stages.append(stages)
    return out
