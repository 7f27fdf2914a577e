"""dse.runtime (issue 36) with serving: a serving study's windows through the serving closed form, a
background move contending with serving's link traffic, and the energy a failed link's detours add."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import yaml

import noc
from conftest import DATA
from dse.model.evaluator import design_arrays
from dse.model.traffic import chiplet_traffic, package_routes
from dse.runtime import run_timeline
from dse.runtime.contention import LinkTraffic, contended_cost, serving_traffic
from dse.runtime.link_energy import reroute_energy_j
from dse.runtime.migration import MigrationModel
from dse.runtime.scenario import scenario_from_dict
from dse.serving.analytic import steady_state
from dse.study.spec import Study, load_study
from runtime_helpers import move_cost
from dse.system.prepare import prepare

SERVE = DATA / "timeline_serve.yaml"
STUDY = DATA / "timeline_study.yaml"


@pytest.fixture(scope="module")
def served():
    p = prepare(load_study(SERVE))
    return p, p.evaluator.designs(p.space.seeds[:1])[0]


@pytest.fixture(scope="module")
def prepared(timeline_prepared):
    return timeline_prepared


@pytest.fixture(scope="module")
def design(timeline_design):
    return timeline_design


def scenario(**keys):
    return scenario_from_dict({"horizon_s": 180, "window_s": 60, **keys})


def test_serving_windows_are_the_closed_form_at_the_offered_load(served):
    """No drift, no failures: every window is the serving closed form at the window's load, the figures
    `dse run` reports for the study's request rate (dse.serving.analytic.steady_state on the design's
    affine steps, called here directly)."""
    p, design = served
    sv = p.study.serving
    m = dict(zip(p.evaluator.columns, p.evaluator.design_metrics([design])[0]))
    steps, slots, _ = p.evaluator.steps_of(design)
    for rate in (sv.request_rate, 0.5 * sv.request_rate):
        tl = run_timeline(p, design, scenario(load={"tokens_per_s": rate * sv.output_len}))
        ref = steady_state(steps, rate, sv.input_len, sv.output_len, max_batch=sv.max_batch,
                           kv_tokens=slots * (sv.input_len + sv.output_len), slo_ttft_s=sv.slo.ttft_ms * 1e-3,
                           slo_tpot_s=sv.slo.tpot_ms * 1e-3)
        for w in tl.windows:
            assert w["p99_ttft_ms"] == pytest.approx(1e3 * ref.ttft_p99_s, rel=1e-9)
            assert w["p99_tpot_ms"] == pytest.approx(1e3 * ref.tpot_p99_s, rel=1e-9)
            assert w["mean_ttft_ms"] == pytest.approx(1e3 * ref.ttft_s, rel=1e-9)
            assert w["latency_s"] == pytest.approx(ref.tpot_s, rel=1e-9) == pytest.approx(w["mean_tpot_ms"] / 1e3)
            assert w["request_throughput"] == pytest.approx(rate, rel=1e-12)
            assert w["output_throughput"] == w["tokens_per_s"] == pytest.approx(rate * sv.output_len, rel=1e-12)
            assert w["served_frac"] == pytest.approx(1.0)
        if rate == sv.request_rate:         # what the serving study itself reports at its rate
            assert tl.windows[0]["p99_ttft_ms"] == pytest.approx(1e3 * m["ttft_p99_s"], rel=1e-9)
            assert tl.windows[0]["p99_tpot_ms"] == pytest.approx(1e3 * m["tpot_p99_s"], rel=1e-9)
        assert tl.totals["p99_tpot_ms"] == pytest.approx(1e3 * ref.tpot_p99_s, rel=1e-9)


def test_load_past_capacity_is_served_at_capacity(served):
    p, design = served
    sv = p.study.serving
    saturation = dict(zip(p.evaluator.columns, p.evaluator.design_metrics([design])[0]))["saturation_req_s"]
    assert 0 < saturation < np.inf
    tl = run_timeline(p, design, scenario(load={"tokens_per_s": 3 * saturation * sv.output_len}))
    for w in tl.windows:
        assert w["served_frac"] == pytest.approx(1 / 3, rel=1e-9)
        assert w["tokens_per_s"] == pytest.approx(saturation * sv.output_len, rel=1e-9)
        assert w["request_throughput"] == pytest.approx(saturation, rel=1e-9)
    saturating = run_timeline(p, design, scenario())
    assert saturating.windows[0]["tokens_per_s"] == pytest.approx(saturation * sv.output_len, rel=1e-9)
    assert saturating.totals["availability"] == pytest.approx(1.0)


def test_serving_timeline_follows_drift_and_failures(served):
    """A chiplet failure under a serving study lowers what is served (the closed form on the re-mapped
    design, its lost selections unserved) until repaired."""
    p, design = served
    only = [s[0] for s in design.placement.values() if len(s) == 1]
    fail = {"events": [{"t_s": 60, "chiplet": only[0], "repair_s": 60}]}
    tl = run_timeline(p, design, scenario(failures=fail))
    before, during, after = (w["tokens_per_s"] for w in tl.windows)
    assert during < before and after == pytest.approx(before, rel=1e-12)


def test_a_detour_costs_its_extra_hops(prepared):
    """Hand computation: 1 GB from chiplet 0 to 1 of a 2 x 2 mesh of UCIe advanced; link 0-1 fails, the
    route detours 0 -> 2 -> 3 -> 1: two hops more, each 0.3 pJ/bit of link (Gemini, HPCA'24; UCIe 2.5D
    target 0.25-0.3 pJ/bit) and 0.28 pJ/bit of router (Gemini, HPCA'24)."""
    topology = prepared.study.hardware.package.network(2, 2)
    routes = noc.route(topology, "xy")
    traffic = np.zeros((4, 4))
    traffic[0, 1] = 1e9
    expected = 1e9 * 8 * 2 * (0.3e-12 + 0.28e-12)
    assert reroute_energy_j(routes, traffic, [(0, 1)]) == pytest.approx(expected, rel=1e-9)
    assert reroute_energy_j(routes, traffic, []) == 0.0


def test_link_failure_window_energy_counts_the_rerouted_traffic(design):
    """A failed link's window: the step's energy per token plus its traffic's extra hops (each pair whose
    route crossed the link detours by the shortest path around it; hops x bits x pJ/bit by hand)."""
    data = yaml.safe_load(STUDY.read_text())
    data["faults"] = {"links": True}
    linked = prepare(Study.from_dict(data, base_dir=DATA))
    t = linked.tables
    sc = scenario(failures={"events": [{"t_s": 0, "component": "link", "link": [0, 1]}]})
    tl = run_timeline(linked, design, sc)
    intact = linked.evaluator.evaluate_designs([design])["energy_j_per_token"].iloc[0]
    _, routes = package_routes(design, linked.study.hardware.package)
    graph = nx.grid_2d_graph(2, 3)
    graph = nx.convert_node_labels_to_integers(graph, ordering="sorted")      # chiplet r * 3 + c
    cut = graph.copy()
    cut.remove_edge(0, 1)
    traffic = chiplet_traffic(design, t)
    extra_hops_bytes = 0.0
    for a, b in zip(*np.nonzero(traffic)):
        path = routes.path(a, b)
        if any({x, y} == {0, 1} for x, y in zip(path, path[1:])):
            extra_hops_bytes += traffic[a, b] * (nx.shortest_path_length(cut, a, b) - (len(path) - 1))
    assert extra_hops_bytes > 0
    pj_per_bit = 0.3 + 0.28                     # UCIe advanced link + router (noc/data/links.yaml, Gemini)
    by_hand = extra_hops_bytes * 8 * pj_per_bit * 1e-12 / t.tokens_per_step
    assert tl.totals["energy_j_per_token"] == pytest.approx(intact + by_hand, rel=1e-9)


def _move_setup(prepared, design):
    """The tables, migration model, package routes and link bandwidth the hand computations below use."""
    _, routes = package_routes(design, prepared.study.hardware.package)
    return (prepared.tables, MigrationModel(prepared.tables, prepared.study.hardware.package, design), routes,
            prepared.tables.link.bandwidth_Bps)


def test_background_move_takes_what_serving_leaves(prepared, design):
    """Hand computation: one expert copied from chiplet 0 to chiplet 5 (3 hops) while serving sends r B/s
    on each link of the route: time = bytes / (link bandwidth - r); energy as without contention; with
    ``share`` above what is left, the move takes share x bandwidth and serving keeps (bw - taken) / r."""
    t, model, routes, bw = _move_setup(prepared, design)
    unit = "L0-31.e1"
    nbytes = float(t.unit_capacity_bytes[t.unit_names.index(unit)])
    n_links = len(routes.topology.link_src)
    rate = np.zeros(n_links)
    rate[routes.links(0, 5)] = 0.4 * bw
    traffic = LinkTraffic(rate, np.full(n_links, bw), routes)
    free = move_cost(model, [(unit, 5, [0])])
    move = (np.array([t.unit_names.index(unit)]), np.array([5]), np.array([[0]]))
    cost = contended_cost(model, *move, frozenset(), traffic, share=0.1)
    assert cost.time_s == pytest.approx(nbytes / (bw - 0.4 * bw), rel=1e-12)
    assert cost.energy_j == pytest.approx(free.energy_j, rel=1e-12) and cost.throughput == 1.0
    squeezed = contended_cost(model, *move, frozenset(), traffic, share=0.8)
    assert squeezed.time_s == pytest.approx(nbytes / (0.8 * bw), rel=1e-12)
    assert squeezed.throughput == pytest.approx((bw - 0.8 * bw) / (0.4 * bw), rel=1e-12)


def test_background_moves_share_a_link_with_serving(prepared, design):
    """Hand computation: two experts copied from chiplet 0 to chiplets 2 and 5 both cross 0 -> 1 -> 2
    while serving sends 0.4 W on every link of those routes: the pair gets what serving leaves, 0.6 W,
    for both, (b1 + b2) / 0.6 W; serving keeps all of its share (the moves take what it leaves)."""
    t, model, routes, bw = _move_setup(prepared, design)
    units = ["L0-31.e1", "L0-31.e2"]
    nbytes = sum(float(t.unit_capacity_bytes[t.unit_names.index(u)]) for u in units)
    n_links = len(routes.topology.link_src)
    rate = np.zeros(n_links)
    rate[routes.links(0, 5)] = 0.4 * bw
    assert set(routes.links(0, 2)) <= set(routes.links(0, 5))
    move = (np.array([t.unit_names.index(u) for u in units]), np.array([2, 5]), np.array([[0], [0]]))
    cost = contended_cost(model, *move, frozenset(), LinkTraffic(rate, np.full(n_links, bw), routes), share=0.1)
    assert cost.time_s == pytest.approx(nbytes / (0.6 * bw), rel=1e-12)
    assert cost.throughput == pytest.approx(1.0)


def test_background_move_shares_the_hbm_with_serving(prepared, design):
    """Hand computation: serving reads r = H - W / 2 from chiplet 0's HBM (H its bandwidth, W a link's);
    a copy out of chiplet 0 gets what serving leaves, W / 2: b / (W / 2). With ``share`` 0.5 it takes
    half the HBM, more than the link carries, so the link bounds it (b / W) and serving keeps
    (H - W) / r of its HBM rate while it runs."""
    t, model, routes, bw = _move_setup(prepared, design)
    unit = "L0-31.e1"
    nbytes = float(t.unit_capacity_bytes[t.unit_names.index(unit)])
    hbm = design.hbm_stacks[0] * t.hbm_bw_Bps
    assert 0.5 * hbm > bw and 0.01 * hbm < 0.5 * bw
    n_links = len(routes.topology.link_src)
    memory = np.zeros(len(design.hbm_stacks) + 1)
    memory[0] = hbm - 0.5 * bw
    traffic = LinkTraffic(np.zeros(n_links), np.full(n_links, bw), routes, memory)
    move = (np.array([t.unit_names.index(unit)]), np.array([5]), np.array([[0]]))
    cost = contended_cost(model, *move, frozenset(), traffic, share=0.01)
    assert cost.time_s == pytest.approx(nbytes / (0.5 * bw), rel=1e-12)
    assert cost.throughput == pytest.approx(1.0)
    squeezed = contended_cost(model, *move, frozenset(), traffic, share=0.5)
    assert squeezed.time_s == pytest.approx(nbytes / bw, rel=1e-12)
    assert squeezed.throughput == pytest.approx((hbm - bw) / (hbm - 0.5 * bw), rel=1e-12)


def test_serving_reads_each_chiplets_hbm_at_the_steps_dram_bytes(prepared, design):
    """Serving's memory rates are the evaluator's own DRAM bytes per chiplet over its step: they add up to
    the step's ``dram_bytes``, only chiplets that hold units read, and with all the weights in HBM
    (nothing spills) the DDR reads nothing."""
    from dse.model.breakdown import chiplet_dram_bytes
    ev = prepared.for_design(design).package_evaluator
    d = design_arrays([design], prepared.tables, ev.space.max_slots, prepared.study.mapping.max_replicas)
    traffic = serving_traffic(ev, prepared.study.hardware.package, d)
    row = prepared.evaluator.evaluate_designs([design]).iloc[0]
    hbm, ddr = chiplet_dram_bytes(ev, d)
    assert traffic.memory_Bps[:-1] * row["latency_s"] == pytest.approx(hbm, rel=1e-9)
    assert hbm.sum() + ddr.sum() == pytest.approx(row["dram_bytes"], rel=1e-9)
    holds = {s for slots in design.placement.values() for s in slots}
    assert all((hbm[i] > 0) == (i in holds) for i in range(len(hbm)))
    if row["capacity_short_bytes"] == 0 and design.ddr_channels == 0:
        assert ddr.sum() == 0.0


def test_serving_traffic_is_the_steps_link_bytes_over_its_latency(prepared, design):
    ev = prepared.for_design(design).package_evaluator
    d = design_arrays([design], prepared.tables, ev.space.max_slots, prepared.study.mapping.max_replicas)
    traffic = serving_traffic(ev, prepared.study.hardware.package, d)
    step = prepared.evaluator.evaluate_designs([design])["latency_s"].iloc[0]
    pairs = chiplet_traffic(design, prepared.tables)
    _, routes = package_routes(design, prepared.study.hardware.package)
    by_link = np.zeros(len(traffic.rate_Bps))
    for a, b in zip(*np.nonzero(pairs)):
        by_link[routes.links(a, b)] += pairs[a, b]
    assert traffic.rate_Bps == pytest.approx(by_link / step, rel=1e-9)


def test_background_periodic_pays_for_contention(prepared, design):
    """Background moves under a rotating hot set: the moves run at what serving leaves (at least the
    share), so they land later than at the full bandwidth a stall gets, and the old mapping serves meanwhile."""
    rot = {"drift": "rotate", "rate_per_s": 1 / 300}
    sc = dict(horizon_s=1800, popularity=rot)
    stall = run_timeline(prepared, design, scenario(**sc), "periodic", every_s=300)
    back = run_timeline(prepared, design, scenario(**sc, migration={"mode": "background", "share": 0.5}),
                        "periodic", every_s=300)
    moved = [i for i, w in enumerate(stall.windows) if w["migrations"]]
    assert moved and all(back.windows[i]["migration_s"] >= stall.windows[i]["migration_s"] for i in moved)
    assert all(back.windows[i]["served_frac"] >= stall.windows[i]["served_frac"] for i in moved)


# -- a serving study's runtime section and each window's energy at its load ------------------------------

RUNTIME_SCENARIO = {"name": "serve-short", "horizon_s": 300, "window_s": 60, "load": {"tokens_per_s": 64.0},
                    "popularity": {"drift": "rotate", "rate_per_s": 1 / 120},
                    "failures": {"events": [{"t_s": 120, "chiplet": 1, "repair_s": 60}], "spares": 1}}


def write_serving_study(tmp_path, base=SERVE, objectives=("tokens_over_horizon", "availability", "migration_energy")):
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump(RUNTIME_SCENARIO, sort_keys=False))
    data = yaml.safe_load(base.read_text())
    data["runtime"] = {"scenario": "scenario.yaml", "policy": "periodic", "every_s": 120}
    data["search"] = {"objectives": list(objectives), "population": 4, "generations": 1}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_serving_runtime_columns_are_the_timeline_totals(tmp_path):
    """A serving study with ``runtime:``: its snapshot columns stay the serving evaluator's, and the
    runtime columns are `dse timeline`'s totals (the serving closed form per window) for the same designs."""
    import dse
    from dse.runtime.scenario import load_scenario
    from dse.runtime.search import RUNTIME_COLUMNS
    from dse.runtime.timeline import run_timelines
    prepared = dse.prepare(dse.load_study(write_serving_study(tmp_path)))
    space = prepared.space
    X = np.vstack([space.seeds[:2], np.random.default_rng(3).integers(space.lower, np.asarray(space.upper) + 1,
                                                                       size=(1, space.n_var))])
    metrics = prepared.evaluator(X)
    snapshot = prepared.evaluator.study_evaluator(X)
    assert "ttft_p99_s" in snapshot.columns
    assert list(metrics.columns) == list(snapshot.columns) + list(RUNTIME_COLUMNS)
    assert np.array_equal(metrics[snapshot.columns].to_numpy(), snapshot.to_numpy(), equal_nan=True)
    lines = run_timelines(prepared, prepared.evaluator.designs(X), load_scenario(tmp_path / "scenario.yaml"),
                          "periodic", 120, strict=False)
    for column, total in RUNTIME_COLUMNS.items():
        assert metrics[column].tolist() == pytest.approx([t.totals[total] for t in lines], rel=1e-12)
    assert "p99_ttft_ms" in lines[0].totals          # the serving closed form priced the windows
    assert (metrics["tokens_over_horizon"] > 0).all() and (metrics["availability_frac"] <= 1 + 1e-12).all()


