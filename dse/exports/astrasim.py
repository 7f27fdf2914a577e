"""Export a system design to ASTRA-sim: its network and system configurations and one Chakra execution
trace per package (NPU = package; the chiplets inside a package are the `chakra` export's).

* ``network.yml`` (analytical backend): one dimension per level, the fabric of a node (``Switch`` when
  switched, ``FullyConnected`` for a full mesh of links) and, with several nodes, the network (``Switch``):
  packages per dimension, GB/s per package link and latency in ns (wire, NICs and switches; the
  software step of a collective, ``sync_latency``, is ``endpoint-delay`` in ``system.json``);
* ``system.json``: ring all-reduce, all-gather and reduce-scatter and direct all-to-all on every
  dimension (the algorithms dse.system.collectives costs), the package's HBM bandwidth as ``local-mem-bw``;
* ``remote_memory.json``: no memory expansion;
* ``comm_groups.json``: one communicator per expert-parallel group (the ranks of a pipeline stage of a
  replica), named by the ``pg_name`` of the trace nodes;
* ``<id>.<npu>.et``: per package, its step in execution order: ``COMM_RECV_NODE`` of the hidden state
  from the previous pipeline stage, per layer instance of each workload stage it holds a ``COMP_NODE``
  (the package evaluator's time of the stage instance, dse.model.breakdown.design_state) between an
  all-to-all dispatch and combine (``COMM_COLL_NODE``, ``ALL_TO_ALL``) when the stage has routed experts
  and the layout expert ranks, and ``COMM_SEND_NODE`` of the hidden state to the next stage. NPUs of a
  node that the layout leaves empty get a trace without nodes.

Written with the Chakra schema of the PyPI package ``mlc-chakra``; config formats as in ASTRA-sim's
tutorials (astra-sim/tutorials, micro2024 demo inputs).
"""
from __future__ import annotations

import math

from collections import defaultdict
from pathlib import Path

import numpy as np
import yaml

from ..errors import StudyError
from ..model.breakdown import design_state
from ..model.prepare import Prepared
from ..system.layout import Layout
from ..system.slices import EXPERT
from ..system.traffic import expert_bytes, handoff_bytes
from .chakra import SCHEMA, _chakra
from .common import ExportContext, write_json, write_readme

TOOL = "ASTRA-sim"
TARGET = "2.x analytical backend (network.yml / system.json / comm groups), Chakra schema of PyPI mlc-chakra 1.0.0"


def _require_system(ctx: ExportContext) -> None:
    if ctx.system is None:
        raise StudyError("the astrasim export writes a system of packages (a study with a system section); for "
                         "one package use --to chakra", key="--to")


def network_config(ctx: ExportContext) -> dict:
    hw = ctx.system.system_evaluator.hardware
    layout = Layout(**ctx.design.system)
    nodes = layout.nodes(hw.packages_per_node)
    fabric = hw.fabric_level()
    per_node = hw.packages_per_node if nodes > 1 else layout.packages
    if fabric.torus:             # a torus: one Ring per dimension; fewer packages than it: one ring of them
        sizes = fabric.torus if per_node == math.prod(fabric.torus) else (per_node,)
        dims = [("Ring", k, fabric.pair_bandwidth_Bps, fabric.alpha_s - fabric.sync_s) for k in sizes]
    else:
        dims = [("Switch" if fabric.switched else "FullyConnected", per_node, fabric.pair_bandwidth_Bps,
                 fabric.alpha_s - fabric.sync_s)]
    if nodes > 1:
        network = hw.network_level(nodes)
        dims.append(("Switch", nodes, network.bandwidth_Bps, network.alpha_s - network.sync_s))
    return {"topology": [d[0] for d in dims], "npus_count": [int(d[1]) for d in dims],
            "bandwidth": [round(d[2] / 1e9, 6) for d in dims], "latency": [round(d[3] * 1e9, 3) for d in dims]}


