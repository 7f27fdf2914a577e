"""Cold experts in host DRAM or on SSD, fetched into HBM on a miss (memory.offload, dse.model.offload):
the fetch time by hand over PCIe and from the drives, a published per-expert transfer time, and designs
without these tiers (or that do not reach them) unchanged bit for bit."""
import numpy as np
import pytest
import yaml

import dse
from dse.errors import StudyError
from memory.offload import fetch_time_s, link_Bps, offload_tiers
from memory.storage import ssd_preset

GIB = 2 ** 30
#: one Mixtral-8x7B expert of one layer in bf16: gate, up and down projections of 4096 x 14336
MIXTRAL_EXPERT_BYTES = 3 * 4096 * 14336 * 2
FAILURE_COLUMNS = ("fault_tolerance_frac", "worst_retained_frac", "all_served_frac", "mc_retained_frac",
                   "mc_survival_frac")


def _study(capacity_gib: float, tiers: list) -> dse.Study:
    """Mixtral-8x7B decode of one sequence (uniform routing) on one systolic chiplet whose HBM holds
    ``capacity_gib``; no DDR; ``tiers`` below it."""
    return dse.Study.from_dict({
        "name": "offload",
        "workload": {"model": "mixtral-8x7b", "phase": "decode", "batch": 1, "context": 512, "precision": "bf16",
                     "routing": {"distribution": "uniform"}},
        "hardware": {
            "chiplets": [{"name": "sa", "kind": "systolic", "array": [128, 128], "dataflow": "ws", "sram_mb": 32,
                          "freq_ghz": 1.0, "node": "5nm"}],
            "memory": [{"kind": "hbm3", "stacks": [4, 4], "overrides": {"capacity_gib": capacity_gib / 4}}] + tiers,
            "package": {"mesh": {"rows": [1, 1], "cols": [1, 1]}, "link": "ucie-advanced"}},
        "mapping": {"kind": "many-to-many", "max_replicas": 1},
        "search": {"objectives": ["latency", "energy"], "algorithm": "nsga2", "population": 4, "generations": 1,
                   "seed": 1}})


def _metrics(study: dse.Study):
    prepared = dse.prepare(study)
    design = prepared.space.seeds[:1]
    return prepared, prepared.evaluator.metrics_array(design)[0], list(prepared.evaluator.columns)


def test_pcie_and_ssd_rates_by_hand():
    # PCIe 5.0 x16: 32 GT/s x 16 lanes x 128/130 / 8 = 63.0 GB/s, x 256 / 282 (TLP overhead) = 57.2 GB/s
    assert link_Bps("pcie5-x16") == pytest.approx(32e9 * 16 * 128 / 130 / 8 * 256 / 282, rel=1e-12)
    assert link_Bps("pcie5-x16") / 1e9 == pytest.approx(57.2, abs=0.05)
    # host and SSD bytes share the link; the SSD's also stream from the drive (PM1743: 13 GB/s)
    assert fetch_time_s(57.2e9, 0.0, 57.2e9, 13e9) == pytest.approx(1.0)
    assert fetch_time_s(0.0, 13e9, 57.2e9, 13e9) == pytest.approx(1.0)
    assert ssd_preset("pm1743").seq_read_Bps == 13e9
    assert offload_tiers(ssd="pm1743", drives=2).ssd_read_Bps == 26e9


def test_a_mixtral_expert_over_pcie_takes_about_10_ms():
    """BuddyMoE (arXiv:2511.10054, 2025, abstract): moving a Mixtral-8x7B expert across PCIe takes
    "about 10 ms" (the PCIe generation is not given; PCIe 4.0 x16 here): within 25 %."""
    ms = MIXTRAL_EXPERT_BYTES / link_Bps("pcie4-x16") * 1e3
    assert ms == pytest.approx(10.0, rel=0.25)            # 12.3 ms


@pytest.fixture(scope="module")
def resident():
    return _metrics(_study(200.0, []))


