"""``dse noc``: figures of a mesh or torus network in cycles and flits, as BookSim2 reports them."""
from __future__ import annotations

import json

import click
import numpy as np

import noc

from ..study.schema.limits import MESH_SIDE
from .common import FiniteFloat, cli
from .output import compiles, fit

MAX_SIDE = MESH_SIDE.limit     # route tables grow with chiplets squared: the study's cap

FLIT_BYTES, FREQ_HZ = 16.0, 1e9     # internal units only: results are printed in flits and cycles
TERMINAL_CYCLES = 1                 # injection and ejection channel latency each (BookSim2: always 1)


def noc_figures(rows: int, cols: int, topology: str = "mesh", traffic: str = "uniform", injection: float = 0.1,
                router_latency: float = 2, link_latency: float = 1, packet_size: int = 1,
                routing: str = "xy", router: str = "islip") -> dict:
    """Average hops, zero-load and loaded latency, saturation and bisection of one network.

    Every channel carries one flit per cycle; a packet also pays its source router and one cycle each
    on the injection and ejection channels (BookSim2's pipeline), and queues M/D/1 at every channel,
    the injection and ejection channels included. ``router``: ``islip`` (BookSim2's input-queued VC
    router) serves every channel at eta = noc.SWITCH_EFFICIENCY_ISLIP of its bandwidth in the queues
    and the saturation bound; ``ideal`` at all of it (noc.latency).
    """
    if injection < 0:
        raise noc.NocError(f"--injection must be >= 0 flits/cycle/node, got {injection}")
    if packet_size < 1:
        raise noc.NocError(f"--packet-size must be >= 1 flit, got {packet_size}")
    eta = noc.router_efficiency(router)
    tech = noc.cycle_link(router_latency, link_latency, FLIT_BYTES, FREQ_HZ)
    t = noc.build(topology, rows, cols, tech)
    r = noc.route(t, routing)
    pattern = noc.traffic.pattern(traffic, rows, cols)
    flit_Bps = FLIT_BYTES * FREQ_HZ
    endpoint_s = (router_latency + 2 * TERMINAL_CYCLES) / FREQ_HZ
    packet = packet_size * FLIT_BYTES
    loaded = noc.loaded_latency(r, pattern * injection * flit_Bps, packet, endpoint_s, flit_Bps,
                                switch_efficiency=eta)
    sat = noc.saturation(r, pattern, flit_Bps, switch_efficiency=eta)
    bis = noc.bisection(t)
    hops = float((pattern * np.where(r.reachable, r.hops, 0)).sum() / pattern.sum())
    zero = noc.zero_load_latency_s(r, packet, endpoint_s, flit_Bps)
    latency = loaded.average_latency_s * FREQ_HZ
    return {
        "network": t.describe(), "routing": routing, "router": router, "traffic": traffic,
        "router_latency_cycles": router_latency, "link_latency_cycles": link_latency, "packet_flits": packet_size,
        "average_hops": hops,
        "zero_load_latency_cycles": float((pattern * zero).sum() / pattern.sum() * FREQ_HZ),
        "injection_flits_per_cycle": injection,
        "latency_cycles": latency if np.isfinite(latency) else None,
        "max_channel_utilisation": loaded.max_utilisation,
        "saturation_flits_per_cycle": sat.injection_Bps / flit_Bps,
        "bisection_channels": bis.links,
        "bisection_flits_per_cycle": bis.bandwidth_Bps / flit_Bps,
    }


@cli.command("noc")
@click.option("--rows", type=click.IntRange(max=MAX_SIDE), required=True,
              help=f"Rows of chiplets (at most {MAX_SIDE}, as in a study's mesh).")
@click.option("--cols", type=click.IntRange(max=MAX_SIDE), required=True,
              help=f"Columns of chiplets (at most {MAX_SIDE}).")
@click.option("--topology", type=click.Choice(["mesh", "torus"]), default="mesh", show_default=True)
@click.option("--traffic", type=click.Choice(["uniform", "transpose", "hotspot", "neighbor"]), default="uniform",
              show_default=True, help="uniform includes self-traffic, as BookSim2 and Dally & Towles.")
@click.option("--injection", type=FiniteFloat(0), default=0.1, show_default=True,
              help="Offered load, flits/cycle/node.")
@click.option("--router-latency", type=FiniteFloat(0), default=2, show_default=True, help="Cycles per router.")
@click.option("--link-latency", type=FiniteFloat(0), default=1, show_default=True, help="Cycles per channel.")
@click.option("--packet-size", type=click.IntRange(1, 1024), default=1, show_default=True, help="Flits per packet.")
@click.option("--routing", type=click.Choice(list(noc.ALGORITHMS)), default="xy", show_default=True)
@click.option("--router", type=click.Choice(list(noc.ROUTERS)), default="islip", show_default=True,
              help="islip: BookSim2's input-queued VC router (allocator losses); ideal: none.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@compiles("noc")
def noc_command(rows, cols, topology, traffic, injection, router_latency, link_latency, packet_size, routing, router,
                as_json):
    """Average hops, latency, saturation throughput and bisection of a mesh or torus.

    Latency = zero-load (hops x (router + link) + source router + injection/ejection channels +
    serialisation) plus M/D/1 queueing at every channel, each serving at the router's allocator
    efficiency (--router islip: 0.836 of a flit per cycle, BookSim2's iSLIP router; ideal: 1). Use
    --router-latency 4 for BookSim2's default router pipeline.
    """
    f = noc_figures(rows, cols, topology, traffic, injection, router_latency, link_latency, packet_size, routing,
                    router)
    if as_json:
        click.echo(json.dumps(f, indent=2))
        return
    lat = f"{f['latency_cycles']:.2f} cycles" if f["latency_cycles"] is not None else "saturated"
    for line in fit(f"{f['network']}, {routing} routing, {router} routers, {traffic} traffic, packets of "
                    f"{packet_size} flit(s)", 2):
        click.echo(line)
    click.echo(f"average hops              {f['average_hops']:.3f}")
    click.echo(f"zero-load latency         {f['zero_load_latency_cycles']:.2f} cycles")
    for line in fit(f"latency at {injection:g} flits/cycle/node  {lat} (busiest channel "
                    f"{f['max_channel_utilisation']:.0%} busy)", 26):
        click.echo(line)
    click.echo(f"saturation throughput     {f['saturation_flits_per_cycle']:.4f} flits/cycle/node")
    click.echo(f"bisection                 {f['bisection_channels']} channels per direction, "
               f"{f['bisection_flits_per_cycle']:g} flits/cycle")
