"""Normalised hypervolume, the study's reference point and the convergence record."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import dse
from dse.search.hypervolume import Convergence, costs, from_cost, needs_faults, reference_point, to_cost
from dse.model.objectives import constraint_matrix, objective_matrix


def _box_union_volume(points: np.ndarray) -> float:
    """Volume of the union of boxes [p, 1]: inclusion-exclusion over every subset (the definition)."""
    total = 0.0
    for k in range(1, len(points) + 1):
        for subset in itertools.combinations(points, k):
            corner = np.max(subset, axis=0)
            total += (-1) ** (k + 1) * np.prod(np.clip(1.0 - corner, 0, None))
    return total


@pytest.fixture(scope="module")
def tiny():
    study = dse.load_study("tests/data/tiny.yaml")
    return study, dse.prepare(study)


def test_hypervolume_of_two_points_by_hand(tiny):
    study, _ = tiny
    conv = Convergence(study, {"latency": 1.0, "energy": 1.0, "area": 1.0})
    C = np.array([[0.2, 0.6, 0.0], [0.5, 0.3, 0.0]])
    # 0.8 x 0.4 + 0.5 x 0.7 - 0.5 x 0.4 (their overlap), times 1 in the third objective
    assert conv.hypervolume(C) == pytest.approx(0.47)
    # a point beyond the reference point adds nothing
    assert conv.hypervolume(np.vstack([C, [[0.01, 0.01, 1.2]]])) == pytest.approx(0.47)


def test_hypervolume_matches_inclusion_exclusion(tiny):
    study, _ = tiny
    conv = Convergence(study, {"latency": 1.0, "energy": 1.0, "area": 1.0})
    rng = np.random.default_rng(7)
    for _ in range(5):
        C = rng.random((6, 3))
        assert conv.hypervolume(C) == pytest.approx(_box_union_volume(C), rel=1e-9)


def test_costs_keep_order_and_invert():
    metrics = pd.DataFrame({"throughput_tok_s": [10.0, 40.0], "fault_tolerance_frac": [0.25, 0.75],
                            "latency_s": [0.1, 0.2]})
    C = costs(metrics, ["throughput", "fault_tolerance", "latency"])
    np.testing.assert_allclose(C, [[0.1, 0.75, 0.1], [0.025, 0.25, 0.2]])
    for objective, value in [("throughput", 123.0), ("fault_tolerance", 0.4), ("area", 55.0)]:
        assert from_cost(objective, to_cost(objective, value)) == pytest.approx(value)


def test_reference_point_given_and_derived(tiny):
    study, p = tiny
    derived = reference_point(study, p.evaluator)
    assert list(derived) == study.search.objectives
    # depends on the study only, not on the search seed
    reseeded = study.model_copy(update={"search": study.search.model_copy(update={"seed": 99})})
    assert reference_point(reseeded, p.evaluator) == derived
    given = study.model_copy(update={"search": study.search.model_copy(update={"reference_point": {"latency": 0.5}})})
    ref = reference_point(given, p.evaluator)
    assert ref["latency"] == 0.5 and ref["energy"] == derived["energy"]


class _Faulted:
    """An evaluator that always runs the failure pass (as reference points were derived before)."""

    def __init__(self, evaluator):
        self.evaluator, self.space = evaluator, evaluator.space

    def __call__(self, X, with_faults=True):
        return self.evaluator(X, with_faults=True)


def test_reference_point_of_intact_objectives_skips_the_failures_alone(tiny):
    """The sample evaluated intact gives the same reference point as with every failure re-mapped: only
    the fault columns differ between the two (the evaluator's own intact pass)."""
    study, p = tiny
    assert not needs_faults(study)
    assert reference_point(study, p.evaluator) == reference_point(study, _Faulted(p.evaluator))
    X = np.random.default_rng(0).integers(p.space.lower, p.space.upper + 1, size=(16, p.space.n_var))
    whole, intact = p.evaluator(X), p.evaluator(X, with_faults=False)
    differ = {c for c in whole.columns if not np.array_equal(whole[c].to_numpy(float), intact[c].to_numpy(float),
                                                              equal_nan=True)}
    assert differ <= {"fault_tolerance_frac", "worst_retained_frac", "all_served_frac"}
    faulty = study.model_copy(update={"search": study.search.model_copy(
        update={"objectives": ["latency", "fault_tolerance"]})})
    assert needs_faults(faulty)


def test_convergence_record_matches_the_front(tiny, tmp_path):
    study, p = tiny
    result = dse.run_study(study, prepared=p)
    conv = result.convergence
    assert list(conv["generation"]) == list(range(study.search.generations))
    assert conv["evaluations"].iloc[-1] == len(result.evaluations)
    assert (np.diff(conv["hypervolume"]) >= 0).all(), "the front so far can only grow"
    assert conv["front_size"].iloc[-1] == len(result.pareto)
    # the last hypervolume is that of the reported Pareto front, recomputed from its metrics
    again = Convergence(study, result.reference_point)
    assert again.hypervolume(again.normalised(result.pareto)) == pytest.approx(conv["hypervolume"].iloc[-1])
    assert 0 < conv["hypervolume"].iloc[-1] <= 1
    out = dse.write_results(result, tmp_path / "res")
    written = pd.read_csv(out / "convergence.csv")
    pd.testing.assert_frame_equal(written, conv, check_dtype=False)
    assert "reference point: latency_s" in (out / "summary.md").read_text()


def test_objective_and_constraint_signs(tiny):
    study, p = tiny
    metrics = p.evaluator(p.space.lower[None, :])
    F = objective_matrix(metrics, ["throughput", "latency"])
    assert F[0, 0] == -metrics["throughput_tok_s"][0] and F[0, 1] == metrics["latency_s"][0]
    G = constraint_matrix(metrics, study)
    assert G.shape == (1, 4)                    # memory short, experts unplaced, copies without memory, reticle
    assert G[0, 3] == metrics["max_die_mm2"][0] / 858.0 - 1.0 < 0


@pytest.mark.parametrize("value,words", [
    ({"cost": 10.0}, "cost is not among the objectives"),
    ({"fault_tolerance": 1.0}, "must be below 1"),
    ({"latency": 0.0}, "must be greater than 0"),
    ({"beauty": 1.0}, "'latency', 'throughput'"),
])
def test_bad_reference_point_names_the_key(tiny_dict, value, words):
    data = dict(tiny_dict)
    data["search"] = dict(data["search"], objectives=["latency", "energy", "fault_tolerance"], reference_point=value)
    with pytest.raises(dse.StudyError) as err:
        dse.Study.from_dict(data)
    assert err.value.key.startswith("search.reference_point") and words in str(err.value)


class _Infinite:
    """An evaluator whose every design has an infinite latency (no sampled design is usable)."""

    def __init__(self, evaluator):
        self.evaluator, self.space = evaluator, evaluator.space

    def __call__(self, X, with_faults=True):
        metrics = self.evaluator(X, with_faults=with_faults)
        return metrics.assign(latency_s=np.inf)


def test_reference_point_without_a_finite_sample_names_the_key(tiny):
    study, p = tiny
    with pytest.raises(dse.StudyError, match=r"^search\.reference_point: .*latency") as info:
        reference_point(study, _Infinite(p.evaluator))
    assert "\n" not in str(info.value)