@pytest.mark.parametrize("base", ["train_llama2_7b.yaml", "deepseek_v3_multi_package.yaml"])
def test_runtime_still_refused_where_it_cannot_follow(tmp_path, base):
    from dse.errors import StudyError
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump(RUNTIME_SCENARIO, sort_keys=False))
    path = tmp_path / "study.yaml"
    text = (DATA.parent.parent / "studies" / base).read_text()
    path.write_text(text + "\nruntime: {scenario: scenario.yaml, policy: static}\n")
    with pytest.raises(StudyError) as exc:
        load_study(path)
    assert exc.value.key == "runtime" and "serve" in str(exc.value)


class AffineServer:
    """Affine steps in seconds and joules and an idle power: what dse.serving.simulate needs of a step table."""

    def __init__(self, seconds, joules, idle_w):
        self.s, self.j, self.idle_w = seconds, joules, idle_w

    def decode(self, b, c):
        return self.s.decode(b, c)

    def prefill(self, b, c):
        return self.s.prefill(b, c)

    def decode_energy(self, b, c):
        return self.j.decode(b, c)

    def prefill_energy(self, b, c):
        return self.j.prefill(b, c)


def served_energy(p, design):
    """The design's affine steps in seconds (`ServingEvaluator.steps_of`, what `dse run` fits) and in joules
    (the same four steps' energy per token x their tokens: decode of max_batch and of 1 sequence, prefill
    of 1 and of 8 prompts), the slots and the package's idle power."""
    import dataclasses
    from dse.serving.analytic import REF_PROMPTS, AffineSteps
    from dse.serving.package import uncached_share
    from dse.serving.steps import idle_power_w
    from dse.system.metrics import C
    ev, sv = p.evaluator, p.study.serving
    steps, slots, _ = ev.steps_of(design)
    e = {name: float(x.design_metrics([design], False)[0, C["energy_j_per_token"]]) for name, x in ev.points.items()}
    ref = min(REF_PROMPTS, sv.max_batch)
    joules = AffineSteps.from_points(e["decode_1"] * 1, float(ev.system.design_metrics([design], False)[
        0, C["energy_j_per_token"]]) * sv.max_batch, sv.max_batch, e["prefill_1"] * sv.input_len,
        e["prefill_ref"] * ref * sv.input_len, ref, sv.input_len)
    return steps, dataclasses.replace(joules, pk=joules.pk * uncached_share(sv)), slots, idle_power_w(p, design)


