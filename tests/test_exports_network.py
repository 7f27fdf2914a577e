"""BookSim2 and gem5 Garnet exports: the files parse, hold the design's mesh, and read back."""
import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from dse.exports import export_design
from dse.exports.common import load_context
from dse.exports.gem5 import topology_name
from noc.mesh import average_hops_uniform
from results_helpers import DESIGN_ID, tiny_design, tiny_results_folder


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tiny_results_folder(tmp_path_factory.mktemp("net") / "res")


def mesh_links(rows, cols):
    out = set()
    for s in range(rows * cols):
        r, c = divmod(s, cols)
        for r2, c2 in ((r, c + 1), (r, c - 1), (r + 1, c), (r - 1, c)):
            if 0 <= r2 < rows and 0 <= c2 < cols:
                out.add((s, r2 * cols + c2))
    return out


def read_anynet(path):
    """BookSim's anynet grammar: ``router R`` then ``node N`` / ``router S [latency]`` entries."""
    routers, nodes = {}, {}
    for line in path.read_text().splitlines():
        tokens = line.split()
        assert tokens[0] == "router"
        r = int(tokens[1])
        routers[r] = {}
        i = 2
        while i < len(tokens):
            kind, ident = tokens[i], int(tokens[i + 1])
            lat = 1
            if i + 2 < len(tokens) and tokens[i + 2].isdigit():
                lat = int(tokens[i + 2])
                i += 1
            if kind == "node":
                nodes[ident] = r
            else:
                routers[r][ident] = lat
            i += 2
    return routers, nodes


def read_booksim_cfg(path):
    cfg = {}
    for line in path.read_text().splitlines():
        line = line.split("//")[0].strip()
        if line:
            key, value = re.fullmatch(r"(\w+)\s*=\s*([^;]+);", line).groups()
            cfg[key] = value.strip()
    return cfg


def test_booksim_files_hold_the_mesh(folder, tmp_path):
    files = export_design(folder, DESIGN_ID, "booksim", tmp_path)
    design = tiny_design()
    routers, nodes = read_anynet(tmp_path / f"{DESIGN_ID}.anynet")
    assert nodes == {s: s for s in range(4)}
    assert {(a, b) for a, nb in routers.items() for b in nb} == mesh_links(design.rows, design.cols)
    assert {lat for nb in routers.values() for lat in nb.values()} == {2}   # 2 ns at 1 GHz
    cfg = read_booksim_cfg(tmp_path / f"{DESIGN_ID}.cfg")
    assert cfg["topology"] == "anynet" and cfg["network_file"] == f"{DESIGN_ID}.anynet"
    ctx = load_context(folder, DESIGN_ID)
    cycles = ctx.metrics["latency_s"] * 1e9
    traffic = np.loadtxt(tmp_path / "traffic_matrix.csv", delimiter=",", skiprows=1)[:, 1:]
    np.testing.assert_allclose(traffic, ctx.traffic_bytes(), rtol=1e-5)
    assert float(cfg["injection_rate"]) == pytest.approx(traffic.sum() / 256 / cycles / 4, rel=1e-5)
    assert (tmp_path / "README.md").read_text().startswith("Targets: BookSim2")
    assert {f.name for f in files} == {f"{DESIGN_ID}.anynet", f"{DESIGN_ID}.cfg", "traffic_matrix.csv",
                                       "README.md"}


class _Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def run_gem5_topology(path, n_controllers, num_cpus, mesh_rows):
    """Execute a Garnet topology file against stand-ins of gem5's m5 modules and record what it builds."""
    stubs = {"m5": types.ModuleType("m5"), "m5.objects": types.ModuleType("m5.objects"),
             "m5.params": types.ModuleType("m5.params"), "topologies": types.ModuleType("topologies"),
             "topologies.BaseTopology": types.ModuleType("topologies.BaseTopology")}
    stubs["topologies.BaseTopology"].SimpleTopology = type("SimpleTopology", (), {})
    saved = {k: sys.modules.get(k) for k in stubs}
    sys.modules.update(stubs)
    try:
        namespace = {}
        exec(compile(path.read_text(), str(path), "exec"), namespace)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    topo = namespace[path.stem]([_Obj(id=i) for i in range(n_controllers)])
    network = _Obj()
    topo.makeTopology(_Obj(num_cpus=num_cpus, mesh_rows=mesh_rows), network, lambda **kw: _Obj(**kw),
                      lambda **kw: _Obj(**kw), lambda **kw: _Obj(**kw))
    return network, namespace


