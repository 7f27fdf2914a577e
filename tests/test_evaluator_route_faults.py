"""Failures that change routes: a chiplet whose router fails with it, and link failures (study ``faults``)."""
from pathlib import Path

import numpy as np
import pytest
import yaml

import dse
import noc
from dse.study.schema import FaultsSpec

FT = ["fault_tolerance_frac", "worst_retained_frac", "all_served_frac", "mc_retained_frac", "mc_survival_frac"]


def _prepare(name: str, mapping: str = "many-to-many", package: dict | None = None, **faults):
    study = yaml.safe_load(Path(f"tests/data/{name}.yaml").read_text())
    study["mapping"]["kind"] = mapping
    study["faults"] = faults
    study["hardware"]["package"].update(package or {})
    return dse.prepare(dse.Study.from_dict(study))


@pytest.mark.parametrize("name,mapping", [("tiny_moe", "many-to-many"), ("moe_small", "one-to-many")], ids=str)
def test_full_evaluation_on_unchanged_routes_equals_the_delta_path(name, mapping, monkeypatch):
    """With every failure's route table a copy of the intact one, failures evaluated in full (base pass of
    the re-mapped design) give what the delta path gives: single chiplets and Monte Carlo sets."""
    mc = {"samples": 6, "failures": 2, "seed": 3}
    delta = _prepare(name, mapping, monte_carlo=mc)
    monkeypatch.setattr(noc, "fault_routes", lambda routes, **_: routes)
    full = _prepare(name, mapping, failed_router="fails", monte_carlo=mc)
    assert (full.package_evaluator.routes.node_alt >= 0).all() and (full.package_evaluator.routes.mc_alt >= 0).all()
    space = delta.space
    X = np.random.default_rng(11).integers(space.lower, space.upper + 1, size=(40, space.n_var))
    a, b = delta.evaluator(X), full.evaluator(X)
    np.testing.assert_allclose(b[FT].to_numpy(), a[FT].to_numpy(), rtol=1e-9)
    assert 0.0 < a["fault_tolerance_frac"].mean() < 1.0        # the comparison is not between trivial values


def _line_design(prepared, holder_of_one_replica: int):
    """Non-expert units on chiplet 0, experts on chiplet 2, one expert also on ``holder_of_one_replica``."""
    ev = prepared.package_evaluator
    names = prepared.tables.unit_names
    experts = [u for u in names if ".e" in u or "expert" in u]
    assert experts and len(experts) < len(names)
    placement = {u: [2] if u in experts else [0] for u in names}
    placement[experts[0]] = [2, holder_of_one_replica]
    kind = prepared.tables.kind_names[0]
    return dse.Design(rows=1, cols=3, chiplets=[kind] * 3, hbm_stacks=[9, 9, 9], ddr_channels=1, link=ev.link,
                      mapping="many-to-many", placement=placement)


def test_a_failed_router_cuts_a_line_of_three_chiplets():
    """On a 1 x 3 line, chiplet 1 forwards everything between 0 and 2: if its router dies with it, the two
    ends cannot talk and the design keeps nothing; if it keeps forwarding, the design survives. Losing an
    end chiplet changes no surviving route, so both router models agree there exactly."""
    line = {"mesh": {"rows": 1, "cols": 3}}
    forwards = _prepare("tiny_moe", package=line)
    fails = _prepare("tiny_moe", package=line, failed_router="fails")
    design = _line_design(forwards, 1)
    kept_f = forwards.package_evaluator.failure_report(design).set_index("failed_chiplet")
    kept_x = fails.package_evaluator.failure_report(design).set_index("failed_chiplet")
    assert kept_f.loc[1, "all_served"] and kept_f.loc[1, "retained_frac"] > 0.5
    assert not kept_x.loc[1, "all_served"] and kept_x.loc[1, "retained_frac"] == 0.0
    for end in (0, 2):
        assert kept_x.loc[end, "latency_s"] == pytest.approx(kept_f.loc[end, "latency_s"], rel=1e-12)
    metrics = fails.evaluator.evaluate_designs([design]).iloc[0]
    assert metrics["fault_tolerance_frac"] == pytest.approx(kept_x["retained_frac"].mean(), rel=1e-12)


def test_a_failed_link_adds_the_detour_hops_to_each_crossing_hand_off():
    """2 x 2 mesh, non-expert units on chiplet 0 and experts on chiplet 1: with link 0-1 down, both
    directions detour 0-2-3-1 (3 hops instead of 1). Each stage with a hand-off across waits for its
    longest route, so latency grows by 2 hops' zero-load latency (link + router) per such stage; link
    loads per channel are unchanged (Dally & Towles: zero-load latency = hops x per-hop latency)."""
    square = {"mesh": {"rows": 2, "cols": 2}}
    prepared = _prepare("tiny_moe", package=square, links=True)
    ev, tables = prepared.package_evaluator, prepared.tables
    names = tables.unit_names
    experts = {u for u in names if ".e" in u or "expert" in u}
    placement = {u: [1] if u in experts else [0] for u in names}
    design = dse.Design(rows=2, cols=2, chiplets=[tables.kind_names[0]] * 4, hbm_stacks=[9] * 4, ddr_channels=1,
                        link=ev.link, mapping="many-to-many", placement=placement)
    links = ev.link_failure_report(design).set_index("failed_link")
    assert sorted(links.index) == ["0-1", "0-2", "1-3", "2-3"]
    intact = ev.evaluate_designs([design], with_faults=False).iloc[0]["latency_s"]
    for other in ("0-2", "1-3", "2-3"):         # no route in use crosses them
        assert links.loc[other, "latency_s"] == pytest.approx(intact, rel=1e-12)
    T = ev.kernel
    on_one = np.array([u in experts for u in names])
    crossing = on_one[T.edge_src] != on_one[T.edge_dst]
    stages = len(set(T.edge_stage[crossing].tolist()))
    assert stages > 0 and (T.stage_repeat == 1).all() and T.chain
    hop = prepared.study.hardware.package.network(2, 2).link_hop_latency_s[0]
    assert links.loc["0-1", "latency_s"] - intact == pytest.approx(stages * 2 * hop, rel=1e-9)
    metrics = ev.evaluate_designs([design]).iloc[0]
    report = ev.failure_report(design)
    every = np.concatenate([report["retained_frac"], links["retained_frac"]])
    assert metrics["fault_tolerance_frac"] == pytest.approx(every.mean(), rel=1e-12)
    assert metrics["worst_retained_frac"] == pytest.approx(every.min(), rel=1e-12)


def test_too_many_route_tables_is_a_study_error(monkeypatch):
    """Every Monte Carlo set needs its own route table per shape when routers fail: beyond the cap the
    study is refused, naming the key, before anything is built."""
    monkeypatch.setattr(dse.model.routes, "MAX_FAULT_PAIRS", 1_000)
    with pytest.raises(dse.StudyError) as err:
        _prepare("tiny_moe", failed_router="fails", monte_carlo={"samples": 50})
    assert err.value.key == "faults" and "lower monte_carlo.samples" in str(err.value)