def test_window_energy_is_the_served_load_energy(served):
    """No drift, no failures: a window's energy per output token is the serving study's own steps (the
    four steps `dse run` costs, their energies) priced at the window's request rate by the closed form's
    batch (dse.serving.analytic.energy_per_output_token), and it falls as the load rises (idle power and
    batches of one at low load)."""
    from dse.serving.analytic import energy_per_output_token
    p, design = served
    sv = p.study.serving
    steps, joules, slots, idle_w = served_energy(p, design)
    assert idle_w > 0
    per_token = []
    for rate in (0.05, 0.5, sv.request_rate):
        tl = run_timeline(p, design, scenario(load={"tokens_per_s": rate * sv.output_len}))
        ref = steady_state(steps, rate, sv.input_len, sv.output_len, max_batch=sv.max_batch,
                           kv_tokens=slots * (sv.input_len + sv.output_len))
        arrays = lambda s: tuple(np.array([getattr(s, f)]) for f in ("d1", "slope", "p0", "pk"))   # noqa: E731
        expected = energy_per_output_token(np.array([rate]), np.array([ref.in_flight]), np.array([slots]),
                                           arrays(steps), arrays(joules), idle_w, float(sv.output_len))[0]
        assert tl.totals["energy_j_per_token"] == pytest.approx(expected, rel=1e-9)
        per_token.append(expected)
    assert per_token[0] > per_token[1] > per_token[2]
    saturated = run_timeline(p, design, scenario()).totals["energy_j_per_token"]
    assert per_token[0] > 3 * saturated and saturated < per_token[2]


