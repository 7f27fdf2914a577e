"""Write a `Workload` for other tools: operator table (CSV / Parquet), SCALE-Sim GEMM topology, Chakra ET.

* `write_ops`: the operator table as CSV or Parquet (by the file suffix).
* `to_scalesim_topology`: SCALE-Sim's GEMM topology CSV (``scalesim -i gemm``): a header and one
  ``name, M, N, K,`` row (trailing comma; SCALE-Sim multiplies an M x K input by a K x N filter) per
  matrix operator. SCALE-Sim has no batch dimension: a row is one GEMM instance and its name ends with
  ``xR`` where R = instances per step (batch x identical layers); expected token counts are rounded
  up to whole rows, and routed experts appear with the tokens they see when they run.
* `to_chakra`: Chakra execution traces for ASTRA-sim (MLCommons ``mlc-chakra`` schema): one file
  ``<prefix>.<npu>.et`` per NPU. Layers are unrolled; every operator of a unit placed on the NPU is a
  COMP_NODE (``num_ops`` expected FLOPs, ``tensor_size`` expected bytes it moves), each hand-off between
  units on different NPUs a COMM_SEND_NODE / COMM_RECV_NODE pair (``comm_size`` bytes, matching
  ``comm_tag``), and data dependencies follow the unit graph's edges.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from .errors import WorkloadError
from .workload import Workload


def write_ops(wl: Workload, path: str | Path) -> Path:
    """Write the operator table to ``.csv`` or ``.parquet``."""
    path = Path(path)
    if path.suffix == ".csv":
        wl.ops.to_csv(path, index=False)
    elif path.suffix in (".parquet", ".pq"):
        wl.ops.to_parquet(path, index=False)
    else:
        raise WorkloadError(f"cannot write operators to {path}: use a .csv or .parquet file")
    return path


def scalesim_rows(wl: Workload) -> pd.DataFrame:
    """(name, M, N, K) of every matrix operator, one GEMM instance each (module docstring)."""
    mm = wl.ops[(wl.ops["engine"] == "matrix") & (wl.ops["prob"] > 0)]
    instances = (mm["batch"] * mm["layers"]).round().astype(int)
    names = mm["unit"].astype(str) + "." + mm["name"].astype(str) + "x" + instances.astype(str)
    return pd.DataFrame({"name": names.str.replace(",", ";"),
                         "M": mm["M"].map(lambda v: max(int(math.ceil(v - 1e-9)), 1)),
                         "N": mm["N"].astype(int), "K": mm["K"].astype(int)})


def to_scalesim_topology(wl: Workload, path: str | Path) -> Path:
    """Write SCALE-Sim's GEMM topology CSV (``Layer name, M, N, K,`` header and rows)."""
    rows = scalesim_rows(wl)
    lines = ["Layer name, M, N, K,"] + [f"{r.name}, {r.M}, {r.N}, {r.K}," for r in rows.itertuples()]
    path = Path(path)
    path.write_text("\n".join(lines) + "\n")
    return path


