"""Failure evaluation by deltas equals a full evaluation of the re-mapped design."""
import numpy as np
import pytest

import dse
from dse.search.screening import screened


@pytest.fixture(scope="module", params=[(study, mapping, 0.0) for study in ("tiny_moe", "moe_small")
                                        for mapping in ("many-to-many", "one-to-many")]
                + [("tiny_moe", "one-to-many", 3.0)], ids=str)
def prepared(request):
    """tiny_moe fits in HBM (failures take the delta path), moe_small spills (chiplets recomputed in full);
    with a host issuing each kernel in 3 us ahead of the device (and 30 us per sequence), the hosts' issue
    times bind in most designs; 2 us of overhead per kernel then makes the experts' grouped launches move
    with them (dse.model.grouped)."""
    name, mapping, dispatch_us = request.param
    study = dse.load_study(f"tests/data/{name}.yaml")
    host = {"dispatch_us": dispatch_us, "sequence_us": 10.0 * dispatch_us, "kernel_overhead_us": dispatch_us * 2 / 3}
    chiplets = [type(c).model_validate({**c.model_dump(exclude_unset=True), **host}) for c in study.hardware.chiplets]
    study = study.model_copy(update={"mapping": study.mapping.model_copy(update={"kind": mapping}),
                                     "hardware": study.hardware.model_copy(update={"chiplets": chiplets})})
    return dse.prepare(study)


def test_each_failure_matches_full_evaluation_of_the_remapped_design(prepared):
    ev, space = prepared.package_evaluator, prepared.space
    X = np.random.default_rng(7).integers(space.lower, space.upper + 1, size=(12, space.n_var))
    for design in ev.designs(X):
        report = ev.failure_report(design)
        intact = ev.evaluate_designs([design], with_faults=False).iloc[0]
        for f in range(design.rows * design.cols):
            after = ev.remapped(design, [f])
            assert all(f not in slots for slots in after.placement.values())
            full = ev.evaluate_designs([after], with_faults=False).iloc[0]
            assert report.loc[f, "latency_s"] == pytest.approx(full["latency_s"], rel=1e-9)
            if full["capacity_short_bytes"] <= intact["capacity_short_bytes"]:
                expected = min(intact["latency_s"] / full["latency_s"], 1.0)
            else:
                expected = 0.0
            assert report.loc[f, "retained_frac"] == pytest.approx(expected, rel=1e-9)
        metrics = ev.evaluate_designs([design]).iloc[0]
        assert metrics["fault_tolerance_frac"] == pytest.approx(report["retained_frac"].mean(), rel=1e-12)
        assert metrics["worst_retained_frac"] == pytest.approx(report["retained_frac"].min(), rel=1e-12)


def test_a_block_of_designs_gives_each_design_the_metrics_it_gets_alone(prepared):
    """dse.model.failures.failure_pass runs a block of designs in one call, its workspace carried from one
    design's failures to the next design's intact pass: every design's metrics, failure columns included,
    are the bits it gets evaluated alone, exact and screened (issue 52, fifteenth round)."""
    ev, space = prepared.package_evaluator, prepared.space
    X = np.random.default_rng(11).integers(space.lower, space.upper + 1, size=(10, space.n_var))
    threads, ev.threads = ev.threads, 1
    try:
        for fidelity in ("exact", "screened"):
            with screened(ev, fidelity == "screened"):
                together = ev.metrics_array(X)
                alone = np.vstack([ev.metrics_array(X[i:i + 1]) for i in range(len(X))])
            assert np.array_equal(together, alone, equal_nan=True), fidelity
    finally:
        ev.threads = threads


def test_failure_columns_are_those_of_each_failure_evaluated_exactly(prepared):
    """The metrics path settles a failure that cannot slow the design by a bound on its latency, without
    re-routing it (dse.model.failure_bound); the failure report evaluates every failure exactly. The failure
    columns are the bits dse.model.metric_rows.failure_summary's sums give the exact failures' retained
    fractions, in its order (issue 52, seventeenth round)."""
    ev, space = prepared.package_evaluator, prepared.space
    X = np.random.default_rng(13).integers(space.lower, space.upper + 1, size=(16, space.n_var))
    for design in ev.designs(X):
        kept = list(ev.failure_report(design)["retained_frac"])
        if prepared.study.faults.links:
            kept += list(ev.link_failure_report(design)["retained_frac"])
        kept_sum, worst, served = 0.0, 1.0, 0.0
        for k in kept:
            kept_sum += k
            worst = min(worst, k)
            served += 1.0 if k > 0.0 else 0.0
        metrics = ev.evaluate_designs([design]).iloc[0]
        assert metrics["fault_tolerance_frac"] == kept_sum / len(kept)
        assert metrics["worst_retained_frac"] == worst
        assert metrics["all_served_frac"] == served / len(kept)
