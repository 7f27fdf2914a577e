"""Export a design's package network to BookSim2: an ``anynet`` topology file and a config.

* ``<id>.anynet``: one line per chiplet router, ``router r node r router s <latency> ...``: each router
  has one node (the chiplet) and a channel along every link of the package network (mesh, torus or
  graph) whose latency is that link's PHY-to-PHY latency in network cycles (its technology);
* ``<id>.cfg``: anynet with minimal routing (BookSim's anynet builds shortest-path tables; on a mesh
  every XY route is a shortest path), one-flit packets of the link width, and as ``injection_rate`` the
  design's mean injection in flits per node per cycle over one step (dse.model.traffic); BookSim's synthetic
  ``uniform`` pattern stands in for the design's own traffic, which ``traffic_matrix.csv`` lists;
* ``traffic_matrix.csv``: bytes per step from chiplet i (row) to chiplet j (column).
"""
from __future__ import annotations

from pathlib import Path

from .common import ExportContext, write_readme

TOOL = "BookSim2"
TARGET = "(github booksim/booksim2 master, commit 28f4329 of June 2017; anynet topology)"


def injection_rate(ctx: ExportContext) -> float:
    """Mean flits injected per node per network cycle over one step (flit = one link-width transfer)."""
    cycles = float(ctx.metrics["latency_s"]) * ctx.noc_freq_hz
    return float(ctx.traffic_bytes().sum()) / ctx.link_bytes_per_cycle / cycles / ctx.n


def export(ctx: ExportContext, out: Path) -> list[Path]:
    d = ctx.design
    topology, _ = ctx.network()
    links = [(a, b, ctx.cycles(lat)) for a, b, lat in zip(topology.link_src.tolist(), topology.link_dst.tolist(),
                                                          topology.link_latency_s.tolist())]
    lines = [f"router {s} node {s} " + " ".join(f"router {b} {lat}" for a, b, lat in links if a == s)
             for s in range(ctx.n)]
    topo = out / f"{ctx.design_id}.anynet"
    topo.write_text("\n".join(lines) + "\n")
    rate = injection_rate(ctx)
    cfg = out / f"{ctx.design_id}.cfg"
    cfg.write_text("\n".join([
        f"// chiplet-dse design {ctx.design_id} of study {ctx.study.name}: {d.rows} x {d.cols} chiplets",
        f"// one flit = {ctx.link_bytes_per_cycle:g} bytes (link bandwidth per network cycle)",
        "topology = anynet;", f"network_file = {topo.name};", "routing_function = min;",
        "traffic = uniform;", "packet_size = 1;", "injection_rate_uses_flits = 1;",
        f"injection_rate = {rate:.6g};", "num_vcs = 4;", "vc_buf_size = 8;",
        f"routing_delay = 0;", "vc_alloc_delay = 1;", "sw_alloc_delay = 1;",
        f"st_final_delay = {max(1, ctx.router_cycles - 1)};", "sim_type = latency;", ""]))
    traffic = ctx.traffic_bytes()
    matrix = out / "traffic_matrix.csv"
    matrix.write_text("src\\dst," + ",".join(map(str, range(ctx.n))) + "\n" + "".join(
        f"{i}," + ",".join(f"{v:.6g}" for v in traffic[i]) + "\n" for i in range(ctx.n)))
    readme = write_readme(out, TOOL, TARGET, [
        f"Design `{ctx.design_id}` of study `{ctx.study.name}`. Build BookSim2 (`make` in src/), then from this "
        "folder:", "", f"    PATH/TO/booksim2/src/booksim {cfg.name}", "",
        f"`injection_rate` ({rate:.3g} flits/node/cycle) is the design's mean load over one step; raise it to "
        "find the saturation point. BookSim's exit status is inverted; read its stdout "
        "(\"Overall average packet latency\")."])
    return [topo, cfg, matrix, readme]
