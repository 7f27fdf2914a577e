"""Export a design as Chakra execution traces for ASTRA-sim: one ``<id>.<npu>.et`` file per chiplet.

The step is unrolled into stage instances: stages of one layer group (same name prefix and repeat
count, e.g. ``L0-31.attention`` and ``L0-31.moe``) interleave layer by layer, other stages follow in
order. On each chiplet (NPU), in that order:

* ``COMM_RECV_NODE`` for every hand-off arriving from another chiplet before a stage instance;
* ``COMP_NODE`` per unit copy the chiplet holds: ``duration_micros`` = the unit's time on this chiplet
  kind (arch cost tables) x its share of the work, rounded to whole microseconds, and for ASTRA-sim's
  roofline mode ``num_ops`` (FLOPs) and ``tensor_size`` (bytes of weights and KV read);
* ``COMM_SEND_NODE`` for every hand-off it sends once the producing unit has run; shards of a
  one-to-many unit all-reduce with a ring of send/receive pairs.

Sends and receives carry ``comm_src`` / ``comm_dst`` (NPU ids = mesh slots, row-major), ``comm_size``
(expected bytes of the hand-off, dse.model.traffic) and a ``comm_tag`` shared by the pair. Each node depends
on the previous node of its chiplet (a chiplet runs one thing at a time, as in the evaluator).
Stages that run with probability below one (ensembles) are written as if they always run.
Written with the Chakra schema of the PyPI package ``mlc-chakra`` (et_def.proto, protolib).
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from ..errors import StudyError
from ..model.traffic import unit_flows
from ..study.space import SPLIT_MAPPINGS
from .common import ExportContext, write_readme

TOOL = "ASTRA-sim (Chakra execution traces)"
TARGET = "2.x, Chakra schema of PyPI mlc-chakra 1.0.0 (et_def.proto)"
SCHEMA = "1.0.2-chakra.1.0.0"


def _chakra():
    try:
        from chakra.schema.protobuf import et_def_pb2 as et
        from chakra.src.third_party.utils.protolib import encodeMessage
    except ImportError:
        raise StudyError("the chakra export needs the Chakra trace writer: pip install 'chiplet-dse[chakra]' "
                         "(PyPI mlc-chakra)", key="--to") from None
    return et, encodeMessage


def stage_instances(stages) -> list[tuple[int, int]]:
    """(stage, layer instance) in execution order: a layer group's stages interleave layer by layer."""
    order: list[tuple[int, int]] = []
    rows = list(stages.itertuples(index=False))
    i = 0
    while i < len(rows):
        prefix = str(rows[i].name).split(".")[0]
        j = i
        while j + 1 < len(rows) and rows[j + 1].repeat == rows[i].repeat and \
                str(rows[j + 1].name).split(".")[0] == prefix:
            j += 1
        for layer in range(int(rows[i].repeat)):
            order += [(int(rows[k].stage), layer) for k in range(i, j + 1)]
        i = j + 1
    return order


def _occurrences(s_src: int, s_dst: int, edge_repeat: int, repeat: dict, position: dict) -> list[tuple[int, int]]:
    """(receiving layer instance, sending layer instance) of each occurrence of a hand-off in one step.

    Within a layer group the sender's stage either precedes the receiver's in every layer (same layer
    instance) or feeds the next layer back (``repeat - 1`` occurrences, from the layer before); a
    hand-off from an earlier group comes from its last instance, before the first layer only, unless
    it occurs in every layer."""
    r = repeat[s_dst]
    same_group = repeat[s_src] == r and (s_src, 0) in position and s_src != s_dst
    if same_group and position[(s_src, 0)] > position[(s_dst, 0)]:
        return [(layer, layer - 1) for layer in range(1, r)]
    if same_group and edge_repeat == r:
        return [(layer, layer) for layer in range(r)]
    last = repeat[s_src] - 1
    return [(layer, last) for layer in range(r)] if edge_repeat == r else [(0, last)]


