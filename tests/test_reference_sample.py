"""The reference point's sample of a plain study with a fault objective: one evaluation, the failure pass only
for designs not surely infeasible (dse.model.contract.FaultsWithin, dse.model.objectives.fault_limits), the
same metrics, pool and reference point as the two evaluations it replaces (issue 52)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dse
from dse.model.contract import FaultsWithin
from dse.model.metrics import M_POWER, M_SHORT, METRICS, N_KERNEL_METRICS
from dse.model.objectives import BUDGET_MARGIN, constraint_matrix, fault_limits
from dse.search import hypervolume
from dse.search.hypervolume import reference_point, sample_metrics

FAULT_COLUMNS = ["fault_tolerance_frac", "worst_retained_frac", "all_served_frac", "mc_retained_frac",
                 "mc_survival_frac"]


@pytest.fixture(scope="module")
def moe():
    """Mixtral per layer with fault tolerance as an objective and a power budget: its sample holds designs
    short of memory, designs over the budget and feasible ones."""
    base = dse.load_study("tests/data/moe_small.yaml")
    study = base.model_copy(update={"search": base.search.model_copy(
        update={"objectives": ["latency", "energy", "area", "fault_tolerance"]})})
    p = dse.prepare(study)
    X = np.random.default_rng(4).integers(p.space.lower, p.space.upper + 1, size=(40, p.space.n_var))
    intact = p.evaluator(X, with_faults=False)
    budget = float(np.median(intact["peak_power_w"]))
    study = study.model_copy(update={"constraints": study.constraints.model_copy(update={"peak_power_w": budget})})
    return study, p.evaluator, X, intact


def _two_pass_sample(study, evaluator, X):
    """The sample as it was evaluated before: every design intact, then the feasible ones with failures."""
    feasible = (constraint_matrix(evaluator(X, with_faults=False), study) <= 0).all(axis=1)
    if not feasible.any():
        return evaluator(X, with_faults=True), feasible
    return evaluator(X[feasible], with_faults=True), np.ones(int(feasible.sum()), bool)


class _Counting:
    """The evaluator, recording the ``with_faults`` of each call."""

    def __init__(self, evaluator):
        self.evaluator, self.space, self.calls = evaluator, evaluator.space, []

    def __call__(self, X, with_faults=True):
        self.calls.append(with_faults)
        return self.evaluator(X, with_faults=with_faults)


def test_sample_evaluated_once_equals_the_two_pass_sample(moe, monkeypatch):
    study, evaluator, X, intact = moe
    G = constraint_matrix(intact, study)
    short, over = intact["capacity_short_bytes"] > 0, G[:, 4] > 0
    assert short.any() and (over & ~short).any() and (G <= 0).all(axis=1).any()   # every path of the gate
    counting = _Counting(evaluator)
    metrics, feasible = sample_metrics(study, counting, X)
    assert len(counting.calls) == 1 and isinstance(counting.calls[0], FaultsWithin)
    old, old_feasible = _two_pass_sample(study, evaluator, X)
    pd.testing.assert_frame_equal(metrics, old, check_exact=True)
    assert np.array_equal(feasible, old_feasible)
    # hence the same reference point, bit for bit
    new_ref = reference_point(study, evaluator)
    monkeypatch.setattr(hypervolume, "sample_metrics", _two_pass_sample)
    assert reference_point(study, evaluator) == new_ref


def test_faults_within_skips_the_failures_of_designs_beyond_the_bounds(moe):
    study, evaluator, X, intact = moe
    limits = fault_limits(study)
    gated = evaluator(X, with_faults=FaultsWithin(limits)).to_numpy()
    whole = evaluator(X, with_faults=True).to_numpy()
    beyond = (intact.to_numpy()[:, :N_KERNEL_METRICS] > limits).any(axis=1)
    assert beyond.any() and (~beyond).any()
    assert np.array_equal(gated[~beyond], whole[~beyond], equal_nan=True)
    assert np.array_equal(gated[beyond], intact.to_numpy()[beyond], equal_nan=True)
    # designs within bounds only: what every design gets without a gate
    inside = FaultsWithin(np.full(N_KERNEL_METRICS, np.inf))
    assert np.array_equal(evaluator(X, with_faults=inside).to_numpy(), whole, equal_nan=True)


def test_fault_limits_bound_only_surely_infeasible_designs(moe):
    """A kernel metric above its bound is a violation of `constraint_matrix`, to the last bit."""
    study, _, _, intact = moe
    limits = fault_limits(study)
    budget = study.constraints.peak_power_w
    assert limits[M_POWER] == budget * BUDGET_MARGIN and limits[M_SHORT] == np.finfo(float).tiny
    assert np.isinf(limits[[i for i in range(N_KERNEL_METRICS) if i not in (M_POWER, M_SHORT,
                                                                             METRICS.index("unplaced_experts"))]]).all()
    row = intact.iloc[[0]]
    powers = [np.nextafter(limits[M_POWER], np.inf), budget * (1 + 2.0**-51), budget, np.nextafter(budget, np.inf)]
    shorts = [np.nextafter(limits[M_SHORT], np.inf), 5e-324, 0.0]
    probe = pd.concat([row.assign(peak_power_w=p, capacity_short_bytes=0.0) for p in powers]
                      + [row.assign(peak_power_w=0.0, capacity_short_bytes=s) for s in shorts], ignore_index=True)
    G = constraint_matrix(probe, study)
    beyond = (probe.to_numpy()[:, :N_KERNEL_METRICS] > limits).any(axis=1)
    assert beyond.tolist() == [True, False, False, False, True, False, False]
    assert (G[beyond] > 0).any(axis=1).all()


def test_seed_rows_made_distinct_as_np_unique_made_them():
    """`unique_rows` and `first_occurrences` (sets of tuples) give np.unique's rows, order and indices."""
    from dse.model.heuristics import unique_rows
    from dse.search.loop import first_occurrences
    rng = np.random.default_rng(0)
    rows = rng.integers(-3, 3, size=(12, 40))
    rows[:, :37] = 0                                 # ties broken by the last genes
    rows = np.vstack([rows, rows[[4, 0, 7]]])[rng.permutation(15)]
    assert len(np.unique(rows, axis=0)) < len(rows)
    made = unique_rows(rows)
    assert made.dtype == np.int64 and np.array_equal(made, np.unique(rows, axis=0))
    assert np.array_equal(first_occurrences(rows), np.sort(np.unique(rows, axis=0, return_index=True)[1]))


