"""dse.runtime and `dse timeline` (issue 36): a design through popularity drift, migration and failures."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from conftest import DATA
from dse.runtime import run_timeline
from dse.runtime.mapping import ExpertGroups
from runtime_helpers import move_cost, moved_copies, relabelled
from dse.runtime.migration import MigrationModel
from dse.runtime.scenario import scenario_from_dict

STUDY = DATA / "timeline_study.yaml"
ROTATE = {"drift": "rotate", "rate_per_s": 1 / 300}


@pytest.fixture(scope="module")
def prepared(timeline_prepared):
    return timeline_prepared


@pytest.fixture(scope="module")
def design(timeline_design):
    return timeline_design


@pytest.fixture
def files(tmp_path, design):
    def write(scenario: dict):
        d, s = tmp_path / "design.yaml", tmp_path / "scenario.yaml"
        d.write_text(yaml.safe_dump(design.to_dict(), sort_keys=False))
        s.write_text(yaml.safe_dump(scenario, sort_keys=False))
        return d, s
    return write


def scenario(**keys):
    return scenario_from_dict({"horizon_s": 3600, "window_s": 60, **keys})


def test_steady_windows_equal_dse_evaluate(dse_cli, files):
    d, s = files({"horizon_s": 600, "window_s": 60})
    code, out, _ = dse_cli("evaluate", STUDY, "--design", d, "--json")
    assert code == 0
    latency = json.loads(out)["metrics"]["latency_s"]
    code, out, err = dse_cli("timeline", STUDY, "--design", d, "--scenario", s, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert len(result["windows"]) == 10
    assert set(result["windows"][0]) >= {"t_s", "latency_s", "tokens_per_s", "imbalance", "migrations",
                                         "migration_bytes", "failed_components", "served_frac"}
    assert set(result["totals"]) == {"tokens_served", "mean_latency_s", "p99_latency_s", "availability",
                                     "migration_bytes", "migration_energy_j", "energy_j_per_token"}
    for w in result["windows"]:
        assert w["latency_s"] == pytest.approx(latency, rel=1e-12)
        assert w["served_frac"] == 1.0 and w["migrations"] == 0
    assert result["totals"]["tokens_served"] == pytest.approx(600 * 4 * 1024 / latency, rel=1e-9)


def test_drift_is_the_evaluator_at_the_moved_popularity(prepared, design):
    """A window's step is the evaluator's: a rotation of popularity costs what the relabelled design costs."""
    groups = ExpertGroups.from_tables(prepared.tables)
    perm = [(np.arange(len(n)) + 3) % len(n) for n in groups.names]
    tl = run_timeline(prepared, design, scenario(horizon_s=120, popularity={"drift": "rotate", "rate_per_s": 3 / 60}))
    expected = prepared.evaluator.evaluate_designs([relabelled(design, groups, perm)])["latency_s"].iloc[0]
    assert tl.windows[1]["latency_s"] == pytest.approx(expected, rel=1e-12)


def test_one_migration_by_hand(prepared, design):
    """One expert copied from chiplet 0 to chiplet 5 of a 2 x 3 mesh: 3 hops."""
    t = prepared.tables
    model = MigrationModel(t, prepared.study.hardware.package, design)
    unit = "L0-31.e1"
    nbytes = float(t.unit_capacity_bytes[t.unit_names.index(unit)])
    cost = move_cost(model, [(unit, 5, [0])])
    stacks = design.hbm_stacks
    bw = min(stacks[0] * t.hbm_bw_Bps, stacks[5] * t.hbm_bw_Bps, t.link.bandwidth_Bps)
    energy = nbytes * (2 * t.hbm.energy_j_per_byte + 3 * (t.link.energy_j_per_byte + t.link.router_energy_j_per_byte))
    assert (cost.bytes, cost.moves) == (nbytes, 1)
    assert cost.time_s == pytest.approx(nbytes / bw, rel=1e-12)
    assert cost.energy_j == pytest.approx(energy, rel=1e-12)


def link_sums_by_hand(prepared, design, moves: list[tuple[int, int, float]]) -> dict:
    """Bytes per directed link (a, b) of ``moves`` (source, dest, bytes), walking each route's chiplets
    (noc.Routes.path, the evaluator's routing)."""
    from dse.model.traffic import package_routes
    _, routes = package_routes(design, prepared.study.hardware.package)
    sums: dict = {}
    for s, d, b in moves:
        path = routes.path(s, d)
        for a, c in zip(path, path[1:]):
            sums[a, c] = sums.get((a, c), 0.0) + b
    return sums


def test_two_moves_sharing_a_link_share_its_bandwidth(prepared, design):
    """Two experts copied from chiplet 0 (2 x 3 mesh, dimension-order routes) to chiplets 2 and 5 both
    cross 0 -> 1 -> 2: concurrent flows share that link, so the pair takes the bytes summed over the link's
    bandwidth, (b1 + b2) / W (a cut of one link carries both flows: the max-flow/min-cut bound, here
    tight), not max(b1, b2) / W as if each had the link alone."""
    t = prepared.tables
    model = MigrationModel(t, prepared.study.hardware.package, design)
    units = ["L0-31.e1", "L0-31.e2"]
    nbytes = [float(t.unit_capacity_bytes[t.unit_names.index(u)]) for u in units]
    sums = link_sums_by_hand(prepared, design, [(0, 2, nbytes[0]), (0, 5, nbytes[1])])
    assert sums[0, 1] == sums[1, 2] == pytest.approx(sum(nbytes))           # both routes cross 0 -> 1 -> 2
    bw = t.link.bandwidth_Bps
    assert min(design.hbm_stacks[i] for i in (0, 2, 5)) * t.hbm_bw_Bps > 2 * bw     # the link is the bottleneck
    cost = move_cost(model, [(units[0], 2, [0]), (units[1], 5, [0])])
    assert cost.time_s == pytest.approx(sum(nbytes) / bw, rel=1e-12)
    alone = [move_cost(model, [(u, d, [0])]).time_s for u, d in zip(units, (2, 5))]
    assert alone == pytest.approx([b / bw for b in nbytes], rel=1e-12)
    assert cost.time_s > max(alone)
    assert cost.energy_j == pytest.approx(sum(move_cost(model, [(u, d, [0])]).energy_j for u, d in zip(units, (2, 5))))


def test_compiled_change_prices_the_moved_copies(prepared, design):
    """The planner's one compiled call (`MigrationModel.change_cost`, `priced_change`) prices what the unit-by-unit
    Python form lists: the copies a new mapping places where the old one had none (`moved_copies`), then
    every copy on a revived slot, copied from the unit's other copies; the same floats, bit for bit."""
    from dse.runtime.mapping import placement_arrays
    t = prepared.tables
    model = MigrationModel(t, prepared.study.hardware.package, design)
    old = design.placement
    new = {u: list(s) for u, s in old.items()}
    experts = [u for u in t.unit_names if ".e" in u][:6]
    for k, u in enumerate(experts):
        new[u] = sorted({(s + 1 + k) % 6 for s in old[u]} | ({k % 6} if k % 2 else set()))
    arrays = [placement_arrays(p, t.unit_names) for p in (old, new)]
    failed = frozenset({1})
    moves = moved_copies(old, new)
    assert len(moves) >= len(experts)
    assert model.priced_change(*arrays, set(), failed).cost == move_cost(model, moves, failed)
    assert model.change_cost(*arrays, set(), failed) == move_cost(model, moves, failed)
    revived = moves + [(u, 3, [s for s in new[u] if s != 3]) for u in t.unit_names if 3 in new[u]]
    assert model.priced_change(*arrays, {3}, failed).cost == move_cost(model, revived, failed)


def test_moves_out_of_one_chiplet_obey_its_cut(prepared, design):
    """One expert copied from chiplet 0 to each of the five others: every byte leaves chiplet 0 over its
    two out-links and is read from its HBM, so no schedule beats total / (2 W) (the cut around chiplet 0,
    max-flow/min-cut) nor total / HBM bandwidth; the moves take exactly the busiest resource's bytes over
    its bandwidth (links summed by hand along the routes) or the longest destination's copy, whichever
    is more."""
    t = prepared.tables
    model = MigrationModel(t, prepared.study.hardware.package, design)
    moves = [(f"L0-31.e{k}", d, [0]) for k, d in zip(range(1, 6), range(1, 6))]
    nbytes = [float(t.unit_capacity_bytes[t.unit_names.index(u)]) for u, _, _ in moves]
    cost = move_cost(model, moves)
    bw = t.link.bandwidth_Bps
    total = sum(nbytes)
    assert cost.time_s >= total / (2 * bw) * (1 - 1e-12)
    assert cost.time_s >= total / (design.hbm_stacks[0] * t.hbm_bw_Bps) * (1 - 1e-12)
    sums = link_sums_by_hand(prepared, design, [(0, d, b) for (_, d, _), b in zip(moves, nbytes)])
    memory = max(total / (design.hbm_stacks[0] * t.hbm_bw_Bps),
                 *(b / (design.hbm_stacks[d] * t.hbm_bw_Bps) for (_, d, _), b in zip(moves, nbytes)))
    serial = max(move_cost(model, [m]).time_s for m in moves)
    assert cost.time_s == pytest.approx(max(max(sums.values()) / bw, memory, serial), rel=1e-12)


def test_periodic_beats_static_until_migration_is_slow(prepared, design):
    static = run_timeline(prepared, design, scenario(popularity=ROTATE), "static").totals["tokens_served"]
    gains = []
    for scale in (1.0, 1e-2, 1e-3, 1e-4):
        tl = run_timeline(prepared, design, scenario(popularity=ROTATE, migration={"bandwidth_scale": scale}),
                          "periodic", every_s=60)
        gains.append(tl.totals["tokens_served"] / static)
    assert gains[0] > 1.2
    assert all(a > b for a, b in zip(gains, gains[1:]))
    assert gains[-1] < 1.0          # moves so slow that static wins (docs/runtime.md: the crossover)


def test_failure_lowers_throughput_until_the_policy_acts(prepared, design):
    # chiplet 4 holds the only copy of an expert: its selections go unserved under static
    assert [u for u, s in design.placement.items() if s == [4]]
    fail = {"events": [{"t_s": 1830, "chiplet": 4}], "spares": 1}
    static = run_timeline(prepared, design, scenario(failures=fail), "static").windows
    recover = run_timeline(prepared, design, scenario(failures=fail), "on-failure").windows
    before = static[29]["tokens_per_s"]
    assert static[30]["tokens_per_s"] < before and all(w["tokens_per_s"] < 0.97 * before for w in static[31:])
    assert all(w["served_frac"] < 1 for w in static[31:])
    assert recover[30]["tokens_per_s"] < before
    assert recover[31]["migrations"] > 0 and recover[31]["failed_components"] == ["chiplet 4"]
    assert all(w["tokens_per_s"] >= 0.95 * before for w in recover[32:])


def test_threshold_and_random_walk(prepared, design):
    tl = run_timeline(prepared, design, scenario(popularity={"drift": "random_walk", "rate_per_s": 0.01, "seed": 3}),
                      "threshold")
    assert sum(w["migrations"] for w in tl.windows) > 0
    assert max(w["imbalance"] for w in tl.windows[1:]) > 1.0


@pytest.mark.parametrize("scenario_doc, key", [
    ({"horizon_s": 60, "window_s": 120}, "window_s"),
    ({"horizon_s": 600, "window_s": 60, "drift": "rotate"}, "drift"),
    ({"horizon_s": 600, "window_s": 60, "failures": {"events": [{"t_s": 1, "chiplet": 99}]}}, "chiplet"),
    ({"horizon_s": 600, "window_s": 60, "popularity": {"rate_per_s": float("nan")}}, "rate_per_s"),
])
def test_bad_scenario_one_line_exit_2(dse_cli, files, scenario_doc, key):
    d, s = files(scenario_doc)
    code, out, err = dse_cli("timeline", STUDY, "--design", d, "--scenario", s)
    assert code == 2 and err.count("\n") == 1 and key in err and err.startswith("error:")


def test_table_fits_and_out_folder(dse_cli, files, tmp_path):
    d, s = files({"horizon_s": 600, "window_s": 60, "popularity": ROTATE})
    out_dir = tmp_path / "tl"
    code, out, err = dse_cli("timeline", STUDY, "--design", d, "--scenario", s, "--policy", "periodic",
                             "--every", "60", "--out", out_dir)
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 80
    assert {p.name for p in out_dir.iterdir()} >= {"timeline.png", "timeline.svg", "timeline.md", "timeline.json"}
    (out_dir / "timeline.md").write_text("my notes")            # not dse's now: refused, left as it is
    code, _, err = dse_cli("timeline", STUDY, "--design", d, "--scenario", s, "--out", out_dir)
    assert code == 2 and "--out" in err and "timeline.md" in err
    assert (out_dir / "timeline.md").read_text() == "my notes"


def test_a_failed_chiplet_draws_nothing(prepared, design):
    """A segment with a chiplet down costs the evaluator's re-mapped design less the idle power the
    evaluator charges the failed chiplet, which holds no unit: its kind's idle power (at least its
    leakage, arch.power) over the step (dse.runtime.powered_off)."""
    tl = run_timeline(prepared, design, scenario(horizon_s=120, failures={"events": [{"t_s": 0, "chiplet": 4}]}))
    after = prepared.evaluator.evaluate_designs([prepared.package_evaluator.remapped(design, [4])]).iloc[0]
    t = prepared.tables
    k = t.kind_names.index(design.chiplets[4])
    off_w = max(t.kind_idle_w[k], t.kind_static_w[k])
    assert off_w > 0
    assert tl.totals["mean_latency_s"] == pytest.approx(after["latency_s"], rel=1e-12)
    expected = after["energy_j_per_token"] - off_w * after["latency_s"] / t.tokens_per_step
    assert tl.totals["energy_j_per_token"] == pytest.approx(expected, rel=1e-9)


def test_a_move_detours_around_a_link_down(prepared, design):
    """With link 0-1 down, a copy from chiplet 0 to 1 (2 x 3 mesh: 0 1 2 / 3 4 5) takes the evaluator's
    detour by minimum hops, 0 -> 3 -> 4 -> 1: each of its three links carries the bytes, and its energy is
    the two memories' plus three hops' (noc.LinkTech.hop_energy_j_per_byte) against one on the intact
    package; the time is the bytes over the slowest of the link and the two memories either way."""
    t = prepared.tables
    model = MigrationModel(t, prepared.study.hardware.package, design)
    unit = "L0-31.e1"
    b = float(t.unit_capacity_bytes[t.unit_names.index(unit)])
    down = frozenset({(0, 1)})
    assert design.hbm_stacks[0] and design.hbm_stacks[1]
    e_mem, e_hop = 2 * t.hbm.energy_j_per_byte, t.link.hop_energy_j_per_byte
    intact, detour = move_cost(model, [(unit, 1, [0])]), move_cost(model, [(unit, 1, [0])], links=down)
    assert intact.energy_j == pytest.approx(b * (e_mem + e_hop), rel=1e-12)
    assert detour.energy_j == pytest.approx(b * (e_mem + 3 * e_hop), rel=1e-12)
    bw = min(t.link.bandwidth_Bps, min(design.hbm_stacks[0], design.hbm_stacks[1]) * t.hbm_bw_Bps)
    assert intact.time_s == pytest.approx(b / bw, rel=1e-12) and detour.time_s == pytest.approx(b / bw, rel=1e-12)
    priced = model.priced(np.array([t.unit_names.index(unit)]), np.array([1]), np.array([[0]]), links=down)
    crossed = np.flatnonzero(priced.links)
    assert len(crossed) == 3 and np.allclose(priced.links[crossed], b)
