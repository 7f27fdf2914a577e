"""Systems of packages (dse.system) against the one-package model (dse.model).

A model split over two packages by pipeline stages, joined by a fabric as fast as the package's own
links, must cost exactly what one package of the same chiplets costs with the same split inside it:
the hand-off between the halves crosses one link either way. Only the cost differs, by the bonding
yield: two packages lose one die each to a bad bond where one package of two dies loses both
(Chiplet Actuary's assembly yield, the package cost model).
"""
import dataclasses

import numpy as np
import pytest
import yaml

import dse
import noc
from dse.study.space import Design
from dse.study.spec import Study

BASE = yaml.safe_load("""
name: split
workload: {model: gpt2, phase: decode, batch: 4, context: 1024, precision: bf16, per_layer: true}
hardware:
  chiplets: [{name: sa, kind: systolic, array: [64, 64], dataflow: ws, sram_mb: 8, freq_ghz: 1.0, node: 7nm}]
  memory: [{kind: hbm3, stacks: [1, 2]}]
  package: {mesh: {rows: [1, 2], cols: 1}, link: ucie-advanced, router: ideal}   # the fabric has no router's losses
mapping: {kind: many-to-many, max_replicas: 1}
carbon: {board_mm2: 0}         # one board under two chiplets against two boards: not what is compared
""")
SAME = ["latency_s", "latency_p99_s", "throughput_tok_s", "energy_j_per_token", "energy_compute_j_per_token",
        "energy_dram_j_per_token", "energy_network_j_per_token", "energy_static_j_per_token", "area_mm2",
        "package_area_mm2", "peak_power_w", "capacity_short_bytes", "dram_bytes", "net_byte_hops", "max_die_mm2",
        "embodied_kg", "carbon_g_per_token", "fault_tolerance_frac"]


def system_study(**system) -> Study:
    spec = {"fabric": "ucie-advanced", "packages_per_node": 2, "in_flight": 1, "parallel": {"pipeline": [1, 2]}}
    return Study.from_dict({**BASE, "system": {**spec, **system}})


def designs(units, graph):
    """The one-package reference (layers 0-5 and the embedding on chiplet 0, the rest on chiplet 1) and
    the same split as two one-chiplet packages."""
    second = {u for u in units if graph.nodes[u]["first_layer"] >= 6 or graph.nodes[u]["kind"] == "lm_head"}
    common = dict(ddr_channels=0, link="ucie-advanced", mapping="many-to-many")
    one = Design(rows=2, cols=1, chiplets=["sa", "sa"], hbm_stacks=[1, 1],
                 placement={u: [1 if u in second else 0] for u in units}, **common)
    two = Design(rows=1, cols=1, chiplets=["sa"], hbm_stacks=[1], placement={u: [0] for u in units},
                 system={"pipeline": 2, "experts": 1, "replicas": 1}, **common)
    return one, two


@pytest.fixture(scope="module")
def prepared():
    one = dse.prepare(Study.from_dict(BASE))
    return one, dse.prepare(system_study())


def prefill(study: dict) -> dict:
    return {**study, "workload": {**study["workload"], "phase": "prefill", "context": 256}}


@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_two_packages_equal_one_package_when_the_fabric_is_the_package_link(prepared, phase):
    p1, p2 = prepared
    if phase == "prefill":         # a step of batch x prompt tokens
        p1 = dse.prepare(Study.from_dict(prefill(BASE)))
        p2 = dse.prepare(Study.from_dict(prefill(system_study().model_dump(mode="json"))))
    one, two = designs(p1.tables.unit_names, p1.tables.workload.graph)
    a = p1.evaluator.evaluate_designs([one]).iloc[0]
    b = p2.evaluator.evaluate_designs([two]).iloc[0]
    for metric in SAME:
        assert b[metric] == pytest.approx(a[metric], rel=1e-12, abs=1e-30), metric
    # cost: one package of 2 dies and 2 stacks against two packages of 1 + 1 (arch.packaging), each its
    # package evaluator's parts
    assert a["cost_usd"] == pytest.approx(p1.package_evaluator.cost_parts([one]).iloc[0].sum(), rel=1e-12)
    assert b["cost_usd"] == pytest.approx(2 * p2.for_design(two).package_evaluator.cost_parts([two]).iloc[0].sum(),
                                          rel=1e-12)
    assert (b["packages"], b["nodes"], a["packages"]) == (2, 1, 1)
    assert b["comm_fabric_s"] > 0 and b["comm_network_s"] == 0


