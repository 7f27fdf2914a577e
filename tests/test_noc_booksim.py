"""Latency versus injection rate against BookSim2 runs (tests/data/booksim_*.csv, configuration inside).

The model: BookSim2's router pipeline as 4 cycles per router (routing, VC allocation, switch allocation,
switch traversal), mesh channels of 1 cycle (torus: 2, its folded layout), injection and ejection
channels of 1 cycle plus the source router outside the hops, one flit per packet, and an M/D/1 queue
at every channel including the injection and ejection channels. Below 80% of the saturation BookSim2
reaches, the model must stay within 10%.
"""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import noc

DATA = Path(__file__).parent / "data"
ROUTER_CYCLES, FLIT_BYTES, FREQ_HZ = 4, 16.0, 1e9


def model_latency_cycles(kind: str, k: int, rate: float) -> tuple[float, float]:
    link_cycles = 1 if kind == "mesh" else 2
    tech = noc.cycle_link(ROUTER_CYCLES, link_cycles, FLIT_BYTES, FREQ_HZ)
    t = noc.build(kind, k, k, tech)
    r = noc.route(t, "xy")
    flit_Bps = FLIT_BYTES * FREQ_HZ
    lat = noc.loaded_latency(r, noc.traffic.uniform(k * k) * rate * flit_Bps, FLIT_BYTES,
                             endpoint_latency_s=(ROUTER_CYCLES + 2) / FREQ_HZ, terminal_bw_Bps=flit_Bps)
    return lat.average_latency_s * FREQ_HZ, lat.zero_load_average_s * FREQ_HZ


def fixture(name: str) -> pd.DataFrame:
    df = pd.read_csv(DATA / name, comment="#")
    stable = df[df.stable == 1]
    saturation = stable.groupby("k").accepted_flit_rate.max()
    return stable.assign(saturation=stable.k.map(saturation))


@pytest.mark.parametrize("name", ["booksim_mesh.csv", "booksim_torus.csv"])
def test_latency_within_10_percent_below_80_percent_of_saturation(name):
    df = fixture(name)
    checked = df[df.injection_rate <= 0.8 * df.saturation]
    assert set(checked.k) == {4, 8} and len(checked) >= 6
    for row in checked.itertuples():
        model, _ = model_latency_cycles(row.topology, row.k, row.injection_rate)
        err = (model - row.packet_latency_cycles) / row.packet_latency_cycles
        assert abs(err) <= 0.10, (row.topology, row.k, row.injection_rate, model, row.packet_latency_cycles)


def test_zero_load_latency_and_hops_match_booksim_at_light_load():
    df = fixture("booksim_mesh.csv")
    for k in (4, 8):
        light = df[(df.k == k) & (df.injection_rate <= 0.05)]
        _, zero = model_latency_cycles("mesh", k, 1e-9)
        assert zero == pytest.approx(light.packet_latency_cycles.mean(), rel=0.02)
        # BookSim counts routers visited: channels + 1
        assert noc.average_hops_uniform(k, k) + 1 == pytest.approx(light.booksim_hops.mean(), rel=0.02)


def test_textbook_bound_is_above_what_booksim_reaches():
    df = fixture("booksim_mesh.csv")
    for k, sat in df.groupby("k").saturation.first().items():
        t = noc.mesh(k, k, noc.cycle_link(ROUTER_CYCLES, 1, FLIT_BYTES, FREQ_HZ))
        bound = noc.saturation(noc.route(t), noc.traffic.uniform(k * k)).injection_Bps / (FLIT_BYTES * FREQ_HZ)
        assert bound == pytest.approx(4 / k)
        assert 0.7 * bound < sat < bound
    model, _ = model_latency_cycles("mesh", 8, 0.55)
    assert np.isinf(model)          # beyond 4b/k every channel queue of the bisection is unstable
