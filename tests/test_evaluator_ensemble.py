"""Ensembles of experts in the evaluator: scenario-weighted latency, p99, and parallel branches."""
import numpy as np
import pytest

import dse
from dse.study.space import Design

CHIPLET = {"name": "c", "kind": "systolic", "array": [64, 64], "dataflow": "ws", "sram_mb": 8, "freq_ghz": 1.0,
           "node": "7nm"}


def _prepare(ensemble, cols):
    study = dse.Study.from_dict({
        "name": "eoe", "workload": {"ensemble": ensemble, "phase": "decode", "batch": 2, "context": 64},
        "hardware": {"chiplets": [CHIPLET], "memory": [{"kind": "hbm3", "stacks": [0, 3]},
                                                       {"kind": "ddr5", "channels": [1, 1]}],
                     "package": {"mesh": {"rows": 1, "cols": cols}}},
        "search": {"objectives": ["latency", "energy"], "population": 4, "generations": 1}})
    return dse.prepare(study)


def _stage_times(t, stacks_of_unit):
    """Roofline time of every stage when each unit runs alone on a chiplet with the given HBM stacks."""
    times = np.zeros(len(t.stage_repeat))
    for u in range(t.n_units):
        bw = stacks_of_unit[u] * t.hbm_bw_Bps
        memory_bytes = t.unit_weight_read[u] + t.unit_other_dram[u, 0]
        times[t.unit_stage[u]] += max(t.unit_time_s[u, 0], memory_bytes / bw)
    return times * t.stage_repeat


def _member_stages(t, member):
    return sorted({int(t.unit_stage[i]) for i, u in enumerate(t.unit_names) if u.startswith(member + "/")})


GRAPH = {"morphology": "graph", "nodes": [{"name": "p1", "model": "gpt2"}, {"name": "p2", "model": "gpt2"},
                                          {"name": "agg", "model": "gpt2"}], "edges": [["p1", "agg"], ["p2", "agg"]]}


def test_parallel_proposers_overlap_on_separate_chiplets_and_not_on_one():
    prepared = _prepare(GRAPH, 3)
    t, ev = prepared.tables, prepared.evaluator
    member = {u: u.split("/")[0] for u in t.unit_names}
    chip = {"p1": 0, "p2": 1, "agg": 2}

    # all on chiplet 0 with three stacks: nothing overlaps, latency is every stage one after another
    together = Design(rows=1, cols=3, chiplets=["c"] * 3, hbm_stacks=[3, 0, 0], ddr_channels=1,
                      link="ucie-advanced", mapping="many-to-one", placement={u: [0] for u in t.unit_names})
    times = _stage_times(t, np.full(t.n_units, 3))
    assert ev.evaluate_designs([together]).iloc[0]["latency_s"] == pytest.approx(times.sum(), rel=1e-9)

    # one member per chiplet: the proposers run side by side, then both hand over to the aggregator
    apart = Design(rows=1, cols=3, chiplets=["c"] * 3, hbm_stacks=[1, 1, 1], ddr_channels=1, link="ucie-advanced",
                   mapping="many-to-one", placement={u: [chip[member[u]]] for u in t.unit_names})
    times = _stage_times(t, np.ones(t.n_units))
    p1, p2, agg = (times[_member_stages(t, m)].sum() for m in ("p1", "p2", "agg"))
    hand_off = t.workload.graph.edges["p1/final_norm", "agg/embed"]["bytes"]
    # p1 (chiplet 0) -> agg (2) crosses links 0->1 and 1->2; p2 (1) -> agg crosses 1->2: that link carries both,
    # at the routers' share of its bandwidth (BookSim2's iSLIP router by default)
    eta = prepared.study.hardware.package.switch_efficiency
    comm = 2 * t.link.hop_latency_s + 2 * hand_off / (eta * t.link.bandwidth_Bps)
    assert ev.evaluate_designs([apart]).iloc[0]["latency_s"] == pytest.approx(max(p1, p2) + comm + agg, rel=1e-9)


TREE = {"morphology": "tree",
        "nodes": [{"name": "root", "router": {"classifier": {"in_features": 64}}},
                  {"name": "x", "model": "gpt2"}, {"name": "z", "model": "tests/data/tiny-moe/config.json"}],
        "edges": [["root", "x", 0.25], ["root", "z", 0.75]]}


def test_tree_latency_is_expected_over_scenarios_and_p99_the_slow_branch():
    prepared = _prepare(TREE, 1)
    t, ev = prepared.tables, prepared.evaluator
    design = Design(rows=1, cols=1, chiplets=["c"], hbm_stacks=[3], ddr_channels=1, link="ucie-advanced",
                    mapping="many-to-one", placement={u: [0] for u in t.unit_names})
    times = _stage_times(t, np.full(t.n_units, 3))
    by_scenario = {frozenset(stages): p for p, stages in t.scenarios}
    x, z = _member_stages(t, "x"), _member_stages(t, "z")
    # batch of 2 requests in decode (no router runs): both to x, both to z, or one each
    p_xx, p_zz = by_scenario[frozenset(x)], by_scenario[frozenset(z)]
    p_xz = by_scenario[frozenset(x + z)]
    assert p_xx == pytest.approx(0.25 ** 2) and p_zz == pytest.approx(0.75 ** 2)
    lx, lz = times[x].sum(), times[z].sum()
    m = ev.evaluate_designs([design]).iloc[0]
    assert m["latency_s"] == pytest.approx(p_xx * lx + p_zz * lz + p_xz * (lx + lz), rel=1e-9)
    assert m["latency_p99_s"] == pytest.approx(lx + lz, rel=1e-9)