def test_a_slower_fabric_adds_exactly_its_slower_hand_off(prepared):
    p1, p2 = prepared
    _, two = designs(p1.tables.unit_names, p1.tables.workload.graph)
    slow = dse.prepare(system_study(fabric="ucie-standard"))
    fast_m = p2.evaluator.evaluate_designs([two]).iloc[0]
    slow_m = slow.evaluator.evaluate_designs([two]).iloc[0]
    hidden = 4 * 768 * 2                                         # batch x GPT-2 hidden x bf16
    adv, std = noc.link_tech("ucie-advanced"), noc.link_tech("ucie-standard")
    extra = (std.hop_latency_s - adv.hop_latency_s) + hidden / std.bandwidth_Bps - hidden / adv.bandwidth_Bps
    assert slow_m["latency_s"] - fast_m["latency_s"] == pytest.approx(extra, rel=1e-9)


def test_pipelined_batches_raise_throughput_not_latency(prepared):
    p1, _ = prepared
    _, two = designs(p1.tables.unit_names, p1.tables.workload.graph)
    serial = dse.prepare(system_study()).evaluator.evaluate_designs([two]).iloc[0]
    piped = dse.prepare(system_study(in_flight="pipeline")).evaluator.evaluate_designs([two]).iloc[0]
    assert piped["latency_s"] == pytest.approx(serial["latency_s"], rel=1e-12)
    # two batches in flight: between one and two batches per step time, set by the slower stage
    assert serial["throughput_tok_s"] < piped["throughput_tok_s"] <= 2 * serial["throughput_tok_s"] * (1 + 1e-12)


def test_one_package_layout_of_a_system_is_the_package_model(prepared):
    p1, p2 = prepared
    X = np.random.default_rng(5).integers(p2.space.lower, p2.space.upper + 1, size=(6, p2.space.n_var))
    X[:, p2.space.slices["pipeline"]] = 0                      # pipeline choice 1: one package
    package = p1.evaluator(X[:, : p1.space.n_var])
    system = p2.evaluator(X)
    for metric in ("latency_s", "throughput_tok_s", "energy_j_per_token", "cost_usd", "area_mm2", "embodied_kg",
                   "carbon_g_per_token"):
        np.testing.assert_allclose(system[metric], package[metric], rtol=1e-12, err_msg=metric)
    assert (system["fault_tolerance_frac"] == 0).all()          # the only package failing loses everything


MOE = yaml.safe_load((__import__("pathlib").Path(__file__).parent / "data" / "tiny_moe.yaml").read_text())


def moe_study(**parallel):
    system = {"fabric": "nvlink4", "packages_per_node": 8, "parallel": {"pipeline": [1, 2], "experts": [1, 2],
                                                                         "replicas": [1, 2], **parallel}}
    data = {**MOE, "hardware": {**MOE["hardware"], "memory": [{"kind": "hbm3", "stacks": [1, 9]}]}}
    return Study.from_dict({**data, "system": system})


