"""Ensembles of experts: one small ensemble per morphology checked against hand-computed values."""
import pytest

import workloads
from workloads.ensemble import request_paths, _parse

P_GPT2 = 124_439_808          # GPT-2 small parameters (tied embeddings)
WPE = 1024 * 768              # its learned position table
H, V = 768, 50257


def _stages(wl, node):
    return [int(s) for s, n in zip(wl.stages["stage"], wl.stages["name"]) if n.startswith(node + "/")]


def test_chain_hands_hidden_states_down_the_chain():
    spec = {"morphology": "chain", "nodes": [{"name": "a", "model": "gpt2"}, {"name": "b", "model": "gpt2"}]}
    wl = workloads.extract_ensemble(spec, phase="decode", batch=2, context=64)
    assert wl.scenarios == [(1.0, tuple(range(len(wl.stages))))]
    # a ends at its final norm; b takes a's hidden states (2 requests x 1 token x 768 x 2 bytes)
    assert wl.graph.edges["a/final_norm", "b/embed"]["bytes"] == 2 * 1 * H * 2
    assert wl.stages.set_index("stage").loc[_stages(wl, "b")[0], "after"] == (_stages(wl, "a")[-1],)
    # b has no embedding table of its own but keeps the (tied) LM head's table
    assert wl.summary["total_params"] == pytest.approx(2 * P_GPT2 - WPE)
    single = workloads.extract("gpt2", batch=2, context=64).summary["flops_per_step"]
    assert wl.summary["flops_per_step"] == pytest.approx(2 * single - 2 * 2 * H * V)   # a runs no LM head
    assert wl.summary["visit_prob"] == {"a": 1.0, "b": 1.0}


def _tree(p_math=0.25):
    return {"morphology": "tree",
            "nodes": [{"name": "r", "router": {"classifier": {"in_features": 768}}},
                      {"name": "math", "model": "gpt2"}, {"name": "code", "model": "gpt2"}],
            "edges": [["r", "math", p_math], ["r", "code", 1 - p_math]]}


def test_tree_scenarios_are_unions_of_request_paths():
    wl = workloads.extract_ensemble(_tree(), phase="prefill", batch=2, context=64)
    r, m, c = _stages(wl, "r"), _stages(wl, "math"), _stages(wl, "code")
    scen = {s: p for p, s in wl.scenarios}
    # two requests, each to math with 1/4: both math 1/16, both code 9/16, one each 2 x 1/4 x 3/4
    assert scen[tuple(r + m)] == pytest.approx(1 / 16)
    assert scen[tuple(r + c)] == pytest.approx(9 / 16)
    assert scen[tuple(sorted(r + m + c))] == pytest.approx(6 / 16)
    prob = wl.stages.set_index("stage")["prob"]
    assert prob[m[0]] == pytest.approx(1 - 0.75 ** 2) and prob[c[0]] == pytest.approx(1 - 0.25 ** 2)
    assert prob[r[0]] == 1.0
    # math runs on E[requests | it runs] = 2 x 1/4 / (1 - (3/4)^2) = 8/7 requests of 64 tokens
    assert wl.ensemble.nodes["math"]["requests_if_run"] == pytest.approx(8 / 7)
    qkv = wl.ops[(wl.ops["unit"] == "math/L0-11.attn") & (wl.ops["name"] == "qkv_proj")].iloc[0]
    assert qkv["M"] == pytest.approx(8 / 7 * 64)
    # the router hands the prompt's token ids (4 bytes each) to the expert it picked
    assert wl.graph.edges["r/classifier", "math/embed"]["bytes"] == pytest.approx(8 / 7 * 64 * 4)
    router = wl.ops[wl.ops["unit"] == "r/classifier"]
    assert router[router["name"] == "router_head"]["flops"].iloc[0] == pytest.approx(2 * 2 * 768 * 2)
    assert wl.summary["active_params_per_token"] == pytest.approx(P_GPT2 + 768 * 2)


def test_tree_decode_runs_no_router_and_two_levels_multiply():
    spec = {"morphology": "tree",
            "nodes": [{"name": "root", "router": {"classifier": {"in_features": 64}}},
                      {"name": "sub", "router": {"classifier": {"in_features": 64}}},
                      {"name": "x", "model": "gpt2"}, {"name": "y", "model": "gpt2"}, {"name": "z", "model": "gpt2"}],
            "edges": [["root", "sub", 0.4], ["root", "z", 0.6], ["sub", "x", 0.5], ["sub", "y", 0.5]]}
    wl = workloads.extract_ensemble(spec, phase="decode", batch=1, context=32)
    assert wl.summary["visit_prob"] == pytest.approx({"root": 1.0, "sub": 0.4, "x": 0.2, "y": 0.2, "z": 0.6})
    scen = {s: p for p, s in wl.scenarios}
    assert scen[tuple(_stages(wl, "z"))] == pytest.approx(0.6)       # decode: routers do not run
    assert scen[tuple(_stages(wl, "x"))] == pytest.approx(0.2)
    assert not any(u.startswith(("root/", "sub/")) for e in wl.graph.edges for u in e)
    assert sum(p for p, _ in wl.scenarios) == pytest.approx(1.0)


