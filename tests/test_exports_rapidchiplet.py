"""RapidChiplet export: files RapidChiplet reads, a round trip, and figures RapidChiplet computed."""
import math

import numpy as np
import pytest

from arch.area_cost import dies_per_wafer_nb, negative_binomial_yield
from dse.exports import export_design
from dse.model.prepare import prepare
from dse.study.space import Design
from dse.study import load_study
from dse.model.traffic import chiplet_traffic
from noc.mesh import xy_hops, xy_link_loads
from results_helpers import DATA, DESIGN_ID, read_json, tiny_design, tiny_results_folder

PEER = DATA / "peers" / "rapidchiplet_tiny_2x2"


def read_rapidchiplet(folder) -> tuple[Design, dict]:
    """A Design back from a RapidChiplet file set (geometry, chiplet types and the chiplet_dse keys)."""
    design = read_json(folder / "design.json")
    files = {k: read_json(folder / v) for k, v in design.items()
             if isinstance(v, str) and v.endswith(".json")}
    placed = files["placement"]["chiplets"]
    xs = sorted({round(c["position"]["x"], 6) for c in placed})
    ys = sorted({round(c["position"]["y"], 6) for c in placed})
    order = sorted(range(len(placed)), key=lambda i: (placed[i]["position"]["y"], placed[i]["position"]["x"]))
    assert order == list(range(len(placed))), "chiplets are listed row-major"
    types = files["chiplets"]
    units: dict[str, list[int]] = {}
    for s, c in enumerate(placed):
        for u in c["chiplet_dse"]["units"]:
            units.setdefault(u, []).append(s)
    meta = design["chiplet_dse"]
    d = Design(rows=len(ys), cols=len(xs), chiplets=[types[c["name"]]["chiplet_dse"]["kind"] for c in placed],
               hbm_stacks=[types[c["name"]]["chiplet_dse"]["hbm_stacks"] for c in placed],
               ddr_channels=meta["ddr_channels"], link=meta["link"], mapping=meta["mapping"], placement=units)
    return d, files


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("rc")
    folder = tiny_results_folder(root / "res")
    files = export_design(folder, DESIGN_ID, "rapidchiplet", root / "out")
    return root / "out", files


def test_round_trip_reproduces_the_design(exported):
    out, files = exported
    assert {f.name for f in files} >= {"design.json", "chiplets.json", "placement.json", "topology.json",
                                      "technologies.json", "packaging.json", "routing_table.json",
                                      "traffic_by_chiplet.json", "traffic_by_unit.json", "README.md"}
    design, _ = read_rapidchiplet(out)
    original = tiny_design()
    assert design.rows == original.rows and design.cols == original.cols
    assert design == Design(**{**original.__dict__, "placement": {u: sorted(s) for u, s in
                                                                  original.placement.items()}})
    assert (out / "README.md").read_text().startswith("Targets: RapidChiplet")


def test_files_hold_what_the_design_says(exported):
    out, _ = exported
    design, files = read_rapidchiplet(out)
    n, cols = 4, 2
    # every mesh neighbour pair is linked once, PHY east->west or north->south
    links = {(lk["ep1"]["outer_id"], lk["ep2"]["outer_id"]) for lk in files["topology"]}
    assert links == {(0, 1), (2, 3), (0, 2), (1, 3)}
    # the routing table walks XY routes, one hop per step
    table = files["routing_table"]["table"]
    for i in range(n):
        for j in range(n):
            node, hops = ("chiplet", i), 0
            while node != ("chiplet", j):
                nxt = table[node][("chiplet", j)]
                assert (min(node[1], nxt[1]), max(node[1], nxt[1])) in links
                node, hops = nxt, hops + 1
            assert hops == xy_hops(i, j, cols)
    # traffic is the design's chiplet traffic in bits per network cycle
    study = load_study(DATA / "tiny.yaml")
    p = prepare(study)
    latency = p.evaluator.evaluate_designs([design])["latency_s"].iloc[0]
    expected = chiplet_traffic(design, p.tables) * 8 / (latency * 1e9)
    got = np.zeros((n, n))
    for (i, j), v in files["traffic_by_chiplet"].items():
        got[i, j] = v
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    # die areas are the study's: compute die + HBM PHYs
    area = sum(files["chiplets"][c["name"]]["dimensions"]["x"] ** 2 for c in files["placement"]["chiplets"])
    ddr_phy = p.package_evaluator.kernel.ddr_phy * design.ddr_channels
    assert area == pytest.approx(p.evaluator.evaluate_designs([design])["area_mm2"].iloc[0] - ddr_phy)