def test_a_failed_package_re_maps_onto_the_survivors():
    """Losing one of two expert-parallel ranks leaves the stage on one package: the layout without expert
    parallelism; losing one of two pipeline stages re-splits the layers over one; losing a one-package
    replica of two keeps half."""
    p = dse.prepare(moe_study())
    X = np.random.default_rng(2).integers(p.space.lower, p.space.upper + 1, size=(8, p.space.n_var))
    X[:, p.space.slices["hbm"]] = 9                            # memory enough for everything on one package
    pick = {a: p.space.slices[a].start for a in ("pipeline", "experts", "replicas")}

    def with_layout(pipeline, experts, replicas):
        Y = X.copy()
        Y[:, pick["pipeline"]], Y[:, pick["experts"]], Y[:, pick["replicas"]] = pipeline, experts, replicas
        return p.evaluator(Y)

    single = with_layout(0, 0, 0)
    for genes in ((0, 1, 0), (1, 0, 0)):                      # two expert ranks; two pipeline stages
        split = with_layout(*genes)
        assert (split["capacity_short_bytes"] == 0).all()
        expected = np.minimum(single["throughput_tok_s"] / split["throughput_tok_s"], 1.0)
        np.testing.assert_allclose(split["fault_tolerance_frac"], expected, rtol=1e-12)
    np.testing.assert_allclose(with_layout(0, 0, 1)["fault_tolerance_frac"], 0.5)


def test_replicas_multiply_throughput_and_hardware():
    p = dse.prepare(moe_study())
    X = np.random.default_rng(4).integers(p.space.lower, p.space.upper + 1, size=(5, p.space.n_var))
    one, two = X.copy(), X.copy()
    one[:, p.space.slices["replicas"]] = 0
    two[:, p.space.slices["replicas"]] = 1
    a, b = p.evaluator(one), p.evaluator(two)
    for metric, factor in (("throughput_tok_s", 2), ("cost_usd", 2), ("peak_power_w", 2), ("embodied_kg", 2),
                           ("latency_s", 1), ("energy_j_per_token", 1), ("carbon_g_per_token", 1)):
        np.testing.assert_allclose(b[metric], factor * a[metric], rtol=1e-12, err_msg=metric)


def test_system_designs_round_trip(prepared):
    _, p2 = prepared
    X = np.random.default_rng(1).integers(p2.space.lower, p2.space.upper + 1, size=(4, p2.space.n_var))
    designs_ = p2.evaluator.designs(X)
    assert all(d.system["pipeline"] in (1, 2) for d in designs_)
    np.testing.assert_allclose(p2.evaluator.evaluate_designs(designs_).to_numpy(), p2.evaluator(X).to_numpy(),
                               rtol=1e-12)
    back = dataclasses.replace(designs_[0], **{})
    assert back.to_dict()["system"] == designs_[0].system


def test_a_system_evaluator_pickles_for_dask_workers():
    """Dask scatters the evaluator to its workers: the copy evaluates alike (packages rebuilt there)."""
    import pickle
    p = dse.prepare(moe_study())
    X = np.random.default_rng(6).integers(p.space.lower, p.space.upper + 1, size=(6, p.space.n_var))
    before = p.evaluator(X).to_numpy()
    copy = pickle.loads(pickle.dumps(p.evaluator))
    np.testing.assert_allclose(copy(X).to_numpy(), before, rtol=1e-12)
    assert copy.metric_names == p.evaluator.metric_names


def test_the_framework_work_per_sequence_is_paid_once_a_step(prepared):
    """sequence_us (the serving framework's host work per sequence per step) adds batch x it once, whether
    the model runs on one package or on a pipeline of two (not once per stage)."""
    p1, p2 = prepared
    one, two = designs(p1.tables.unit_names, p1.tables.workload.graph)
    waiting = {**BASE, "hardware": {**BASE["hardware"], "chiplets": [{**BASE["hardware"]["chiplets"][0],
                                                                      "sequence_us": 100.0}]}}
    w1 = dse.prepare(Study.from_dict(waiting))
    w2 = dse.prepare(system_study().model_copy(update={"hardware": Study.from_dict(waiting).hardware}))
    for plain, slow, design in ((p1, w1, one), (p2, w2, two)):
        before = plain.evaluator.evaluate_designs([design]).iloc[0]["latency_s"]
        after = slow.evaluator.evaluate_designs([design]).iloc[0]["latency_s"]
        assert after - before == pytest.approx(4 * 100e-6, rel=1e-9)