def test_gem5_topology_builds_the_mesh_with_xy_weights(folder, tmp_path):
    files = export_design(folder, DESIGN_ID, "gem5", tmp_path)
    design = tiny_design()
    name = topology_name(DESIGN_ID)
    network, ns = run_gem5_topology(tmp_path / f"{name}.py", 8, 4, design.rows)
    assert ns["CHIPLETS"] == design.chiplets and (ns["ROWS"], ns["COLS"]) == (design.rows, design.cols)
    assert [r.router_id for r in network.routers] == [0, 1, 2, 3]
    assert all(r.latency == 2 for r in network.routers)
    links = {(lk.src_node.router_id, lk.dst_node.router_id): lk for lk in network.int_links}
    assert set(links) == mesh_links(design.rows, design.cols)
    for (a, b), lk in links.items():
        horizontal = a // design.cols == b // design.cols
        assert lk.weight == (1 if horizontal else 2)
        assert lk.latency == 2
        assert {lk.src_outport, lk.dst_inport} == ({"East", "West"} if horizontal else {"North", "South"})
    assert len({lk.link_id for lk in network.int_links + network.ext_links}) == 8 + 8      # unique ids
    assert [e.int_node.router_id for e in network.ext_links] == [0, 1, 2, 3, 0, 1, 2, 3]
    with pytest.raises(AssertionError, match="num-cpus=4"):
        run_gem5_topology(tmp_path / f"{name}.py", 8, 9, 3)
    cmd = (tmp_path / "command.txt").read_text()
    assert f"--topology={name}" in cmd and "--num-cpus=4" in cmd and "--mesh-rows=2" in cmd
    assert "--link-width-bits=2048" in cmd and "garnet_synth_traffic.py" in cmd
    rate, digits = re.search(r"--injectionrate=([0-9.]+) --precision=(\d+)", cmd).groups()
    assert float(rate) > 0 and len(rate.split(".")[1]) == int(digits)
    assert (tmp_path / "README.md").read_text().startswith("Targets: gem5 Garnet")
    assert len(files) == 3


BOOKSIM = Path(__file__).parent / "data" / "peers" / "booksim_tiny_2x2"


def booksim_stat(path, name):
    return float(re.search(rf"{name} = ([0-9.e+-]+)", path.read_text()).group(1))


def test_booksim_routes_the_exported_mesh_minimally():
    """BookSim2 (PROVENANCE.md) ran the exported 2 x 2 anynet under uniform traffic at 0.1 flits/node/cycle.
    It counts routers passed (XY hops + 1); Dally & Towles' mean over all pairs including self is
    2(k^2 - 1)/(3k) = 1 for k = 2 (noc.mesh.average_hops_uniform)."""
    hops = booksim_stat(BOOKSIM / "booksim_load01.txt", "Hops average") - 1
    assert hops == pytest.approx(average_hops_uniform(2, 2, include_self=True), abs=0.02)
    # far below saturation every injected flit is accepted
    injected = booksim_stat(BOOKSIM / "booksim_load01.txt", "Injected flit rate average")
    assert booksim_stat(BOOKSIM / "booksim_load01.txt", "Accepted flit rate average") == pytest.approx(injected,
                                                                                                         rel=0.02)
    assert injected == pytest.approx(0.1, rel=0.1)
    # the anynet it ran is the one the exporter writes for this design
    routers, nodes = read_anynet(BOOKSIM / "dtiny.anynet")
    assert {(a, b) for a, nb in routers.items() for b in nb} == mesh_links(2, 2)
    assert booksim_stat(BOOKSIM / "booksim_design_rate.txt", "Packet latency average") > 0


def test_torus_package_exports_its_wrap_links(tmp_path, tiny_dict):
    """On a 1 x 3 torus the chiplets at both ends are linked: BookSim gets the wrap channel, traffic
    between them takes it, and the direction-based RapidChiplet export says it needs a mesh."""
    import yaml as _yaml

    import dse
    from dse.errors import StudyError
    from dse.model.traffic import link_loads

    tiny_dict["hardware"]["package"].update(topology="torus", mesh={"rows": [1, 1], "cols": [3, 3]})
    study = dse.Study.from_dict(tiny_dict)
    folder = tmp_path / "res"
    (folder / "designs").mkdir(parents=True)
    (folder / "study.yaml").write_text(_yaml.safe_dump(study.resolved()))
    design = {"rows": 1, "cols": 3, "chiplets": ["big", "small", "big"], "hbm_stacks": [1, 1, 0], "ddr_channels": 2,
              "link": "ucie-advanced", "mapping": "many-to-many",
              "placement": {"embed": [0], "L0-11.attn": [2], "L0-11.ffn": [1], "lm_head": [0]}}
    (folder / "designs" / "dt.yaml").write_text(_yaml.safe_dump(design))
    export_design(folder, "dt", "booksim", tmp_path / "bs")
    routers, _ = read_anynet(tmp_path / "bs" / "dt.anynet")
    assert 2 in routers[0] and 0 in routers[2]
    d = dse.read_design(folder / "designs" / "dt.yaml")
    traffic = np.zeros((3, 3))
    traffic[0, 2] = 10.0
    loads = link_loads(d, traffic, study.hardware.package).set_index(["src_slot", "dst_slot"])["bytes_per_step"]
    assert loads[(0, 2)] == 10.0 and loads.sum() == 10.0
    with pytest.raises(StudyError, match="mesh"):
        export_design(folder, "dt", "rapidchiplet", tmp_path / "rc")
