"""Export a design's package network to gem5 Garnet: a topology file and the garnet_synth_traffic.py
command line for its mesh.

* ``<Name>.py`` (copy it into gem5's configs/topologies/): a ``SimpleTopology`` subclass with one
  router per chiplet (latency = the router's cycles) and, between mesh neighbours, a Garnet ``IntLink``
  each way with the link's latency in cycles; east-west links get routing weight 1 and north-south
  links weight 2, so Garnet's table routing takes X first (the XY routing the evaluator assumes);
  controllers are spread over the routers as gem5's Mesh_XY does;
* ``command.txt``: the ``garnet_synth_traffic.py`` run: one CPU and one directory per chiplet, link
  width = the link's bytes per network cycle, the network clock, and as injection rate the design's
  mean load over one step in packets per node per cycle (one-flit packets on vnet 0), with enough
  decimal places to hold it. Garnet's synthetic ``uniform_random`` pattern stands in for the design's
  own traffic.
"""
from __future__ import annotations

import math
from pathlib import Path

from .booksim import injection_rate
from .common import ExportContext, write_readme

TOOL = "gem5 Garnet"
TARGET = ("v23.0 or newer (Garnet 3.0 topology API with src_outport/dst_inport and per-router latency; "
          "configs/example/garnet_synth_traffic.py with the Garnet_standalone protocol)")

TEMPLATE = '''# gem5 Garnet topology of chiplet-dse design {design_id} (study {study}): {rows} x {cols} chiplets.
# Copy into gem5/configs/topologies/ and run with --topology={name} (see command.txt).
from m5.objects import *
from m5.params import *

from topologies.BaseTopology import SimpleTopology

ROWS = {rows}
COLS = {cols}
CHIPLETS = {chiplets!r}
ROUTER_LATENCY = {router_latency}     # cycles
LINK_LATENCY = {link_latency}       # cycles, PHY to PHY


class {name}(SimpleTopology):
    description = "{name}"

    def __init__(self, controllers):
        self.nodes = controllers

    def makeTopology(self, options, network, IntLink, ExtLink, Router):
        n = ROWS * COLS
        assert options.num_cpus == n, "run with --num-cpus={{}} (one per chiplet)".format(n)
        routers = [Router(router_id=i, latency=ROUTER_LATENCY) for i in range(n)]
        network.routers = routers
        per_router, remainder = divmod(len(self.nodes), n)
        ext_links = []
        for i, node in enumerate(self.nodes):
            router = routers[i % n] if i < len(self.nodes) - remainder else routers[0]
            ext_links.append(ExtLink(link_id=len(ext_links), ext_node=node, int_node=router,
                                     latency=LINK_LATENCY))
        network.ext_links = ext_links
        link_id = len(ext_links)
        int_links = []
        # (d_row, d_col, out port, in port, weight): X before Y through the weights
        for d_row, d_col, out_port, in_port, weight in ((0, 1, "East", "West", 1), (0, -1, "West", "East", 1),
                                                        (1, 0, "North", "South", 2), (-1, 0, "South", "North", 2)):
            for row in range(ROWS):
                for col in range(COLS):
                    r2, c2 = row + d_row, col + d_col
                    if 0 <= r2 < ROWS and 0 <= c2 < COLS:
                        int_links.append(IntLink(link_id=link_id, src_node=routers[row * COLS + col],
                                                 dst_node=routers[r2 * COLS + c2], src_outport=out_port,
                                                 dst_inport=in_port, latency=LINK_LATENCY, weight=weight))
                        link_id += 1
        network.int_links = int_links
'''


def topology_name(design_id: str) -> str:
    return "ChipletMesh_" + "".join(ch if ch.isalnum() else "_" for ch in design_id)


def command(ctx: ExportContext, name: str) -> str:
    rate = injection_rate(ctx)
    digits = max(3, math.ceil(-math.log10(rate)) + 3) if rate > 0 else 3
    return (f"./build/NULL/gem5.opt configs/example/garnet_synth_traffic.py --network=garnet "
            f"--topology={name} --num-cpus={ctx.n} --num-dirs={ctx.n} --mesh-rows={ctx.design.rows} "
            f"--router-latency={ctx.router_cycles} --link-latency={ctx.link_cycles} "
            f"--link-width-bits={int(8 * ctx.link_bytes_per_cycle)} --ruby-clock={ctx.noc_freq_hz / 1e9:g}GHz "
            f"--synthetic=uniform_random --inj-vnet=0 --injectionrate={rate:.{digits}f} --precision={digits} "
            f"--sim-cycles=100000")


def export(ctx: ExportContext, out: Path) -> list[Path]:
    ctx.require_grid("gem5 Garnet")
    d = ctx.design
    name = topology_name(ctx.design_id)
    topo = out / f"{name}.py"
    topo.write_text(TEMPLATE.format(design_id=ctx.design_id, study=ctx.study.name, rows=d.rows, cols=d.cols,
                                    chiplets=list(d.chiplets), name=name, router_latency=ctx.router_cycles,
                                    link_latency=ctx.link_cycles))
    cmd = command(ctx, name)
    cmd_file = out / "command.txt"
    cmd_file.write_text(cmd + "\n")
    readme = write_readme(out, TOOL, TARGET, [
        f"Design `{ctx.design_id}` of study `{ctx.study.name}`. Build gem5 with "
        "`scons build/NULL/gem5.opt PROTOCOL=Garnet_standalone`, copy "
        f"`{topo.name}` into `configs/topologies/`, then from the gem5 folder:", "", f"    {cmd}", "",
        "The injection rate is the design's mean load over one step (packets of one flit per node per cycle); "
        "raise it to find where the mesh saturates. Network statistics land in m5out/stats.txt."])
    return [topo, cmd_file, readme]