def test_energy_at_load_matches_the_simulated_server(served):
    """The closed form's energy per output token against dse.serving.simulate's run of the same affine
    steps, energies and idle power (Poisson arrivals, continuous batching: every prefill, decode step and
    idle gap charged as it happens; the simulation's energy is checked against ML.ENERGY's 38 measured
    vLLM runs in docs/serving.md), within 10 %, at a light and at a heavy load."""
    from dse.serving.analytic import energy_per_output_token
    from dse.serving.requests import synthetic
    from dse.serving.simulate import simulate
    p, design = served
    sv = p.study.serving
    steps, joules, slots, idle_w = served_energy(p, design)
    server = AffineServer(steps, joules, idle_w)
    arrays = lambda s: tuple(np.array([getattr(s, f)]) for f in ("d1", "slope", "p0", "pk"))   # noqa: E731
    for rate, n in ((0.05, 150), (0.8 * sv.request_rate, 400)):
        ref = steady_state(steps, rate, sv.input_len, sv.output_len, max_batch=sv.max_batch,
                           kv_tokens=slots * (sv.input_len + sv.output_len))
        model = energy_per_output_token(np.array([rate]), np.array([ref.in_flight]), np.array([slots]),
                                        arrays(steps), arrays(joules), idle_w, float(sv.output_len))[0]
        run = simulate(synthetic(n, sv.input_len, sv.output_len, rate, seed=4), server, max_batch=int(slots))
        assert model == pytest.approx(run.metrics()["energy_j_per_output_token"], rel=0.10)


