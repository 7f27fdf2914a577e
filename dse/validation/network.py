"""The package network model against BookSim2: saturation and latency of k x k meshes and tori.

BookSim2's runs (data/booksim_*.csv, copies of tests/data's with their configuration in the header:
iSLIP input-queued VC routers, 4 VCs of 8 flits, one-flit packets, Bernoulli sources, dimension-order
routing) on 4 x 4 and 8 x 8 meshes and tori under uniform and transpose traffic. The model is noc's
(docs/noc.md), set up as BookSim2 runs: 4-cycle routers, 1-cycle mesh channels (2 on the folded torus),
the source router and injection / ejection channels outside the hops, an M/D/1 queue at every network
and ejection channel, none at the Bernoulli injection channel, and the iSLIP router's allocator
efficiency (noc.SWITCH_EFFICIENCY_ISLIP, the default router of ``dse noc`` and of a study's package).

- ``saturation`` (flits/cycle/node): uniform, BookSim2's peak accepted rate; transpose, the middle of the
  two offered loads between which its packet latency passes twice its zero-load value (its accepted
  rate averaged over nodes keeps rising while the bottleneck flows fall behind). The 8 x 8 mesh under
  uniform traffic is the figure eta was fitted on (set ``calibration``); every other row is a check.
- ``latency`` (cycles): packet latency at every offered load up to 80 % of BookSim2's saturation.

``dse fidelity --suite noc`` prints its cases (`cases`).
"""
from __future__ import annotations

from functools import lru_cache

import noc
import pandas as pd

from .common import DATA, Case

TITLE = "the package network against BookSim2 (meshes, tori; uniform, transpose)"
SOURCE = "booksim2 28f4329"
ROUTER_CYCLES, FLIT_BYTES, FREQ_HZ = 4, 16.0, 1e9
FILES = ("booksim_mesh.csv", "booksim_torus.csv", "booksim_transpose.csv")
#: the figure the iSLIP allocator efficiency was fitted on
CALIBRATION = {"sat-mesh8-uniform"}


@lru_cache(maxsize=None)
def _routes(kind: str, k: int) -> noc.Routes:
    tech = noc.cycle_link(ROUTER_CYCLES, 1 if kind == "mesh" else 2, FLIT_BYTES, FREQ_HZ)
    return noc.route(noc.build(kind, k, k, tech), "xy")


def model_latency_cycles(kind: str, k: int, traffic: str, rate: float) -> float:
    flit_Bps = FLIT_BYTES * FREQ_HZ
    lat = noc.loaded_latency(_routes(kind, k), noc.traffic.pattern(traffic, k, k) * rate * flit_Bps, FLIT_BYTES,
                             endpoint_latency_s=(ROUTER_CYCLES + 2) / FREQ_HZ, terminal_bw_Bps=flit_Bps,
                             switch_efficiency=noc.router_efficiency("islip"), bernoulli_sources=True)
    return lat.average_latency_s * FREQ_HZ


def model_saturation(kind: str, k: int, traffic: str) -> float:
    flit_Bps = FLIT_BYTES * FREQ_HZ
    sat = noc.saturation(_routes(kind, k), noc.traffic.pattern(traffic, k, k), flit_Bps,
                         switch_efficiency=noc.router_efficiency("islip"))
    return sat.injection_Bps / flit_Bps


def runs() -> pd.DataFrame:
    """Every stable BookSim2 run, with its network's saturation (module docstring)."""
    frames = []
    for name in FILES:
        df = pd.read_csv(DATA / name, comment="#")
        if "traffic" not in df:
            df = df.assign(traffic="uniform")
        frames.append(df[["topology", "k", "traffic", "injection_rate", "packet_latency_cycles",
                          "accepted_flit_rate", "stable"]])
    df = pd.concat(frames, ignore_index=True)
    sat = {}
    for (kind, k, traffic), g in df.groupby(["topology", "k", "traffic"]):
        stable = g[g.stable == 1].sort_values("injection_rate")
        if traffic == "uniform":
            sat[kind, k, traffic] = stable.accepted_flit_rate.max()
        else:
            zero = stable.packet_latency_cycles.iloc[0]
            over = stable[stable.packet_latency_cycles > 2 * zero].injection_rate
            below = stable[stable.packet_latency_cycles <= 2 * zero].injection_rate.max()
            sat[kind, k, traffic] = (below + over.min()) / 2 if len(over) else below
    df = df[df.stable == 1].copy()
    df["saturation"] = [sat[key] for key in zip(df.topology, df.k, df.traffic)]
    return df


def cases() -> list[Case]:
    df = runs()
    out = []
    for (kind, k, traffic), g in df.groupby(["topology", "k", "traffic"], sort=False):
        key = f"{kind}{k}-{traffic}"
        out.append(Case(f"sat-{key}", "saturation", "flits/cycle/node", float(g.saturation.iloc[0]),
                        model_saturation(kind, k, traffic),
                        "calibration" if f"sat-{key}" in CALIBRATION else "validation", SOURCE))
        for r in g[g.injection_rate <= 0.8 * g.saturation].itertuples():
            out.append(Case(f"lat-{key}-{r.injection_rate:g}", "latency", "cycles", float(r.packet_latency_cycles),
                            model_latency_cycles(kind, k, traffic, r.injection_rate), "validation", SOURCE))
    return out
