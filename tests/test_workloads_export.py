"""Trace exports (CSV / Parquet, SCALE-Sim GEMM topology, Chakra), the dse workload command, the study schema."""
import json

import pandas as pd
import pytest
import yaml

import workloads


def test_ops_round_trip_csv_and_parquet(tmp_path):
    wl = workloads.extract("mixtral-8x7b", batch=2, context=64)
    for suffix in ("csv", "parquet"):
        path = workloads.write_ops(wl, tmp_path / f"ops.{suffix}")
        back = pd.read_csv(path) if suffix == "csv" else pd.read_parquet(path)
        assert len(back) == len(wl.ops) and back["flops"].sum() == pytest.approx(wl.ops["flops"].sum())
    with pytest.raises(workloads.WorkloadError, match="use a .csv or .parquet"):
        workloads.write_ops(wl, tmp_path / "ops.txt")


def test_scalesim_topology_rows(tmp_path):
    wl = workloads.extract("llama-3-8b", phase="prefill", batch=1, context=128)
    path = workloads.to_scalesim_topology(wl, tmp_path / "topo.csv")
    lines = path.read_text().splitlines()
    assert lines[0] == "Layer name, M, N, K,"
    assert all(line.endswith(",") and len(line.split(",")) == 5 for line in lines)
    # parsed as SCALE-Sim does (scalesim.topology_utils.load_arrays_gemm: split on ',', drop the last)
    rows = {r.split(",")[0]: [int(x) for x in r.split(",")[1:4]] for r in lines[1:]}
    assert rows["L0-31.attn.qkv_projx32"] == [128, 6144, 4096]
    assert rows["L0-31.attn.attn_scorex256"] == [128 * 4, 128, 128]
    mm = wl.ops[wl.ops["engine"] == "matrix"]
    assert len(rows) == len(mm)


def test_scalesim_parses_the_topology(tmp_path):
    topo = pytest.importorskip("scalesim.topology_utils")
    wl = workloads.extract("deepseek-v3", phase="prefill", batch=1, context=256)
    path = workloads.to_scalesim_topology(wl, tmp_path / "ds.csv")
    t = topo.topologies()
    t.load_arrays(str(path), mnk_inputs=True)
    rows = workloads.export.scalesim_rows(wl)
    assert t.get_num_layers() == len(rows)
    assert t.get_all_mac_ops() == (rows["M"] * rows["N"] * rows["K"]).sum()


def test_chakra_traces_round_trip(tmp_path):
    pytest.importorskip("chakra")
    from chakra.schema.protobuf.et_def_pb2 import COMM_RECV_NODE, COMM_SEND_NODE, COMP_NODE, GlobalMetadata, Node
    from chakra.src.third_party.utils.protolib import decodeMessage
    wl = workloads.extract("gpt2", batch=2, context=32)
    paths = workloads.to_chakra(wl, tmp_path, npus=2)
    counts, flops = {}, 0
    for path in paths:
        with open(path, "rb") as f:
            decodeMessage(f, GlobalMetadata())
            node = Node()
            while decodeMessage(f, node):
                counts[node.type] = counts.get(node.type, 0) + 1
                flops += sum(a.int64_val for a in node.attr if a.name == "num_ops")
                node = Node()
    assert counts[COMP_NODE] == (wl.ops["layers"]).sum()          # layers unrolled: one node per op instance
    assert counts[COMM_SEND_NODE] == counts[COMM_RECV_NODE] > 0
    assert flops == pytest.approx(wl.summary["flops_per_step"], rel=1e-6)


def test_dse_workload_json_and_errors(dse_cli, tmp_path):
    code, out, _ = dse_cli("workload", "deepseek-v3", "--batch", "16", "--format", "json")
    assert code == 0
    d = json.loads(out)
    for key in ("total_params", "active_params_per_token", "kv_cache_bytes_per_token", "flops_per_step",
                "weight_bytes_per_step", "experts", "ops"):
        assert key in d
    assert d["experts"] == 256 and round(d["expected_distinct_experts_per_layer"]) == 102
    code, out, _ = dse_cli("workload", "gpt2", "--format", "csv", "--scalesim", tmp_path / "t.csv")
    assert code == 0 and out.startswith("unit,name,engine") and (tmp_path / "t.csv").exists()
    code, out, _ = dse_cli("workload", "mixtral-8x7b", "--phase", "prefill", "--context", "128")
    assert code == 0 and "distinct experts per layer" in out
    code, _, err = dse_cli("workload", "nope")
    assert code == 2 and err.startswith("error: unknown model 'nope'")


def _ensemble_study(tiny_dict, ensemble):
    d = dict(tiny_dict)
    d["workload"] = {"phase": "decode", "batch": 2, "context": 64, "ensemble": ensemble}
    return d


def test_study_takes_an_ensemble(dse_cli, tiny_dict, tmp_path):
    ens = {"morphology": "tree", "nodes": [{"name": "r", "router": {"classifier": {"in_features": 768}}},
                                           {"name": "math", "model": "gpt2"}, {"name": "code", "model": "gpt2"}],
           "edges": [["r", "math", 0.3], ["r", "code", 0.7]]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_ensemble_study(tiny_dict, ens)))
    code, out, err = dse_cli("validate", path)
    assert code == 0, err
    code, out, err = dse_cli("workload", path, "--format", "json")
    assert code == 0 and json.loads(out)["visit_prob"]["math"] == pytest.approx(0.3)


@pytest.mark.parametrize("workload,key,message", [
    ({"model": "gpt2", "ensemble": {"nodes": [{"name": "a", "model": "gpt2"}]}}, "workload",
     "give exactly one of workload.model"),
    ({"ensemble": {"nodes": [{"name": "a", "model": "gpt-17"}]}}, "workload.ensemble.nodes[0].model",
     "unknown model 'gpt-17'"),
    ({"ensemble": {"nodes": [{"name": "a"}]}}, "workload.ensemble.nodes[0]", "exactly one of model, router, composer"),
    ({"ensemble": {"morphology": "ring", "nodes": [{"name": "a", "model": "gpt2"}]}}, "workload.ensemble.morphology",
     "chain"),
    ({"model": "gpt2", "routing": {"distribution": "trace"}}, "workload.routing", "routing.trace"),
])
def test_workload_section_errors_name_the_key(dse_cli, tiny_dict, tmp_path, workload, key, message):
    d = dict(tiny_dict)
    d["workload"] = workload
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(d))
    code, _, err = dse_cli("validate", path)
    assert code == 2 and f"{key}: " in err and message in err, err