def test_energy_per_token_by_hand():
    """Hand computation (dse.serving.analytic.energy_per_output_token): steps d1 20 ms, slope 0.5 ms,
    p0 10 ms, pk 30 ms; joules 8, 0.2, 4, 12 J; idle 100 W; O = 100 tokens, 32 slots.
    Light: 0.1 req/s, 0.2 in flight -> a busy step holds b = 0.2 / (1 - e^-0.2) = 1.1033 sequences, lasts
    0.02 + 0.1033 x 0.0005 = 0.020052 s; a = 0.1 x 0.020052, k = a / (1 - e^-a) = 1.0010;
    busy = 0.1 (99 x 0.020052 / 1.1033 + 0.03 + 0.01 / k) = 0.18392;
    work = 0.1 (99 x (8 + 0.2 x 0.1033) / 1.1033 + 12 + 4 / k) = 73.568 W;
    (73.568 + 100 x (1 - 0.18392)) / (0.1 x 100) = 15.518 J/token.
    Heavy: 6 req/s, 32 in flight -> b = 32, step 0.02 + 31 x 0.0005 = 0.0355 s, a = 0.213, k = 1.1103;
    busy = 6 (99 x 0.0355 / 32 + 0.03 + 0.01 / k) = 0.8930; work = 6 (99 x 14.2 / 32 + 12 + 4 / k) = 357.20 W;
    (357.20 + 100 x 0.1070) / 600 = 0.6132 J/token: idle watts and small batches cost 25x per token."""
    from dse.serving.analytic import energy_per_output_token
    steps = tuple(np.array([x, x]) for x in (0.02, 0.0005, 0.01, 0.03))
    joules = tuple(np.array([x, x]) for x in (8.0, 0.2, 4.0, 12.0))
    out = energy_per_output_token(np.array([0.1, 6.0]), np.array([0.2, 32.0]), np.array([32.0, 32.0]), steps,
                                  joules, 100.0, 100.0)
    assert out == pytest.approx([15.518, 0.61317], rel=1e-4)
    chunked = energy_per_output_token(np.array([0.1]), np.array([0.2]), np.array([32.0]),
                                      tuple(x[:1] for x in steps), tuple(x[:1] for x in joules), 100.0, 100.0, True)
    # chunked prefill: the pass's p0 rides the decodes: busy 0.1 (99 x 0.020052 / 1.1033 + 0.03) = 0.18292,
    # work 0.1 (99 x 8.02067 / 1.1033 + 12) = 73.168 W
    assert chunked[0] == pytest.approx((73.168 + 100 * (1 - 0.18292)) / 10.0, rel=1e-4)


