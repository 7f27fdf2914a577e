"""Chakra export: per-chiplet ASTRA-sim traces that decode, pair up, carry the design's traffic and
can run to the end without a deadlock."""
import dataclasses
from collections import defaultdict

import numpy as np
import pytest
import yaml

pytest.importorskip("chakra.schema.protobuf.et_def_pb2", reason="mlc-chakra is in the test extra")
from chakra.schema.protobuf.et_def_pb2 import (  # noqa: E402
    COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE, GlobalMetadata, Node)
from chakra.src.third_party.utils.protolib import decodeMessage  # noqa: E402

from dse.exports import export_design  # noqa: E402
from dse.exports.common import load_context  # noqa: E402
from results_helpers import DESIGN_ID, tiny_design, tiny_results_folder  # noqa: E402


def read_trace(path):
    nodes = []
    with open(path, "rb") as fh:
        meta = GlobalMetadata()
        decodeMessage(fh, meta)
        while True:
            node = Node()
            if not decodeMessage(fh, node):
                break
            nodes.append(node)
    return meta, nodes


def attrs(node):
    return {a.name: getattr(a, a.WhichOneof("value")) for a in node.attr}


def read_all(folder, n):
    return {i: read_trace(folder / f"{DESIGN_ID}.{i}.et")[1] for i in range(n)}


def runs_to_completion(traces):
    """Each NPU walks its nodes in order; a send is posted at once, a receive waits for its send."""
    posted, pos = set(), {i: 0 for i in traces}
    progress = True
    while progress:
        progress = False
        for i, nodes in traces.items():
            while pos[i] < len(nodes):
                node = nodes[pos[i]]
                a = attrs(node)
                if node.type == COMM_RECV_NODE and a["comm_tag"] not in posted:
                    break
                if node.type == COMM_SEND_NODE:
                    posted.add(a["comm_tag"])
                pos[i] += 1
                progress = True
    return all(pos[i] == len(traces[i]) for i in traces)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tiny_results_folder(tmp_path_factory.mktemp("chakra") / "res")


def test_traces_hold_the_units_and_the_traffic(folder, tmp_path):
    files = export_design(folder, DESIGN_ID, "chakra", tmp_path)
    design = tiny_design()
    traces = read_all(tmp_path, 4)
    assert (tmp_path / "README.md").read_text().startswith("Targets: ASTRA-sim")
    assert len(files) == 5
    ctx = load_context(folder, DESIGN_ID)
    layers = {"embed": 1, "L0-11.attn": 12, "L0-11.ffn": 12, "lm_head": 1}
    for npu, nodes in traces.items():
        comp = [n.name.split("#")[0] for n in nodes if n.type == COMP_NODE]
        held = [u for u, slots in design.placement.items() if npu in slots]
        assert sorted(set(comp)) == sorted(held)
        assert all(comp.count(u) == layers[u] for u in held)
        for k, node in enumerate(nodes):
            assert list(node.data_deps) == ([] if k == 0 else [nodes[k - 1].id])
    sends = {attrs(n)["comm_tag"]: attrs(n) for t in traces.values() for n in t if n.type == COMM_SEND_NODE}
    recvs = {attrs(n)["comm_tag"]: attrs(n) for t in traces.values() for n in t if n.type == COMM_RECV_NODE}
    assert sends == recvs
    sent = np.zeros((4, 4))
    for a in sends.values():
        sent[a["comm_src"], a["comm_dst"]] += a["comm_size"]
    np.testing.assert_allclose(sent, ctx.traffic_bytes(), rtol=1e-6, atol=4)
    assert runs_to_completion(traces)


def test_attention_compute_time_is_the_cost_table(folder, tmp_path):
    export_design(folder, DESIGN_ID, "chakra", tmp_path)
    ctx = load_context(folder, DESIGN_ID)
    t = ctx.prepared.tables
    u = t.unit_names.index("L0-11.attn")
    k = t.kind_names.index("small")                       # slots 1 and 3 hold the two attention copies
    node = next(n for n in read_all(tmp_path, 4)[1] if n.name == "L0-11.attn#0")
    assert node.duration_micros == round(t.unit_time_s[u, k] / 2 * 1e6)
    assert attrs(node)["num_ops"] > 0 and attrs(node)["tensor_size"] > 0


def test_shards_all_reduce_in_a_ring(folder, tmp_path):
    design = dataclasses.replace(tiny_design(), mapping="one-to-many")
    (folder / "designs" / "dshard.yaml").write_text(yaml.safe_dump(design.to_dict()))
    export_design(folder, "dshard", "chakra", tmp_path)
    traces = {i: read_trace(tmp_path / f"dshard.{i}.et")[1] for i in range(4)}
    ring = [n for n in traces[1] if "allreduce" in n.name and n.type == COMM_SEND_NODE]
    assert len(ring) == 12 * 2 * (2 - 1) and {attrs(n)["comm_dst"] for n in ring} == {3}
    assert runs_to_completion(traces)
