"""Expert routing: distinct experts a batch touches, skewed distributions, traces, affinity."""
import json

import numpy as np
import pytest

import workloads
from workloads.routing import monotone_coupling, synthetic_affinity


@pytest.mark.parametrize("batch,expected", [(1, 8), (16, 102), (64, 222)])
def test_deepseek_v3_decode_touches_distinct_experts(batch, expected):
    # E (1 - (1 - k/E)^B), E 256, k 8 (shared/reference/workloads.md: 8, 102, 222)
    s = workloads.extract("deepseek-v3", batch=batch, context=128).summary
    assert s["expected_distinct_experts_per_layer"] == pytest.approx(256 * (1 - (1 - 8 / 256) ** batch))
    assert round(s["expected_distinct_experts_per_layer"]) == expected


def test_decode_weight_traffic_counts_distinct_experts_not_top_k():
    wl = workloads.extract("mixtral-8x7b", batch=4, context=128)
    experts = wl.ops[(wl.ops["unit"].str.contains(r"\.e\d")) & (wl.ops["name"] == "down_proj")]
    read = (experts["weight_bytes"] * experts["prob"]).sum()
    assert read == pytest.approx(5.47 * 14336 * 4096 * 2, rel=1e-3)     # Mixtral B 4 -> 5.5 experts


def test_zipf_and_dirichlet_are_skewed_and_sum_to_k():
    for q in (workloads.selection_probabilities(64, 8, "zipf", s=1.0, seed=1),
              workloads.selection_probabilities(64, 8, "dirichlet", alpha=0.3, seed=1)):
        assert q.sum() == pytest.approx(8)
        assert q.max() <= 1.0 + 1e-12
        assert q.max() / q.mean() > 3
    # skew touches fewer distinct experts than uniform at the same batch (Jensen)
    u = workloads.expected_distinct_experts(np.full(64, 8 / 64), 16)
    z = workloads.expected_distinct_experts(workloads.selection_probabilities(64, 8, "zipf", s=1.0), 16)
    assert z < u


def _gini(x):
    x = np.sort(x)
    n = x.size
    return float((2 * np.arange(1, n + 1) - n - 1).dot(x) / (n * x.sum()))


@pytest.mark.parametrize("s,max_mean,gini", [(0.5, 3.7, 0.25), (1.0, 7.1, 0.50)])
def test_zipf_top_k_sampling_matches_reference_loads(s, max_mean, gini):
    # shared/reference/workloads.md: Zipf-rank popularity with top-k sampling, 64 experts, top-8
    q = workloads.selection_probabilities(64, 8, "zipf", s=s, seed=3)
    assert q.max() / q.mean() == pytest.approx(max_mean, rel=0.03)
    assert _gini(q) == pytest.approx(gini, abs=0.01)


def test_plackett_luce_inclusion_matches_sampling():
    from workloads.routing import plackett_luce_inclusion
    w = np.random.default_rng(5).dirichlet(np.full(12, 0.5))
    q = plackett_luce_inclusion(w, 3)
    rng = np.random.default_rng(0)
    keys = np.log(w)[None, :] + rng.gumbel(size=(100_000, 12))      # Gumbel top-k = draws w/o replacement
    picks = np.argpartition(-keys, 3, axis=1)[:, :3]
    mc = np.bincount(picks.ravel(), minlength=12) / 100_000
    assert q == pytest.approx(mc, abs=0.006)


def _write_trace(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_routing_trace_drives_expert_loads(tmp_path):
    cfg, _, _ = workloads.read_config("mixtral-8x7b")
    cfg["num_hidden_layers"] = 2
    model = tmp_path / "config.json"
    model.write_text(json.dumps(cfg))
    rows = [{"layer": 0, "token": t, "experts": [0, 1 + t % 2], "weights": [0.6, 0.4]} for t in range(4)]
    rows += [{"layer": 1, "token": t, "experts": [2, 3] if t % 2 == 0 else [0, 1]} for t in range(4)]
    trace = tmp_path / "trace.jsonl"
    _write_trace(trace, rows)
    wl = workloads.extract(str(model), batch=4, context=64, per_layer=True,
                           routing={"distribution": "trace", "trace": str(trace)})
    q = {u: d["selection_prob"] for u, d in wl.graph.nodes(data=True) if d["kind"] == "expert"}
    assert q["L0.e0"] == 1.0 and q["L0.e1"] == 0.5 and q["L0.e3"] == 0.0 and q["L1.e2"] == 0.5
    # transitions counted from the trace: tokens on expert 1 at layer 0 go on to experts 2 and 3
    aff = wl.affinity
    row = aff[(aff["src"] == "L0.e1") & (aff["dst"] == "L1.e2")].iloc[0]
    assert row["prob"] == pytest.approx(0.5) and row["lift"] == pytest.approx(2.0)
    assert row["tokens"] == pytest.approx(2.0)          # tokens 0 and 2 select both


def test_trace_errors_name_file_and_line(tmp_path):
    trace = tmp_path / "t.jsonl"
    _write_trace(trace, [{"layer": 0, "token": 0, "experts": [0, 9]}])
    with pytest.raises(workloads.WorkloadError, match=r"t.jsonl, line 1: experts must be 2 distinct indices"):
        workloads.extract("mixtral-8x7b", routing={"distribution": "trace", "trace": str(trace)})
    _write_trace(trace, [{"layer": 0, "token": 0, "experts": [0, 1]}])
    with pytest.raises(workloads.WorkloadError, match="no rows for MoE layer 1"):
        workloads.extract("mixtral-8x7b", routing={"distribution": "trace", "trace": str(trace)})


def test_synthetic_affinity_keeps_marginals_and_pairs_ranks():
    q = workloads.selection_probabilities(16, 2, "zipf", s=1.0, seed=0, layer=0)
    q2 = workloads.selection_probabilities(16, 2, "zipf", s=1.0, seed=0, layer=1)
    A = synthetic_affinity(q, q2, 0.8)
    assert A.sum(axis=1) == pytest.approx(np.ones(16))
    assert (q / 2) @ A == pytest.approx(q2 / 2)
    top, top2 = np.argmax(q), np.argmax(q2)
    assert np.argmax(A[top]) == top2                     # the most popular experts are the affine pair
    C = monotone_coupling(np.array([0.6, 0.4]), np.array([0.3, 0.7]))
    assert C == pytest.approx(np.array([[0.0, 0.6], [0.3, 0.1]]))     # largest with largest first


def test_affinity_table_in_per_layer_mode():
    wl = workloads.extract("mixtral-8x7b", batch=8, context=64, per_layer=True,
                           routing={"distribution": "zipf", "s": 0.5, "affinity": 0.7})
    aff = wl.affinity
    assert len(aff) > 0 and (aff["lift"] > 1).all()
    assert set(aff["layer"]) == set(range(31)) and (aff["next_layer"] == aff["layer"] + 1).all()
    assert (aff["bytes"] == aff["tokens"] * 4096 * 2).all()
    assert workloads.extract("mixtral-8x7b", per_layer=True).affinity.empty     # rho 0: independent layers


def test_per_layer_deepseek_has_an_expert_unit_per_layer():
    wl = workloads.extract("deepseek-v3", batch=16, context=256, per_layer=True)
    experts = [u for u, d in wl.graph.nodes(data=True) if d["kind"] == "expert"]
    assert len(experts) == 58 * 256
    assert wl.summary["total_params"] == pytest.approx(671.0e9, rel=5e-3)