def system_config(ctx: ExportContext, dims: int) -> dict:
    t = ctx.prepared.tables
    stacks = max(ctx.design.hbm_stacks) if ctx.design.hbm_stacks else 0
    fabric = ctx.system.system_evaluator.hardware.fabric_level()
    return {"scheduling-policy": "LIFO", "endpoint-delay": int(round(fabric.sync_s * 1e9)),
            "active-chunks-per-dimension": 1, "preferred-dataset-splits": 4,
            "all-reduce-implementation": ["ring"] * dims, "all-gather-implementation": ["ring"] * dims,
            "reduce-scatter-implementation": ["ring"] * dims, "all-to-all-implementation": ["direct"] * dims,
            "collective-optimization": "localBWAware",
            "local-mem-bw": round(stacks * t.hbm_bw_Bps / 1e9, 3) if t.hbm else 0, "boost-mode": 0}


def instance_order(held: np.ndarray, layers) -> list[tuple[int, int]]:
    """(workload stage, layer instance) in the order a package runs them: stages of one layer group
    (same first layer and count) interleave layer by layer."""
    stages = [int(s) for s in np.flatnonzero(held > 0)]
    order, i = [], 0
    while i < len(stages):
        j = i
        key = (layers.first[stages[i]], layers.count[stages[i]])
        while j + 1 < len(stages) and (layers.first[stages[j + 1]], layers.count[stages[j + 1]]) == key and \
                key[0] >= 0:
            j += 1
        for k in range(int(held[stages[i]])):
            order += [(s, k) for s in stages[i: j + 1]]
        i = j + 1
    return order


def trace_events(ctx: ExportContext) -> tuple[dict[int, list[tuple]], dict[str, list[int]]]:
    """Per NPU the ordered ``(kind, name, fields)`` of one step, and the communicator groups."""
    ev = ctx.system.system_evaluator
    layout = Layout(**ctx.design.system)
    split = ev.bank.get(layout.pipeline, layout.experts)
    rank_t = split.rank_tables
    names = list(rank_t.workload.stages["name"]) if "name" in rank_t.workload.stages else None
    layers = ev.bank.layers
    moe = {s: expert_bytes(rank_t, split.ranks, layout.experts, s) for s in range(len(rank_t.stage_repeat))
           if layout.experts > 1 and ((rank_t.unit_stage == s) & (rank_t.unit_kind == EXPERT)).any()}
    events: dict[int, list] = defaultdict(list)
    groups: dict[str, list[int]] = {}
    for p in range(layout.pipeline):
        held = split.held[p]
        kept = np.flatnonzero(held > 0)
        new = {int(s): i for i, s in enumerate(kept)}
        handoff = handoff_bytes(rank_t, split.held[p + 1], int(np.flatnonzero(split.held[p + 1] > 0)[0])) \
            if p + 1 < layout.pipeline else 0.0
        for r in range(layout.experts):
            share = split.shares[p][r]
            W, _ = design_state(ctx.design, Prepared(study=ev.bank.package_study, tables=share.tables,
                                                     space=share.evaluator.space, evaluator=share.evaluator))
            for d in range(layout.replicas):
                npu = layout.package(d, p, r)
                group = str(1 + d * layout.pipeline + p)
                groups.setdefault(group, []).append(npu)
                if p > 0:
                    events[npu].append(("recv", f"stage{p}<-stage{p - 1}", dict(
                        comm_src=layout.package(d, p - 1, r), comm_dst=npu, comm_size=max(1, int(round(
                            handoff_bytes(rank_t, held, int(kept[0]))))), comm_tag=npu)))
                for s, k in instance_order(held, layers):
                    label = f"{names[s] if names else s}#{k}"
                    i = new[s]
                    seconds = W.stage_t[i] + W.comm[i, 0 if k == 0 else 1]
                    if s in moe:
                        events[npu].append(("coll", f"{label}:dispatch", dict(
                            comm_size=max(1, int(round(moe[s][0].sum()))), pg_name=group)))
                    events[npu].append(("comp", label, dict(duration_micros=int(round(seconds * 1e6)))))
                    if s in moe:
                        events[npu].append(("coll", f"{label}:combine", dict(
                            comm_size=max(1, int(round(moe[s][1].sum()))), pg_name=group)))
                if p + 1 < layout.pipeline:
                    dst = layout.package(d, p + 1, r)
                    events[npu].append(("send", f"stage{p}->stage{p + 1}", dict(
                        comm_src=npu, comm_dst=dst, comm_size=max(1, int(round(handoff))), comm_tag=dst)))
    return dict(events), (groups if layout.experts > 1 else {})


