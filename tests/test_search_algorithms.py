"""Search algorithms: each runs and is reproducible; the default one finds the true front of a small
space; NSGA-II beats random search; the gene operators respect the space."""
from __future__ import annotations

import math

import numpy as np
import pytest

import dse
from dse.search.algorithms import reference_directions
from dse.search.hypervolume import costs
from dse.model.objectives import constraint_matrix
from dse.study.schema import ALGORITHMS
from dse.search import run_search
from dse.search.variables import GeneCrossover, GeneMutation, enumerate_batch, layer_roles, space_size
from pymoo.core.problem import Problem
from pymoo.indicators.hv import HV


def _with(study, **search):
    return study.model_copy(update={"search": study.search.model_copy(update=search)})


@pytest.fixture(scope="module")
def tiny():
    study = dse.load_study("tests/data/tiny.yaml")
    return study, dse.prepare(study)


@pytest.fixture(scope="module")
def quickstart():
    study = dse.load_study("studies/quickstart.yaml")
    return study, dse.prepare(study)


@pytest.mark.parametrize("algorithm", [a for a in ALGORITHMS if a != "exhaustive"])
def test_each_algorithm_is_seeded_and_reproducible(tiny, algorithm):
    study, p = tiny
    s = _with(study, algorithm=algorithm, generations=4)
    first = run_search(p.evaluator, s, seed=5)
    again = run_search(p.evaluator, s, seed=5)
    other = run_search(p.evaluator, s, seed=6)
    np.testing.assert_array_equal(first.X, again.X)
    np.testing.assert_array_equal(first.pareto_index, again.pareto_index)
    assert not np.array_equal(first.X, other.X)
    assert list(first.convergence["generation"]) == [0, 1, 2, 3]
    assert len(first.X) <= 4 * study.search.population
    assert ((first.X >= p.space.lower) & (first.X <= p.space.upper)).all()


def test_exhaustive_refuses_a_large_space_naming_the_key(quickstart):
    study, p = quickstart
    with pytest.raises(dse.StudyError) as err:
        run_search(p.evaluator, _with(study, algorithm="exhaustive"))
    assert err.value.key == "search.algorithm"
    assert "1.53e+24" in str(err.value) and "at most 1,000,000" in str(err.value)


@pytest.fixture(scope="module")
def true_front():
    """Every design of the enumerable study, and its true Pareto front."""
    study = dse.load_study("tests/data/enumerable.yaml")
    p = dse.prepare(study)
    outcome = run_search(p.evaluator, study)
    return study, p, outcome


def test_exhaustive_visits_every_vector_once(true_front):
    study, p, outcome = true_front
    assert len(outcome.X) == space_size(p.space.lower, p.space.upper) == 65_536
    assert len(np.unique(outcome.X, axis=0)) == len(outcome.X)


def test_default_algorithm_recovers_the_true_front(true_front):
    """NSGA-II at the quickstart budget (48 x 30) reaches >= 90% of the enumerated front's hypervolume,
    measured in the study's box and in the tight box between the true front's ideal and nadir points."""
    study, p, truth = true_front
    search = _with(study, algorithm=dse.Study.model_fields["search"].default.algorithm)
    assert search.search.algorithm == "nsga2" and (search.search.population, search.search.generations) == (48, 30)
    found = run_search(p.evaluator, search)
    assert len(found.X) <= 48 * 30
    assert found.reference_point == truth.reference_point
    assert found.convergence["hypervolume"].iloc[-1] >= 0.9 * truth.convergence["hypervolume"].iloc[-1]

    objectives = study.search.objectives
    front = costs(truth.metrics.iloc[truth.pareto_index], objectives)
    ideal, nadir = front.min(axis=0), front.max(axis=0)

    def tight_hv(outcome, n=None):
        metrics = outcome.metrics.iloc[:n]
        metrics = metrics[(constraint_matrix(metrics, study) <= 0).all(axis=1)]
        C = (costs(metrics, objectives) - ideal) / (nadir - ideal)
        C = C[(C < 1.1).all(axis=1)]
        return HV(ref_point=np.full(len(objectives), 1.1))(C) if len(C) else 0.0

    assert tight_hv(found) >= 0.9 * tight_hv(truth)
    # the test has teeth: the initial random population alone is well short of it
    assert tight_hv(found, n=48) < 0.8 * tight_hv(truth)


def test_nsga2_beats_random_search_at_equal_evaluations(quickstart):
    study, p = quickstart
    for seed in (1, 2):
        nsga2 = run_search(p.evaluator, _with(study, algorithm="nsga2", seed=seed))
        rand = run_search(p.evaluator, _with(study, algorithm="random", seed=seed))
        assert len(nsga2.X) <= len(rand.X) == 48 * 30
        assert nsga2.convergence["hypervolume"].iloc[-1] > rand.convergence["hypervolume"].iloc[-1] + 0.03