def to_chakra(wl: Workload, folder: str | Path, npus: int = 1, placement: dict[str, int] | None = None,
              prefix: str = "workload", metadata: dict[str, str] | None = None) -> list[Path]:
    """Write Chakra execution traces (one per NPU) of one step; ``placement`` maps unit -> NPU
    (default: units dealt round-robin in stage order); ``metadata``: string attributes of each file's
    GlobalMetadata. Needs the ``mlc-chakra`` package."""
    try:
        from chakra.schema.protobuf.et_def_pb2 import (COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE,
                                                       AttributeProto, GlobalMetadata, Node)
        from chakra.src.third_party.utils.protolib import encodeMessage
    except ImportError:
        raise WorkloadError("Chakra export needs the mlc-chakra package: pip install 'chiplet-dse[chakra]'") from None
    if npus < 1:
        raise WorkloadError(f"npus must be >= 1, got {npus}")
    units = wl.units
    placement = dict(placement or {u: i % npus for i, u in enumerate(units)})
    missing = [u for u in units if u not in placement]
    if missing or any(not 0 <= p < npus for p in placement.values()):
        raise WorkloadError(f"placement must map every unit to an NPU in 0..{npus - 1}"
                            + (f" (missing {missing[0]!r})" if missing else ""))
    g = wl.graph
    stage_prob = wl.stages.set_index("stage")["prob"].to_dict()
    ops_by_unit = {u: df for u, df in wl.ops.groupby("unit", sort=False)}
    nodes: list[list] = [[] for _ in range(npus)]
    last: dict[tuple[str, int], tuple[int, int]] = {}   # (unit, instance) -> (npu, node id) of its last op
    next_id = [0] * npus
    tag = [0]

    def add(npu, name, ntype, deps, attrs):
        node = Node(id=next_id[npu], name=name, type=ntype)
        node.data_deps.extend(sorted(set(deps)))
        node.attr.append(AttributeProto(name="is_cpu_op", bool_val=False))
        node.attr.extend(attrs)
        nodes[npu].append(node)
        next_id[npu] += 1
        return node.id

    def handoff(src, s_inst, dst, d_inst, nbytes) -> list[int]:
        """Dependencies on dst's NPU for the hand-off src[s_inst] -> dst[d_inst]."""
        if (src, s_inst) not in last:
            return []
        s_npu, s_node = last[(src, s_inst)]
        d_npu = placement[dst]
        if s_npu == d_npu:
            return [s_node]
        tag[0] += 1
        comm = [AttributeProto(name="comm_src", int32_val=s_npu), AttributeProto(name="comm_dst", int32_val=d_npu),
                AttributeProto(name="comm_size", int64_val=int(round(nbytes))),
                AttributeProto(name="comm_tag", int32_val=tag[0])]
        add(s_npu, f"send {src}->{dst}", COMM_SEND_NODE, [s_node], comm)
        return [add(d_npu, f"recv {src}->{dst}", COMM_RECV_NODE, [], comm)]

    for stage in wl.stages.itertuples():
        members = [u for u in units if g.nodes[u]["stage"] == stage.stage]
        for inst in range(int(stage.repeat)):
            for u in members:
                npu = placement[u]
                deps = []
                for src, _, d in g.in_edges(u, data=True):
                    sn, dn = g.nodes[src], g.nodes[u]
                    if sn["stage"] > stage.stage:               # a layer feeding the next identical layer
                        if inst > 0:
                            deps += handoff(src, inst - 1, u, inst, d["bytes"])
                    elif (sn["layers"] == stage.repeat and sn.get("first_layer", -1) == dn.get("first_layer", -1)
                          and sn.get("model", "") == dn.get("model", "") and d["repeat"] == stage.repeat):
                        deps += handoff(src, inst, u, inst, d["bytes"])   # same layer instance
                    elif inst == 0:                              # entry from the previous group or model
                        deps += handoff(src, _last_instance(wl, src), u, inst, d["bytes"])
                prev = None
                for op in ops_by_unit.get(u, pd.DataFrame()).itertuples():
                    p = op.prob * stage_prob.get(stage.stage, 1.0)
                    moved = op.weight_bytes + op.act_in_bytes + op.act_out_bytes + op.kv_read_bytes + op.kv_write_bytes
                    attrs = [AttributeProto(name="num_ops", int64_val=int(round(op.flops * p))),
                             AttributeProto(name="tensor_size", uint64_val=int(round(moved * p)))]
                    prev = add(npu, f"{u}.{op.name}[{inst}]", COMP_NODE, deps if prev is None else [prev], attrs)
                if prev is not None:
                    last[(u, inst)] = (npu, prev)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for npu in range(npus):
        path = folder / f"{prefix}.{npu}.et"
        with path.open("wb") as f:
            encodeMessage(f, GlobalMetadata(version="0.0.4", attr=[AttributeProto(name=k, string_val=v)
                                                                   for k, v in (metadata or {}).items()]))
            for node in nodes[npu]:
                encodeMessage(f, node)
        paths.append(path)
    return paths


def _last_instance(wl: Workload, unit: str) -> int:
    return int(wl.graph.nodes[unit]["layers"]) - 1
