"""Issue 52, tenth round: `base_passes` reads the table tuples T, R and W in its first block only (its
entry's reference counts then cancel, dse.model.perf_model); what it used to read from them inside the loop
it now reads from locals bound there, so the same figures.

The one argument that changed form: dse.model.offload.stage_fetch takes `FetchTerms` (the four figures it
reads of T) instead of the kernel tables; the old call, with T, is the reference here, on random tier
fractions of a study with host DRAM and SSD below its HBM."""
import numpy as np
import pytest

import dse
from dse.model.offload import stage_fetch
from dse.model.perf_model import FetchTerms


def _offload_study() -> dse.Study:
    """Mixtral-8x7B decode on one systolic chiplet whose HBM holds 60 GiB, host DRAM and SSD below it."""
    return dse.Study.from_dict({
        "name": "offload-entry",
        "workload": {"model": "mixtral-8x7b", "phase": "decode", "batch": 1, "context": 512, "precision": "bf16",
                     "routing": {"distribution": "uniform"}},
        "hardware": {
            "chiplets": [{"name": "sa", "kind": "systolic", "array": [128, 128], "dataflow": "ws", "sram_mb": 32,
                          "freq_ghz": 1.0, "node": "5nm"}],
            "memory": [{"kind": "hbm3", "stacks": [4, 4], "overrides": {"capacity_gib": 15.0}},
                       {"kind": "host", "capacity_gib": 64}, {"kind": "ssd", "ssd": "pm1743", "drives": 2}],
            "package": {"mesh": {"rows": [1, 1], "cols": [1, 1]}, "link": "ucie-advanced"}},
        "mapping": {"kind": "many-to-many", "max_replicas": 1},
        "search": {"objectives": ["latency", "energy"], "algorithm": "nsga2", "population": 4, "generations": 1,
                   "seed": 1}})


@pytest.fixture(scope="module")
def offload():
    return dse.prepare(_offload_study())


def test_stage_fetch_reads_the_same_terms_as_from_the_tables(offload):
    ev = offload.package_evaluator
    T = ev.kernel
    assert T.offload and T.link_bps > 0.0 and T.ssd_bps > 0.0
    terms = FetchTerms(T.link_bps, T.ssd_bps, T.host_e, T.ssd_e)
    U = T.unit_capacity.shape[0]
    rng = np.random.default_rng(10)
    kind = np.zeros(1, np.int64)
    slots = np.zeros((U, ev.max_copies), np.int64)
    ncopy = np.ones(U, np.int64)
    hbm_e = float(T.hbm_e)
    starts = T.stage_start
    for trial in range(20):
        f_host = rng.random((U, ev.max_copies)) * (trial % 3 != 0)
        f_ssd = rng.random((U, ev.max_copies)) * (1.0 - f_host)
        for s in range(len(starts) - 1):
            old = stage_fetch(starts[s], starts[s + 1], kind, slots, ncopy, T.unit_w_copy, T.unit_other_dram, f_host,
                              f_ssd, T, hbm_e)
            new = stage_fetch(starts[s], starts[s + 1], kind, slots, ncopy, T.unit_w_copy, T.unit_other_dram, f_host,
                              f_ssd, terms, hbm_e)
            assert np.array_equal(np.array(old), np.array(new))
    assert old[0] > 0.0


def test_offloaded_designs_through_the_population_and_one_by_one(offload):
    """With tiers the pass calls stage_fetch per stage; the same metrics whether the designs go in one call,
    one at a time, or with the failure pass (which runs the intact pass per design)."""
    ev, space = offload.package_evaluator, offload.space
    X = np.random.default_rng(11).integers(space.lower, space.upper + 1, size=(8, space.n_var))
    X = np.vstack([space.seeds[:1], X])
    ev.threads = 1
    whole = ev.metrics_array(X, False)
    single = np.vstack([ev.metrics_array(X[i:i + 1], False) for i in range(len(X))])
    faults = ev.metrics_array(X, True)
    assert np.array_equal(whole, single, equal_nan=True)
    intact = [c for c in range(whole.shape[1]) if not np.isnan(whole[:, c]).all()]
    keep = [c for c in intact if ev.columns[c] not in ("fault_tolerance_frac", "worst_retained_frac",
                                                         "all_served_frac", "mc_retained_frac", "mc_survival_frac")]
    assert np.array_equal(whole[:, keep], faults[:, keep], equal_nan=True)