def _copies_without_memory_everywhere(kind, stacks, ddr, has_ddr, slots, ncopy, needs, resident=None):
    """`copies_without_memory` as it was: every design's copies counted, with or without DDR."""
    P, S = kind.shape
    copies = np.arange(slots.shape[2])[None, None, :] < ncopy[:, :, None]
    slot = np.where(copies, slots, 0)
    p = np.arange(P)[:, None, None]
    ddr_ok = (np.asarray(ddr) > 0) & has_ddr
    no_path = (stacks[p, slot] <= 0) & ~ddr_ok[:, None, None]
    if resident is not None:
        no_path &= ~np.asarray(resident)[kind[p, slot]]
    need = needs[np.arange(needs.shape[0])[None, :, None], kind[p, slot]]
    bad = copies & no_path & need
    out = np.zeros((P, S), np.int64)
    np.add.at(out, (np.broadcast_to(p, slot.shape)[bad], slot[bad]), 1)
    return out


@pytest.mark.parametrize("has_ddr", [True, False])
def test_copies_without_memory_counts_only_packages_without_ddr(has_ddr):
    from dse.model.memory_path import copies_without_memory
    rng = np.random.default_rng(1)
    P, S, U, C = 30, 9, 50, 3
    kind = rng.integers(0, 2, (P, S))
    stacks = rng.integers(0, 3, (P, S)) * (rng.random((P, S)) < 0.5)
    ddr = rng.integers(0, 3, P)
    slots = rng.integers(0, S, (P, U, C))
    ncopy = rng.integers(1, C + 1, (P, U))
    needs = rng.random((U, 2)) < 0.8
    for resident in (None, np.array([False, True])):
        expected = _copies_without_memory_everywhere(kind, stacks, ddr, has_ddr, slots, ncopy, needs, resident)
        assert expected.any() or not has_ddr
        assert np.array_equal(copies_without_memory(kind, stacks, ddr, has_ddr, slots, ncopy, needs, resident),
                              expected)