def _spilled_read_bytes(prepared, capacity_gib: float) -> float:
    """Bytes per step read from what HBM cannot hold, by hand: the least read per byte stored spill first:
    the embedding table (32,000 x 4,096 in bf16, of which the one token reads one row), then the experts
    (each selected with probability 2/8 by the one token: a quarter of their bytes read a step); the
    attention, router and LM head are read whole every step and stay."""
    t = prepared.package_evaluator.tables
    stored = float((t.unit_capacity_bytes + t.unit_kv_bytes).sum())
    embedding, row = 32000 * 4096 * 2, 4096 * 2
    return (stored - capacity_gib * GIB - embedding) * 0.25 + row


@pytest.mark.parametrize("tier, rate", [({"kind": "host", "capacity_gib": 128}, link_Bps("pcie5-x16")),
                                        ({"kind": "ssd", "ssd": "pm1743", "drives": 1}, 13e9)])
def test_fetch_time_on_the_critical_path_by_hand(resident, tier, rate):
    prepared, base, columns = resident
    capacity = 60.0
    spilled = _spilled_read_bytes(prepared, capacity)
    assert spilled > 0
    _, offloaded, _ = _metrics(_study(capacity, [tier]))
    latency = columns.index("latency_s")
    assert offloaded[latency] - base[latency] == pytest.approx(spilled / rate, rel=1e-6)
    assert offloaded[columns.index("capacity_short_bytes")] == 0.0


def test_without_reaching_the_tiers_nothing_changes(resident):
    _, base, _ = resident
    _, with_tiers, _ = _metrics(_study(200.0, [{"kind": "host", "capacity_gib": 64},
                                               {"kind": "ssd", "ssd": "pm1743", "drives": 2}]))
    np.testing.assert_array_equal(base, with_tiers)


def test_quickstart_unchanged_by_tiers_it_does_not_reach():
    """The quickstart's designs whose HBM and DDR hold everything evaluate bit for bit the same with host and
    SSD tiers added; their failure columns to the last bits (with tiers every failure is evaluated in full,
    not by deltas); the others gain no shortfall."""
    data = yaml.safe_load(open("studies/quickstart.yaml"))
    data["faults"] = {"monte_carlo": {"samples": 4, "failures": 2, "seed": 3}}
    plain = dse.prepare(dse.Study.from_dict(data))
    data["hardware"]["memory"] += [{"kind": "host", "capacity_gib": 64}, {"kind": "ssd", "drives": 1}]
    tiered = dse.prepare(dse.Study.from_dict(data))
    X = np.random.default_rng(5).integers(plain.space.lower, plain.space.upper + 1, size=(60, plain.space.n_var))
    a, b = plain.evaluator.metrics_array(X), tiered.evaluator.metrics_array(X)
    short = list(plain.evaluator.columns).index("capacity_short_bytes")
    fits = a[:, short] == 0
    assert fits.sum() > 10
    failure = [list(plain.evaluator.columns).index(c) for c in FAILURE_COLUMNS]
    intact = [i for i in range(a.shape[1]) if i not in failure]
    np.testing.assert_array_equal(a[fits][:, intact], b[fits][:, intact])
    np.testing.assert_allclose(a[fits][:, failure], b[fits][:, failure], rtol=1e-12)
    assert (b[:, short] <= a[:, short]).all()


def test_study_round_trip_and_bad_tiers():
    study = _study(60.0, [{"kind": "host", "capacity_gib": 128}])
    assert [m["kind"] for m in study.resolved()["hardware"]["memory"]] == ["hbm3", "host"]
    assert dse.Study.from_dict(study.resolved()).hardware.tiers == study.hardware.tiers
    for bad, word in (({"kind": "host"}, "capacity_gib"), ({"kind": "host", "capacity_gib": 8, "drives": 2}, "drives"),
                      ({"kind": "ssd", "ssd": "nope"}, "pm1743"), ({"kind": "ssd", "link": "pcie9-x16"}, "pcie5-x16"),
                      ({"kind": "ssd", "speed": 3}, "unknown key 'speed'")):
        with pytest.raises(StudyError, match=r"hardware\.memory\[1\]") as err:
            _study(60.0, [bad])
        assert word in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(StudyError, match="at most one"):
        _study(60.0, [{"kind": "host", "capacity_gib": 8}, {"kind": "host", "capacity_gib": 8}])