def test_failed_chiplets_draw_no_idle_power_and_waiting_spares_do():
    """Hand computation on a 2 x 3 package of one kind at P W idle each (dse.runtime.serving_window.
    segment_idle_w): chiplet 1 down with no spare standing in: 5 P; one spare waiting beside it: 6 P; the
    spare standing in for chiplet 1: 6 P (none waiting); a second spare waiting: 7 P."""
    from types import SimpleNamespace
    from dse.runtime.serving_window import segment_idle_w
    p = 37.5
    slots = np.full(6, p)

    def seg(down, failed):
        return SimpleNamespace(chiplets=frozenset(down)), frozenset(failed)
    assert segment_idle_w(*seg([], []), slots, 0) == pytest.approx(6 * p)
    assert segment_idle_w(*seg([1], [1]), slots, 0) == pytest.approx(5 * p)
    assert segment_idle_w(*seg([1], [1]), slots, 1) == pytest.approx(6 * p)
    assert segment_idle_w(*seg([1], []), slots, 1) == pytest.approx(6 * p)
    assert segment_idle_w(*seg([1], []), slots, 2) == pytest.approx(7 * p)
    assert segment_idle_w(*seg([], [2]), slots, 0) == pytest.approx(6 * p)      # HBM lost: it still forwards


def test_serving_window_idle_power_follows_failures_and_spares(served):
    """A chiplet down all along under `static` (no spare used): each spare waiting adds the same idle
    power, so the energy per token is affine in the spares (the closed form's idle time per token is
    the same), and it rises with them."""
    p, design = served
    sv = p.study.serving
    sole = {s[0] for u, s in design.placement.items() if len(set(s)) == 1 and ".e" not in u}
    chiplet = min(set(range(len(design.chiplets))) - sole)      # its loss leaves every non-expert unit served
    fail = {"events": [{"t_s": 0, "chiplet": chiplet}]}
    load = {"tokens_per_s": 0.3 * sv.output_len}
    e = [run_timeline(p, design, scenario(load=load, failures={**fail, "spares": k}), "static")
         .totals["energy_j_per_token"] for k in (0, 1, 2)]
    assert e[0] < e[1] < e[2]
    assert e[2] - e[1] == pytest.approx(e[1] - e[0], rel=1e-9)


