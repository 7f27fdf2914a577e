"""The package section of a study (topology, technologies, routing) and the ``dse noc`` command."""
import json

import pytest

import dse
from dse.study import Study


def with_package(tiny_dict, package):
    d = dict(tiny_dict)
    d["hardware"] = {**tiny_dict["hardware"], "package": package}
    return d


def test_default_package_is_an_xy_mesh_with_a_bank_per_shape(tiny_dict):
    pkg = Study.from_dict(tiny_dict).hardware.package
    assert pkg.topology == "mesh" and pkg.routing_algorithm == "xy"
    bank = pkg.route_bank()
    assert list(bank.n_nodes) == [1, 2, 2, 4]
    assert bank.shape_index[2, 2] == 3


def test_torus_graph_and_per_link_technology(tiny_dict):
    torus = Study.from_dict(with_package(tiny_dict, {"topology": "torus", "mesh": {"rows": 3, "cols": 3}}))
    assert torus.hardware.package.network(3, 3).n_links == 36
    graph = Study.from_dict(with_package(tiny_dict, {
        "topology": "graph", "mesh": {"rows": 1, "cols": 3}, "link": "ucie-standard",
        "links": [{"between": [0, 1]}, {"between": [1, 2], "tech": "serdes-long-reach"}]}))
    t = graph.hardware.package.network(1, 3)
    assert graph.hardware.package.routing_algorithm == "shortest"
    assert t.link_tech[t.link_id(2, 1)] == "serdes-long-reach" and t.link_tech[t.link_id(0, 1)] == "ucie-standard"
    over = Study.from_dict(with_package(tiny_dict, {"mesh": {"rows": [1, 2], "cols": 2},
                                                    "links": [{"between": [2, 3], "tech": "ucie-standard"}]}))
    assert over.hardware.package.network(1, 2).link_tech == ("ucie-advanced",) * 2
    t22 = over.hardware.package.network(2, 2)
    assert t22.link_tech[t22.link_id(3, 2)] == "ucie-standard"


@pytest.mark.parametrize("package,key,message", [
    ({"topology": "graph", "mesh": {"rows": [1, 2], "cols": 2}, "links": [{"between": [0, 1]}]},
     "hardware.package.mesh", "fixed number of chiplets"),
    ({"topology": "graph", "mesh": {"rows": 2, "cols": 2}}, "hardware.package.links", "needs its links"),
    ({"topology": "graph", "mesh": {"rows": 2, "cols": 2}, "links": [{"between": [0, 1]}, {"between": [1, 4]}]},
     "hardware.package.links[1].between", "chiplet 4 is outside the package"),
    ({"topology": "graph", "mesh": {"rows": 2, "cols": 2}, "links": [{"between": [0, 1]}, {"between": [1, 0]}]},
     "hardware.package.links[1].between", "already linked by links[0]"),
    ({"topology": "graph", "mesh": {"rows": 2, "cols": 2}, "links": [{"between": [0, 1], "tech": "x"}]},
     "hardware.package.links[0].tech", "allowed: ucie-advanced"),
    ({"topology": "graph", "mesh": {"rows": 2, "cols": 2}, "links": [{"between": [0, 1]}], "routing": "xy"},
     "hardware.package.routing", "use 'shortest'"),
    ({"mesh": {"rows": 2, "cols": 2}, "links": [{"between": [0, 3], "tech": "ucie-standard"}]},
     "hardware.package.links[0].between", "not neighbours on the 2 x 2 mesh"),
    ({"mesh": {"rows": 2, "cols": 2}, "links": [{"between": [0, 1]}]}, "hardware.package.links[0].tech", "needs 'tech'"),
    ({"mesh": {"rows": 2, "cols": 2}, "topology": "ring"}, "hardware.package.topology", "allowed: mesh, torus, graph"),
    ({"mesh": {"rows": 2, "cols": 2}, "link": "pigeon"}, "hardware.package.link", "allowed: ucie-advanced"),
    ({"mesh": {"rows": 2, "cols": 2}, "router": "fifo"}, "hardware.package.router", "'islip' or 'ideal'"),
])
def test_bad_package_names_the_key(tiny_dict, package, key, message):
    with pytest.raises(dse.StudyError) as info:
        Study.from_dict(with_package(tiny_dict, package))
    assert info.value.key == key and message in info.value.detail


def test_dse_noc_prints_the_figures(dse_cli):
    code, out, _ = dse_cli("noc", "--rows", 4, "--cols", 4, "--router", "ideal")
    assert code == 0 and "average hops              2.500" in out and "saturation throughput     1.0000" in out
    assert "4 channels per direction" in out
    code, out, _ = dse_cli("noc", "--rows", 8, "--cols", 8, "--router-latency", 4, "--injection", 0.3, "--json",
                           "--router", "ideal")
    f = json.loads(out)
    assert f["average_hops"] == pytest.approx(2 * 63 / 24)
    assert f["zero_load_latency_cycles"] == pytest.approx(5 * 5.25 + 7)       # BookSim2's 5H + 7
    assert f["saturation_flits_per_cycle"] == pytest.approx(0.5) and f["bisection_channels"] == 8
    assert f["latency_cycles"] > f["zero_load_latency_cycles"]
    code, out, _ = dse_cli("noc", "--rows", 4, "--cols", 4, "--topology", "torus", "--traffic", "transpose", "--json")
    assert code == 0 and json.loads(out)["network"].startswith("4 x 4 torus")
    code, out, _ = dse_cli("noc", "--rows", 2, "--cols", 2, "--injection", 3, "--json")
    assert json.loads(out)["latency_cycles"] is None


@pytest.mark.parametrize("args,message", [
    (["--rows", 3, "--cols", 4, "--traffic", "transpose"], "square grid"),
    (["--rows", 0, "--cols", 4], "rows >= 1"),
    (["--rows", 2, "--cols", 2, "--injection", -1], "--injection"),
    (["--rows", 2, "--cols", 2, "--topology", "ring"], "ring"),
])
def test_dse_noc_bad_input_is_one_line_and_exit_2(dse_cli, args, message):
    code, _, err = dse_cli("noc", *args)
    assert code == 2 and message in err and "Traceback" not in err
