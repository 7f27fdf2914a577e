"""Heuristic mappings: complete, better than random placements on the same package, and searched from."""
import numpy as np
import pytest

import dse
from dse.model.heuristics import affinity_clustering, greedy_by_load
from dse.study.space import Design


@pytest.fixture(scope="module")
def prepared():
    study = dse.load_study("tests/data/tiny_moe.yaml")
    return dse.prepare(study.model_copy(update={"mapping": study.mapping.model_copy(update={"kind": "many-to-one"})}))


def _design(placement, n=9):
    return Design(rows=3, cols=3, chiplets=["big"] * n, hbm_stacks=[1] * n, ddr_channels=1, link="ucie-advanced",
                  mapping="many-to-one", placement=placement)


def _random_placements(t, count, n=9, seed=0):
    rng = np.random.default_rng(seed)
    return [{u: [int(rng.integers(n))] for u in t.unit_names} for _ in range(count)]


def test_greedy_by_load_beats_random_placement(prepared):
    t, ev = prepared.tables, prepared.evaluator
    greedy = greedy_by_load(t, 9, [0] * 9, [1] * 9)
    assert set(greedy) == set(t.unit_names) and all(len(s) == 1 for s in greedy.values())
    random = ev.evaluate_designs([_design(p) for p in _random_placements(t, 40)], with_faults=False)
    mine = ev.evaluate_designs([_design(greedy)], with_faults=False).iloc[0]
    assert mine["latency_s"] < random["latency_s"].quantile(0.1)


def test_greedy_gives_hot_experts_a_second_copy(prepared):
    t = prepared.tables
    placement = greedy_by_load(t, 9, [0] * 9, [1] * 9, copies=2)
    experts = [u for u, k in zip(t.unit_names, t.unit_kind) if k == dse.model.tables.UNIT_KINDS.index("expert")]
    doubled = [u for u in experts if len(placement[u]) == 2]
    hottest = max(experts, key=lambda u: t.unit_selection[t.unit_names.index(u)])
    assert hottest in doubled and len(doubled) < len(experts)
    assert all(len(set(placement[u])) == len(placement[u]) for u in doubled)


def test_affinity_clustering_cuts_network_traffic(prepared):
    t, ev = prepared.tables, prepared.evaluator
    clustered = affinity_clustering(t, 3, 3, [0] * 9)
    random = ev.evaluate_designs([_design(p) for p in _random_placements(t, 40, seed=1)], with_faults=False)
    mine = ev.evaluate_designs([_design(clustered)], with_faults=False).iloc[0]
    assert mine["net_byte_hops"] < random["net_byte_hops"].quantile(0.1)


def test_search_starts_from_the_seeds():
    study = dse.load_study("tests/data/tiny_moe.yaml")
    prepared = dse.prepare(study)
    seeds = prepared.space.seeds
    assert len(seeds) >= 2
    result = dse.run_study(study, prepared=prepared)
    first = result.evaluations[result.evaluations["generation"] == 0]
    decoded = prepared.evaluator.designs(seeds[: min(len(seeds), study.search.population // 2)])
    placements = set(first["placement"])
    for d in decoded:
        assert ";".join(f"{u}={'+'.join(map(str, s))}" for u, s in d.placement.items()) in placements