def test_dse_run_energy_is_at_the_request_rate(served):
    """`dse run`'s energy per token of a serving study is the server's at its ``request_rate`` (the
    closed form's batch, prefills and idle power: dse.serving.analytic.energy_per_output_token, the helper
    checked against the request-by-request simulation above), equal to a timeline window at that load,
    not the ``max_batch`` decode step's; its operational carbon follows it."""
    from dse.serving.analytic import energy_per_output_token
    from dse.system.carbon import operational_g
    from dse.system.metrics import C
    p, design = served
    sv = p.study.serving
    m = dict(zip(p.evaluator.columns, p.evaluator.design_metrics([design])[0]))
    steps, joules, slots, idle_w = served_energy(p, design)
    ref = steady_state(steps, sv.request_rate, sv.input_len, sv.output_len, max_batch=sv.max_batch,
                       kv_tokens=slots * (sv.input_len + sv.output_len))
    assert ref.saturation_req_s > sv.request_rate
    arrays = lambda s: tuple(np.array([getattr(s, f)]) for f in ("d1", "slope", "p0", "pk"))   # noqa: E731
    expected = energy_per_output_token(np.array([sv.request_rate]), np.array([ref.in_flight]), np.array([slots]),
                                       arrays(steps), arrays(joules), idle_w, float(sv.output_len))[0]
    assert m["energy_j_per_token"] == pytest.approx(expected, rel=1e-9)
    tl = run_timeline(p, design, scenario(load={"tokens_per_s": sv.request_rate * sv.output_len}))
    assert m["energy_j_per_token"] == pytest.approx(tl.totals["energy_j_per_token"], rel=1e-9)
    decode = float(p.evaluator.system.design_metrics([design], False)[0, C["energy_j_per_token"]])
    assert m["energy_j_per_token"] > decode
    grid = p.evaluator.system.factors.grid_g_per_kwh
    assert m["carbon_operational_g_per_token"] == pytest.approx(float(operational_g(expected, grid)), rel=1e-9)
    X = p.space.seeds[:1]
    row = p.evaluator.metrics_array(np.asarray(X))[0]
    assert row[p.evaluator.columns.index("energy_j_per_token")] == pytest.approx(expected, rel=1e-9)
