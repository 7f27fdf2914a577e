"""A decode workload whose weights outgrow HBM spills to DDR, and its latency rises: the crossover.

Through the public dse API: GPT-2 decode on one chiplet fast enough to be memory-bound once weights are
read from DDR, with HBM stacks shrunk to 0.05 GiB (a study override) so the stack count decides whether
weights and KV cache fit.
"""
from pathlib import Path

import numpy as np
import pytest
import yaml

import dse
import memory
from dse.study.space import Design

STACK_GIB = 0.05
TINY = Path(__file__).parent / "data" / "tiny.yaml"


def _prepared(capacity_gib):
    study = yaml.safe_load(TINY.read_text())
    study["hardware"]["chiplets"] = [
        {"name": "fast", "kind": "systolic", "array": [32, 256], "dataflow": "os", "sram_mb": 8, "freq_ghz": 2.0,
         "node": "7nm"}]
    study["hardware"]["memory"][0] = {"kind": "hbm3", "stacks": [1, 10], "overrides": {"capacity_gib": capacity_gib}}
    return dse.prepare(dse.Study.from_dict(study))


def _latency(prepared, stacks, ddr_channels=1):
    units = prepared.tables.unit_names
    designs = [Design(rows=1, cols=1, chiplets=["fast"], hbm_stacks=[s], ddr_channels=ddr_channels,
                      link="ucie-advanced", mapping="many-to-many", placement={u: [0] for u in units})
               for s in stacks]
    return prepared.evaluator.evaluate_designs(designs, with_faults=False)


@pytest.fixture(scope="module")
def small_hbm():
    return _prepared(STACK_GIB)


@pytest.fixture(scope="module")
def roomy_hbm():
    return _prepared(16)


def test_latency_flat_while_weights_fit_and_rising_once_they_spill(small_hbm, roomy_hbm):
    t = small_hbm.tables
    stored = t.unit_capacity_bytes.sum() + t.unit_kv_bytes.sum()
    fit = int(np.ceil(stored / (STACK_GIB * 2**30)))        # fewest stacks that hold weights and KV
    assert 3 <= fit <= 9
    stacks = list(range(1, 11))
    m = _latency(small_hbm, stacks)
    ref = _latency(roomy_hbm, stacks)                        # same bandwidth, capacity never binding
    lat = m["latency_s"].to_numpy()

    fits = np.array(stacks) >= fit
    # while everything fits, capacity costs nothing: the same latency as with roomy stacks, and flat
    assert np.allclose(lat[fits], ref["latency_s"].to_numpy()[fits], rtol=1e-12)
    assert np.ptp(lat[fits]) <= 1e-9 * lat[fits].max()
    # below the crossover every stack removed pushes more bytes to DDR: latency rises step by step
    spilled = lat[~fits][::-1]                               # from fit-1 stacks down to 1
    assert (np.diff(np.concatenate([[lat[fits][0]], spilled])) > 0).all()
    assert lat[0] > 3 * lat[fits][0]
    # the spill is to DDR, not a shortfall: one 32 GiB channel holds it
    assert (m["capacity_short_bytes"] == 0).all()


def test_latency_tracks_the_spilled_bytes_over_ddr_bandwidth(small_hbm):
    # at one stack the chiplet is bound by its DDR reads: their time is a lower bound on the latency.
    # The hottest bytes per byte stored stay in HBM (memory.place_by_density): the DDR reads follow.
    t = small_hbm.tables
    size = t.unit_capacity_bytes + t.unit_kv_bytes
    repeat = t.stage_repeat[t.unit_stage]
    read = (t.unit_weight_read + t.unit_other_dram[:, 0]) * repeat
    spill = memory.place_by_density(size, read, np.array([STACK_GIB * 2**30]))[:, 1]
    ddr_read = (read * spill).sum()
    assert 0 < ddr_read < (read * (size.sum() - STACK_GIB * 2**30) / size.sum()).sum()   # beats uniform spill
    m = _latency(small_hbm, [1])
    assert m["latency_s"][0] >= ddr_read / t.ddr_bw_Bps * (1 - 1e-9)
    assert m["latency_s"][0] == pytest.approx(ddr_read / t.ddr_bw_Bps, rel=0.25)


def test_no_ddr_to_spill_into_is_a_reported_shortfall(small_hbm):
    t = small_hbm.tables
    stored = t.unit_capacity_bytes.sum() + t.unit_kv_bytes.sum()
    m = _latency(small_hbm, [1, 2], ddr_channels=0)
    assert m["capacity_short_bytes"].tolist() == pytest.approx([stored - s * STACK_GIB * 2**30 for s in (1, 2)])