def test_graph_mixture_of_agents_aggregator_reads_all_proposals():
    spec = {"morphology": "graph",
            "nodes": [{"name": "p1", "model": "gpt2"}, {"name": "p2", "model": "gpt2"}, {"name": "agg", "model": "gpt2"}],
            "edges": [["p1", "agg"], ["p2", "agg"]]}
    wl = workloads.extract_ensemble(spec, phase="decode", batch=2, context=64)
    for p in ("p1", "p2"):
        assert wl.graph.edges[f"{p}/final_norm", "agg/embed"]["bytes"] == 2 * 1 * H * 2
    # the aggregator sees both proposers' positions: 2 per request per step, over a 2 x 64 context
    qkv = wl.ops[(wl.ops["unit"] == "agg/L0-11.attn") & (wl.ops["name"] == "qkv_proj")].iloc[0]
    assert qkv["M"] == 2 * 2
    score = wl.ops[(wl.ops["unit"] == "agg/L0-11.attn") & (wl.ops["name"] == "attn_score")].iloc[0]
    assert score["N"] == 128
    agg_first = _stages(wl, "agg")[0]
    assert set(wl.stages.set_index("stage").loc[agg_first, "after"]) == {_stages(wl, "p1")[-1], _stages(wl, "p2")[-1]}
    kv_one = workloads.extract("gpt2").graph.nodes["L0-11.attn"]["kv_bytes_per_token"]
    assert wl.graph.nodes["agg/L0-11.attn"]["kv_bytes_per_token"] == pytest.approx(2 * kv_one)


def test_router_top_2_of_3_visits_each_child_two_thirds():
    spec = {"nodes": [{"name": "r", "router": {"classifier": {"in_features": 8}}, "top_k": 2},
                      {"name": "a", "model": "gpt2"}, {"name": "b", "model": "gpt2"}, {"name": "c", "model": "gpt2"}],
            "edges": [["r", "a"], ["r", "b"], ["r", "c"]]}
    nodes, _, g, _, _ = _parse(spec)
    paths = dict(request_paths(nodes, g))
    assert paths == pytest.approx({frozenset({"r", "a", "b"}): 1 / 3, frozenset({"r", "a", "c"}): 1 / 3,
                                   frozenset({"r", "b", "c"}): 1 / 3})


def test_average_composer_and_weight_sum():
    avg = {"nodes": [{"name": "a", "model": "gpt2"}, {"name": "b", "model": "gpt2"}, {"name": "mix", "composer": "average"}],
           "edges": [["a", "mix"], ["b", "mix"]]}
    wl = workloads.extract_ensemble(avg, phase="decode", batch=3, context=16)
    ops = wl.ops[wl.ops["unit"] == "mix/average"].set_index("name")
    assert ops.loc["average", "elements"] == 3 * H * 2
    assert ops.loc["lm_head", "flops"] == 2 * 3 * H * V
    assert wl.graph.edges["a/final_norm", "mix/average"]["bytes"] == 3 * H * 2
    ws = {"nodes": [{"name": "r", "router": {"classifier": {"in_features": 768}}},
                    {"name": "a", "model": "gpt2"}, {"name": "b", "model": "gpt2"},
                    {"name": "soup", "composer": "weight_sum"}],
          "edges": [["r", "a", 0.5], ["r", "b", 0.5], ["a", "soup"], ["b", "soup"]]}
    wl = workloads.extract_ensemble(ws, phase="prefill", batch=1, context=16)
    merge = wl.ops[wl.ops["unit"] == "soup/merge"].set_index("name")
    assert merge.loc["merge_a", "prob"] == pytest.approx(0.5)        # one request picks a or b
    assert merge.loc["merge_a", "flops"] == 2 * P_GPT2
    assert wl.graph.nodes["soup/merge"]["weight_bytes"] == pytest.approx(2 * P_GPT2 * 2)
    assert wl.summary["total_params"] == pytest.approx(2 * P_GPT2 + 768 * 2)
    assert not any(u.startswith(("a/", "b/")) for u in wl.graph)           # inputs hold weights only
    assert wl.graph.edges["soup/merge", "soup/L0-11.ffn"]["bytes"] == wl.graph.nodes["soup/L0-11.ffn"]["weight_bytes"]


def test_large_batches_are_sampled_with_the_seed():
    spec = {"nodes": [{"name": "r", "router": {"classifier": {"in_features": 8}}}]
            + [{"name": f"e{i}", "model": "gpt2"} for i in range(6)],
            "edges": [["r", f"e{i}"] for i in range(6)]}
    wl = workloads.extract_ensemble(spec, phase="decode", batch=8, context=16, max_scenarios=16, seed=1)
    assert wl.summary["scenario_method"] == "sampled"
    assert len(wl.scenarios) <= 16 and sum(p for p, _ in wl.scenarios) == pytest.approx(1.0)
    again = workloads.extract_ensemble(spec, phase="decode", batch=8, context=16, max_scenarios=16, seed=1)
    assert again.scenarios == wl.scenarios


@pytest.mark.parametrize("spec,message", [
    ({"morphology": "chain", "nodes": [{"name": "a", "model": "gpt2"}, {"name": "b", "model": "gpt2"},
                                       {"name": "c", "model": "gpt2"}], "edges": [["a", "b"], ["a", "c"]]},
     "a chain is one path"),
    ({"morphology": "tree", "nodes": [{"name": "a", "model": "gpt2"}, {"name": "b", "model": "gpt2"}],
      "edges": [["a", "b", 0.5]]}, "only a router's edges take a probability"),
    ({"nodes": [{"name": "a", "model": "gpt2", "router": {"classifier": {"in_features": 3}}}]},
     "exactly one of model, router, composer"),
    ({"nodes": [{"name": "a", "model": "nope"}]}, "unknown model 'nope'"),
    ({"nodes": [{"name": "r", "router": {"classifier": {"in_features": 3}}}, {"name": "a", "model": "gpt2"}],
      "edges": [["r", "a", 0.5], ["r", "zz"]]}, "unknown node 'zz'"),
])
def test_bad_ensembles_name_the_problem(spec, message):
    with pytest.raises(workloads.WorkloadError, match=message):
        workloads.extract_ensemble(spec)
