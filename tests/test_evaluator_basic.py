"""The population evaluator against the step model written out by hand for small designs."""
import numpy as np
import pytest

import dse
from dse.study.space import Design


@pytest.fixture(scope="module")
def prepared():
    return dse.prepare(dse.load_study("tests/data/tiny.yaml"))


def _single_chip_latency(t, kind, stacks):
    """Sum over stages of repeat x sum over units of max(compute, HBM time): the roofline, one chiplet."""
    bw = stacks * t.hbm_bw_Bps
    latency = 0.0
    for u in range(t.n_units):
        memory_bytes = t.unit_weight_read[u] + t.unit_other_dram[u, kind]
        latency += t.stage_repeat[t.unit_stage[u]] * max(t.unit_time_s[u, kind], memory_bytes / bw)
    return latency


def _design(units, rows, cols, chiplets, stacks, placement):
    return Design(rows=rows, cols=cols, chiplets=chiplets, hbm_stacks=stacks, ddr_channels=1, link="ucie-advanced",
                  mapping="many-to-many", placement={u: placement(u) for u in units})


def test_one_chiplet_is_the_roofline_sum(prepared):
    t = prepared.tables
    d = _design(t.unit_names, 1, 1, ["big"], [2], lambda u: [0])
    m = prepared.evaluator.evaluate_designs([d]).iloc[0]
    assert m["latency_s"] == pytest.approx(_single_chip_latency(t, 0, 2), rel=1e-9)
    assert m["throughput_tok_s"] == pytest.approx(4 / m["latency_s"])
    assert m["fault_tolerance_frac"] == 0.0          # a single chiplet cannot survive its own failure
    assert m["capacity_short_bytes"] == 0.0
    area = t.kind_area_mm2[0] + 2 * t.hbm.phy_area_mm2 + t.ddr.phy_area_mm2
    assert m["area_mm2"] == pytest.approx(area)
    assert m["package_area_mm2"] == pytest.approx(area + 2 * t.hbm.footprint_mm2)


def test_two_chiplets_pay_the_hand_off_and_survive_a_failure(prepared):
    t = prepared.tables
    on_second = {u for u in t.unit_names if u.endswith(".ffn") or u == "lm_head"}
    d = _design(t.unit_names, 1, 2, ["big", "big"], [1, 1], lambda u: [1] if u in on_second else [0])
    m = prepared.evaluator.evaluate_designs([d]).iloc[0]

    # by hand: every unit at its roofline time on one stack, plus one hop per hand-off between chiplets,
    # its bytes at the routers' share of the link's bandwidth (BookSim2's iSLIP router by default)
    hop, bw = t.link.hop_latency_s, t.link.bandwidth_Bps * prepared.study.hardware.package.switch_efficiency
    compute = _single_chip_latency(t, 0, 1)
    wl = t.workload
    comm = 0.0
    for a, b, data in wl.graph.edges(data=True):
        if (a in on_second) != (b in on_second):
            comm += data["repeat"] * (hop + data["bytes"] / bw)
    assert m["latency_s"] == pytest.approx(compute + comm, rel=1e-9)

    # losing either chiplet moves its units to the other: one chiplet, one stack, no hand-offs
    retained = (compute + comm) / compute
    assert m["fault_tolerance_frac"] == pytest.approx(min(retained, 1.0), rel=1e-9)


def test_replicated_unit_survives_without_remap(prepared):
    t = prepared.tables
    both = _design(t.unit_names, 1, 2, ["big", "big"], [1, 1], lambda u: [0, 1])
    m = prepared.evaluator.evaluate_designs([both]).iloc[0]
    assert m["worst_retained_frac"] > 0
    assert m["capacity_short_bytes"] == 0


def test_population_matches_one_by_one(prepared):
    ev, space = prepared.evaluator, prepared.space
    X = np.random.default_rng(0).integers(space.lower, space.upper + 1, size=(20, space.n_var))
    together = ev(X)
    apart = [ev(X[i : i + 1]).iloc[0] for i in range(20)]
    for i in range(20):
        assert together.iloc[i].to_dict() == pytest.approx(apart[i].to_dict(), nan_ok=True)
    # decoding to designs and evaluating those gives the same numbers
    again = ev.evaluate_designs(ev.designs(X))
    assert np.allclose(again.to_numpy(), together.to_numpy(), equal_nan=True)


def test_largest_die_holds_its_hbm_phys_and_the_reticle_is_a_constraint(prepared):
    from dse.model.objectives import constraint_matrix, constraint_names
    t = prepared.tables
    d = _design(t.unit_names, 1, 2, ["big", "small"], [2, 0], lambda u: [0])
    m = prepared.evaluator.evaluate_designs([d])
    assert m["max_die_mm2"][0] == pytest.approx(max(t.kind_area_mm2[0] + 2 * t.hbm.phy_area_mm2, t.kind_area_mm2[1]))
    study = prepared.study
    G = constraint_matrix(m, study)
    assert G[0, constraint_names(study).index("reticle_over")] == pytest.approx(m["max_die_mm2"][0] / 858 - 1)
    big_die = m.copy()
    big_die["max_die_mm2"] = 900.0
    assert constraint_matrix(big_die, study)[0, constraint_names(study).index("reticle_over")] > 0