@pytest.fixture(scope="module")
def peer():
    """Files exported for tests/data/exports/tiny_2x2.yaml and RapidChiplet's results on them
    (PROVENANCE.md there: commit 66e63e5 of spcl/rapidchiplet)."""
    _, files = read_rapidchiplet(PEER)
    return files, read_json(PEER / "rapidchiplet_results.json")


def test_rapidchiplet_area_and_power_are_the_sums_of_ours(peer):
    files, rc = peer
    placed = files["placement"]["chiplets"]
    chiplets = files["chiplets"]
    assert rc["area_summary"]["total_chiplet_area"] == pytest.approx(
        sum(chiplets[c["name"]]["chiplet_dse"]["area_mm2"] for c in placed), rel=1e-9)
    assert rc["power_summary"]["total_chiplet_power"] == pytest.approx(
        sum(chiplets[c["name"]]["power"] for c in placed), rel=1e-12)
    # link width: the study's 256 GB/s per direction at the 1 GHz network clock = 2048 bits per cycle
    assert rc["link_summary"]["bandwidths"]["min"] == rc["link_summary"]["bandwidths"]["max"] == 2048


def test_rapidchiplet_cost_matches_our_yield_model_at_alpha_one(peer):
    """RapidChiplet: cost = wafer cost / (floor(gross dies per wafer) x 1/(1 + D A)), no scribe lane or
    edge loss. Our gross-die count with those set to 0 (arch.area_cost.dies_per_wafer_nb) and our negative
    binomial yield at alpha = 1 are the same model, so both must agree per die type."""
    files, rc = peer
    for name, c in files["chiplets"].items():
        tech = files["technologies"][c["technology"]]
        area = c["dimensions"]["x"] * c["dimensions"]["y"]
        dies = math.floor(dies_per_wafer_nb(area, 2 * tech["wafer_radius"], 0.0, 0.0))
        good = dies * negative_binomial_yield(area, tech["defect_density"] * 100, 1.0)
        assert rc["cost"]["chiplets"][name]["dies_per_wafer"] == dies
        assert rc["cost"]["chiplets"][name]["cost"] == pytest.approx(tech["wafer_cost"] / good, rel=1e-9)


def test_rapidchiplet_latency_is_our_hop_model(peer):
    """Zero-load: RapidChiplet charges 4 cycles per hop (PHY + router + PHY, link 0) plus 5 at the ends;
    our model charges hop latency (2 ns link + 2 router cycles = 4 cycles at 1 GHz) per XY hop."""
    files, rc = peer
    traffic = files["traffic_by_chiplet"]
    cols = read_json(PEER / "design.json")["chiplet_dse"]["cols"]
    hops = {k: xy_hops(k[0], k[1], cols) for k in traffic}
    mean_hops = sum(traffic[k] * hops[k] for k in traffic) / sum(traffic.values())
    assert rc["latency"]["avg"] == pytest.approx(4 * mean_hops + 5, rel=1e-12)
    assert rc["latency"]["min"] == 4 * min(hops.values()) + 5 and rc["latency"]["max"] == 4 * max(hops.values()) + 5


def test_rapidchiplet_throughput_is_our_busiest_link(peer):
    """RapidChiplet's saturation throughput = offered load x link width / busiest link load; our XY link
    loads (noc.mesh.xy_link_loads) on the same traffic must give the same figure."""
    files, rc = peer
    n = len(files["placement"]["chiplets"])
    cols = read_json(PEER / "design.json")["chiplet_dse"]["cols"]
    traffic = np.zeros((n, n))
    for (i, j), v in files["traffic_by_chiplet"].items():
        traffic[i, j] = v
    busiest = xy_link_loads(traffic, cols).max()
    assert rc["throughput"]["aggregate_throughput"] == pytest.approx(2048 * traffic.sum() / busiest, rel=1e-9)
    assert math.isfinite(rc["throughput"]["aggregate_throughput"])