def trace_events(ctx: ExportContext) -> dict[int, list[tuple]]:
    """Per NPU, the ordered events ``(kind, name, fields)`` of one step (see module docstring)."""
    t = ctx.prepared.tables
    d = ctx.design
    wl = t.workload
    position = {inst: p for p, inst in enumerate(stage_instances(wl.stages))}
    repeat = {int(r.stage): int(r.repeat) for r in wl.stages.itertuples(index=False)}
    stage_of = {u: int(t.unit_stage[i]) for i, u in enumerate(t.unit_names)}
    kind_index = {k: i for i, k in enumerate(t.kind_names)}
    ops = wl.ops
    flops = (ops["flops"] * ops["prob"]).groupby(ops["unit"]).sum()
    split = d.mapping in SPLIT_MAPPINGS
    events: dict[int, list] = defaultdict(list)     # npu -> [(position, order, kind, name, fields)]
    for u_index, u in enumerate(t.unit_names):
        s = stage_of[u]
        copies = d.placement[u]
        share = 1.0 / len(copies)
        for layer in range(repeat[s]):
            p = position[(s, layer)]
            for slot in copies:
                k = kind_index[d.chiplets[slot]]
                time_s = t.unit_time_s[u_index, k] * share
                nbytes = (t.unit_weight_read[u_index] + t.unit_other_dram[u_index, k]) * share
                events[slot].append((p, 1, "comp", f"{u}#{layer}", dict(
                    duration_micros=int(round(time_s * 1e6)), num_ops=int(round(float(flops.get(u, 0.0)) * share)),
                    tensor_size=int(round(nbytes)))))
    tag = 0
    flows = unit_flows(d, t)
    for f in flows[flows["src_slot"] != flows["dst_slot"]].itertuples(index=False):
        if f.kind == "all-reduce":
            continue
        s_dst, s_src = stage_of[f.dst_unit], stage_of[f.src_unit]
        for layer, src_layer in _occurrences(s_src, s_dst, int(round(t.edge_repeat[f.edge])), repeat, position):
            size = max(1, int(round(f.bytes_per_occurrence)))
            name = f"{f.src_unit}->{f.dst_unit}#{layer}"
            events[f.src_slot].append((position[(s_src, src_layer)], 2, "send", name,
                                       dict(comm_src=f.src_slot, comm_dst=f.dst_slot, comm_size=size, comm_tag=tag)))
            events[f.dst_slot].append((position[(s_dst, layer)], 0, "recv", name,
                                       dict(comm_src=f.src_slot, comm_dst=f.dst_slot, comm_size=size, comm_tag=tag)))
            tag += 1
    if split:
        for u_index, u in enumerate(t.unit_names):
            ring = d.placement[u]
            c = len(ring)
            if c < 2:
                continue
            chunk = max(1, int(round(t.unit_out_bytes[u_index] / c)))
            s = stage_of[u]
            for layer in range(repeat[s]):
                p = position[(s, layer)]
                for step in range(2 * (c - 1)):
                    for r in range(c):
                        a, b = ring[r], ring[(r + 1) % c]
                        name = f"{u}:allreduce{step}#{layer}"
                        fields = dict(comm_src=a, comm_dst=b, comm_size=chunk, comm_tag=tag)
                        events[a].append((p, 3 + 2 * step, "send", name, fields))
                        events[b].append((p, 4 + 2 * step, "recv", name, fields))
                        tag += 1
    return {npu: [(kind, name, fields) for _, _, kind, name, fields in sorted(ev, key=lambda e: (e[0], e[1]))]
            for npu, ev in events.items()}


def export(ctx: ExportContext, out: Path) -> list[Path]:
    et, encode = _chakra()
    node_type = {"comp": et.COMP_NODE, "send": et.COMM_SEND_NODE, "recv": et.COMM_RECV_NODE}
    events = trace_events(ctx)
    written = []
    for npu in range(ctx.n):
        path = out / f"{ctx.design_id}.{npu}.et"
        with open(path, "wb") as fh:
            encode(fh, et.GlobalMetadata(version="0.0.4", attr=[et.AttributeProto(name="schema",
                                                                                    string_val=SCHEMA)]))
            previous = None
            for node_id, (kind, name, fields) in enumerate(events.get(npu, [])):
                node = et.Node(id=node_id, name=name, type=node_type[kind])
                node.attr.append(et.AttributeProto(name="is_cpu_op", bool_val=False))
                if kind == "comp":
                    node.duration_micros = fields["duration_micros"]
                    node.attr.append(et.AttributeProto(name="num_ops", int64_val=fields["num_ops"]))
                    node.attr.append(et.AttributeProto(name="tensor_size", uint64_val=fields["tensor_size"]))
                else:
                    for key in ("comm_src", "comm_dst", "comm_size", "comm_tag"):
                        node.attr.append(et.AttributeProto(name=key, int64_val=int(fields[key])))
                if previous is not None:
                    node.data_deps.append(previous)
                previous = node_id
                encode(fh, node)
        written.append(path)
    sizes = np.array([len(events.get(i, [])) for i in range(ctx.n)])
    written.append(write_readme(out, TOOL, TARGET, [
        f"Design `{ctx.design_id}` of study `{ctx.study.name}`: {ctx.n} NPUs (chiplets, row-major mesh slots), "
        f"{int(sizes.sum())} trace nodes. Point ASTRA-sim at the prefix:", "",
        f"    --workload-configuration={ctx.design_id}", "",
        f"and give it a {ctx.design.rows} x {ctx.design.cols} mesh network. `chakra_jsonizer --input_filename "
        f"{ctx.design_id}.0.et --output_filename npu0.json` shows a trace as JSON."]))
    return written