def export(ctx: ExportContext, out: Path) -> list[Path]:
    _require_system(ctx)
    et, encode = _chakra()
    network = network_config(ctx)
    npus = int(np.prod(network["npus_count"]))
    events, groups = trace_events(ctx)
    node_type = {"comp": et.COMP_NODE, "send": et.COMM_SEND_NODE, "recv": et.COMM_RECV_NODE,
                 "coll": et.COMM_COLL_NODE}
    written = []
    for npu in range(npus):
        path = out / f"{ctx.design_id}.{npu}.et"
        with open(path, "wb") as fh:
            encode(fh, et.GlobalMetadata(version="0.0.4", attr=[et.AttributeProto(name="schema", string_val=SCHEMA)]))
            for node_id, (kind, name, fields) in enumerate(events.get(npu, [])):
                node = et.Node(id=node_id, name=name, type=node_type[kind])
                node.attr.append(et.AttributeProto(name="is_cpu_op", bool_val=False))
                if kind == "comp":
                    node.duration_micros = fields["duration_micros"]
                elif kind == "coll":
                    node.attr.append(et.AttributeProto(name="comm_type", int64_val=et.ALL_TO_ALL))
                    node.attr.append(et.AttributeProto(name="comm_size", int64_val=fields["comm_size"]))
                    node.attr.append(et.AttributeProto(name="pg_name", string_val=fields["pg_name"]))
                    node.attr.append(et.AttributeProto(name="involved_dim", bool_list=et.BoolList(
                        values=[True] * len(network["npus_count"]))))
                else:
                    for key in ("comm_src", "comm_dst", "comm_size", "comm_tag"):
                        node.attr.append(et.AttributeProto(name=key, int64_val=int(fields[key])))
                if node_id:
                    node.data_deps.append(node_id - 1)
                encode(fh, node)
        written.append(path)
    (out / "network.yml").write_text(yaml.safe_dump(network, sort_keys=False, default_flow_style=None))
    written.append(out / "network.yml")
    written.append(write_json(out / "system.json", system_config(ctx, len(network["npus_count"]))))
    written.append(write_json(out / "remote_memory.json", {"memory-type": "NO_MEMORY_EXPANSION"}))
    written.append(write_json(out / "comm_groups.json", groups))
    layout = Layout(**ctx.design.system)
    written.append(write_readme(out, TOOL, TARGET, [
        f"Design `{ctx.design_id}` of study `{ctx.study.name}`: {layout.packages} packages ({layout.pipeline} "
        f"pipeline stages x {layout.experts} expert ranks x {layout.replicas} replicas) as {npus} NPUs "
        f"({' x '.join(map(str, network['npus_count']))}). Run the analytical backend with:", "",
        f"    AstraSim_Analytical_Congestion_Aware --workload-configuration={ctx.design_id} \\",
        "        --system-configuration=system.json --network-configuration=network.yml \\",
        "        --remote-memory-configuration=remote_memory.json --comm-group-configuration=comm_groups.json",
        "", "Compute durations are the toolkit's package model (each package's stage instance, hand-offs "
        "between its chiplets included); the chiplets of one package are `dse export --to chakra`."]))
    return written
