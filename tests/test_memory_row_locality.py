"""Row locality: scattered 64 B reads against streams, the same model for every memory kind (issue 34, item 5).

Ramulator2 2.1 (tests/data/memory_ramulator2.json, one rank per channel) measures a random-access case
(k = 1: every burst opens a row) and a streaming case (k = row / burst) for each standard; the model
must give both. The presets' DDR4 / DDR5 are 2-rank DIMMs, where tFAW and tRRD apply per rank: their
activations no longer bound scattered reads, but a read after one from the other rank leaves the data
bus idle for tCS (Ramulator2's nCS between sibling ranks), so scattered reads still cost.
"""
import json
from pathlib import Path

import pytest

import memory

FIXTURE = json.loads((Path(__file__).parent / "data" / "memory_ramulator2.json").read_text())
# the fixture's devices: Ramulator2's org presets with one rank (see tests/test_memory_ramulator2.py)
SAME_DEVICE = {"hbm2": {}, "hbm3": {}, "hbm4": {"banks": 32, "tRFC_ns": 450}, "ddr4": {"ranks": 1, "banks": 16},
               "ddr5": {"ranks": 1, "banks": 32}, "lpddr5": {}}


def _measured(kind, random_access):
    points = [p for p in FIXTURE["points"] if p["kind"] == kind]
    pick = min if random_access else max
    p = pick(points, key=lambda q: q["stream_cls"])
    return p["throughput_GBps"] / p["peak_GBps"]


@pytest.mark.parametrize("kind", sorted(SAME_DEVICE))
def test_random_and_streaming_reads_against_ramulator2(kind):
    spec = memory.memory_preset(kind, SAME_DEVICE[kind])
    random_hit = memory.row_hit_rate(spec, spec.burst_bytes)      # one burst per row opened
    stream_hit = memory.row_hit_rate(spec)
    assert random_hit == 0.0
    random_fraction = memory.efficiency(spec, random_hit)
    stream_fraction = memory.efficiency(spec, stream_hit)
    assert random_fraction == pytest.approx(_measured(kind, True), rel=0.05)
    assert stream_fraction == pytest.approx(_measured(kind, False), rel=0.05)
    # a row miss costs: every kind loses bandwidth on random reads, as the simulator does
    assert random_fraction < 0.7 * stream_fraction
    assert memory.bandwidth_bound(spec, random_hit) in ("activations", "command bus")


def test_scattered_ddr5_costs_against_streaming(dse_cli):
    code, out, err = dse_cli("memory", "ddr5", "--channels", "8", "--json")
    assert code == 0, err
    r = json.loads(out)
    spec = memory.memory_preset("ddr5")
    assert spec.ranks == 2
    stream, scattered = r["streaming"], r["scattered_64B"]
    assert scattered["row_hit_rate"] == 0.0
    # by hand: refresh leaves 1 - (tRFC + tRP + tRCD) / tREFI of the time; every 64 B line opens a row in
    # a random rank, half the time the other one, so a burst takes tBL + tCS / 2 on the data bus
    refresh = (spec.tRFC_s + spec.tRP_s + spec.tRCD_s) / spec.tREFI_s
    by_hand = 8 * spec.peak_bandwidth_Bps * (1 - refresh) * spec.tBL_s / (spec.tBL_s + spec.tCS_s / 2)
    assert scattered["bandwidth_Bps"] == pytest.approx(by_hand, rel=1e-9)
    assert scattered["bandwidth_Bps"] < 0.9 * stream["bandwidth_Bps"]
    assert scattered["bound"] == "rank switches" and stream["bound"] == "data bus"
    code, text, _ = dse_cli("memory", "ddr5", "--channels", "8")
    assert "scattered 64 B             250.5 GB/s" in text and "streaming                  281.7 GB/s" in text


def test_streaming_keeps_its_value():
    # streams stay in one rank for a sweep of its banks: the rank switch leaves the step model's
    # streaming bandwidth (what tables.py reads for weights) as it was: the data bus and refresh only
    for kind in memory.memory_kinds():
        spec = memory.memory_preset(kind)
        dev = memory.device(spec)
        hit = memory.row_hit_rate(spec)
        data, act, bus = memory.burst_intervals(hit, dev)
        assert data == spec.tBL_s, kind
        assert memory.efficiency(spec) == pytest.approx(
            (1 - dev.refresh_frac) * spec.tBL_s / max(data, act, bus), rel=1e-12)


@pytest.mark.parametrize("kind", ["hbm3", "lpddr5", "ddr4"])
def test_one_mechanism_for_every_kind(kind):
    # the rank switch is a per-kind timing like any other: a second rank with tCS on an HBM or LPDDR
    # channel costs its scattered reads the same way, and runs between the two cost in proportion
    base = memory.memory_preset(kind, {"ranks": 1})
    two = memory.memory_preset(kind, {"ranks": 2, "tCS_ns": 8.0})
    dev = memory.device(two)
    assert memory.run_start_fraction(0.0, dev) == 1.0
    assert memory.run_start_fraction(memory.row_hit_rate(two), dev) == pytest.approx(0.0, abs=1e-12)
    assert memory.efficiency(two) == memory.efficiency(base)
    fraction = memory.efficiency(two, 0.0)
    # tCS / 2 is long enough here to bind over the activations and the command bus
    data, act, bus = memory.burst_intervals(0.0, dev)
    assert data == pytest.approx(two.tBL_s + 4e-9) and data > max(act, bus)
    assert fraction == pytest.approx((1 - dev.refresh_frac) * two.tBL_s / data)
    runs_of_4 = memory.row_hit_rate(two, 4 * two.burst_bytes)
    assert memory.efficiency(two, 0.0) < memory.efficiency(two, runs_of_4) < memory.efficiency(two)