@pytest.mark.parametrize("n_obj", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("n_points", [8, 48, 91])
def test_reference_directions(n_obj, n_points):
    W = reference_directions(n_obj, n_points)
    assert W.shape == (n_points, n_obj)
    assert (W >= 0).all() and np.allclose(W.sum(axis=1), 1.0)
    assert len(np.unique(W.round(12), axis=0)) == n_points
    np.testing.assert_array_equal(W, reference_directions(n_obj, n_points))
    # the whole Das-Dennis lattice with the most partitions that fits is inside (C(p+M-1, M-1) points)
    p = max(q for q in range(1, n_points) if math.comb(q + n_obj - 1, n_obj - 1) <= n_points) \
        if n_points >= n_obj else None
    if p:
        assert math.comb(p + n_obj - 1, n_obj - 1) <= n_points
        assert np.isclose(W * p, np.round(W * p)).all(axis=1).sum() >= math.comb(p + n_obj - 1, n_obj - 1)


class _Box(Problem):
    def __init__(self, lower, upper):
        super().__init__(n_var=len(lower), n_obj=1, xl=np.array(lower), xu=np.array(upper), vtype=int)


def test_mutation_moves_genes_within_bounds():
    problem = _Box([0, 0, 0, 5], [1, 1, 15, 5])          # two 0..1 genes, one 0..15, one fixed
    X = np.tile([1, 0, 15, 5], (2000, 1))
    Y = GeneMutation(np.zeros(4, bool))._do(problem, X, random_state=np.random.default_rng(0))
    changed = Y != X
    assert changed.any(axis=1).all(), "every offspring mutates at least one gene"
    assert not changed[:, 3].any(), "a fixed gene never mutates"
    assert ((Y >= problem.xl) & (Y <= problem.xu)).all()
    assert (Y[changed[:, 0], 0] == 0).all() and (Y[changed[:, 1], 1] == 1).all(), "0..1 genes flip"
    # each of the 3 free genes with probability 1/3, plus one of them when none was drawn
    assert changed[:, :3].mean(axis=0) == pytest.approx(1 / 3 + (2 / 3) ** 3 / 3, abs=0.04)
    steps = 15 - Y[changed[:, 2], 2]
    assert np.median(steps) <= 2, "ordinal genes mostly move a little (polynomial mutation)"


def test_categorical_genes_reset_and_cross_uniformly():
    problem = _Box([0, 0], [3, 3])
    categorical = np.array([True, False])
    X = np.tile([2, 2], (3000, 1))
    Y = GeneMutation(categorical, genes=2.0)._do(problem, X, random_state=np.random.default_rng(1))
    moved = Y[Y[:, 0] != 2, 0]
    assert set(np.unique(moved)) == {0, 1, 3} and np.bincount(moved, minlength=4)[[0, 1, 3]].min() > 0.25 * len(moved)
    parents = np.array([np.tile([0, 0], (500, 1)), np.tile([3, 3], (500, 1))])
    children = GeneCrossover(categorical)._do(problem, parents, random_state=np.random.default_rng(2))
    assert set(np.unique(children[:, :, 0])) == {0, 3}, "categorical: each child gene is a parent's"
    assert ((children >= 0) & (children <= 3)).all()


def test_layer_moves_move_one_role_in_every_layer():
    from types import SimpleNamespace
    names = ["rows", "place[embed]", "place[L0.attn]", "place[L0.e0]", "place[L0.e1]", "place[L1.attn]",
             "place[L1.e0]", "place[L1.e1]", "copies[L0.e0]", "copies[L1.e0]"]
    roles = layer_roles(SimpleNamespace(names=names))
    assert sorted(map(list, roles)) == [[2, 5], [3, 6], [4, 7], [8, 9]], "one group per role and gene kind"
    problem = _Box([1] + [0] * 7 + [1, 1], [4] + [15] * 7 + [2, 2])
    X = np.tile([2, 9, 1, 2, 3, 4, 5, 6, 1, 2], (400, 1))
    Y = GeneMutation(np.zeros(10, bool), genes=1e-9, roles=roles, layer_moves=1.0)._do(
        problem, X, random_state=np.random.default_rng(3))
    assert ((Y >= problem.xl) & (Y <= problem.xu)).all()
    swapped = (Y[:, [3, 6]] == [3, 6]).all(axis=1) & (Y[:, [4, 7]] == [2, 5]).all(axis=1)
    aligned = [(Y[:, g] == Y[:, g[:1]]).all(axis=1) & (Y[:, g] != X[:, g]).any(axis=1) for g in roles]
    assert swapped.sum() > 10, "two roles of equal length swap layer by layer"
    assert all(a.sum() > 10 for a in aligned), "a role's genes set to one value in every layer"


def test_enumeration_order():
    lower, upper = np.array([0, 1]), np.array([1, 3])
    assert space_size(lower, upper) == 6
    np.testing.assert_array_equal(enumerate_batch(lower, upper, 0, 6),
                                  [[0, 1], [0, 2], [0, 3], [1, 1], [1, 2], [1, 3]])
    np.testing.assert_array_equal(enumerate_batch(lower, upper, 4, 6), [[1, 2], [1, 3]])
