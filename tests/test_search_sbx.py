"""dse.search.sbx.sbx against pymoo's ``cross_sbx`` (the operator GeneCrossover called before): the same
children, to the bit, and the same random stream after them, on random integer parents within bounds."""
import numpy as np
import pytest
from pymoo.operators.crossover.sbx import cross_sbx

from dse.search.sbx import sbx
from dse.search.variables import GeneCrossover, as_integers


class _Box:
    def __init__(self, xl, xu):
        self.xl, self.xu = np.asarray(xl, np.int64), np.asarray(xu, np.int64)
        self.n_var = len(self.xl)


def _pymoo(parents, xl, xu, eta, rng):
    n = parents.shape[1]
    return cross_sbx(parents, xl.astype(float), xu.astype(float), np.full((n, 1), eta), np.full((n, 1), 0.5),
                     np.full((n, 1), 0.5), random_state=rng)


def _old_crossover(categorical, problem, X, rng):
    """GeneCrossover._do as it was: pymoo's cross_sbx, then the categorical genes, rounded and clipped."""
    _, n_matings, _ = X.shape
    parents = X.astype(float)
    children = _pymoo(parents, problem.xl, problem.xu, 15.0, rng)
    if categorical.any():
        swap = rng.random((n_matings, int(categorical.sum()))) < 0.5
        a, b = parents[0][:, categorical], parents[1][:, categorical]
        children[0][:, categorical] = np.where(swap, b, a)
        children[1][:, categorical] = np.where(swap, a, b)
    return np.clip(as_integers(children), problem.xl, problem.xu)


def _parents(rng, n_matings, n_var, same_share):
    xl = rng.integers(-5, 3, n_var)
    xu = xl + rng.integers(0, 70, n_var)            # some genes fixed (xl == xu)
    X = rng.integers(xl, xu + 1, (2, n_matings, n_var))
    same = rng.random((n_matings, n_var)) < same_share
    X[1][same] = X[0][same]                          # equal parents' genes are not crossed
    return X, xl, xu


@pytest.mark.parametrize("seed", range(40))
def test_sbx_is_pymoos_cross_sbx(seed):
    rng = np.random.default_rng(seed)
    X, xl, xu = _parents(rng, int(rng.integers(1, 20)), int(rng.integers(1, 3000)), rng.random())
    eta = float(rng.choice([15.0, 3.0, 30.0]))
    a, b = np.random.default_rng(seed + 100), np.random.default_rng(seed + 100)
    old = _pymoo(X.astype(float), xl, xu, eta, a)
    new = sbx(X.astype(float), xl.astype(float), xu.astype(float), eta, b)
    assert old.shape == new.shape and np.array_equal(old, new)
    assert a.random() == b.random(), "the same draws"


@pytest.mark.parametrize("seed", range(20))
def test_gene_crossover_gives_the_old_children(seed):
    rng = np.random.default_rng(seed)
    X, xl, xu = _parents(rng, int(rng.integers(1, 17)), int(rng.integers(2, 5000)), 0.6)
    categorical = rng.random(X.shape[2]) < (0.2 if seed % 2 else 0.0)
    if seed % 3 == 0:       # laid out as pymoo's Crossover.do gives it: matings first, then swapped axes
        X = np.swapaxes(np.ascontiguousarray(np.swapaxes(X, 0, 1)), 0, 1)
        assert not X.flags.c_contiguous
    problem = _Box(xl, xu)
    a, b = np.random.default_rng(seed + 7), np.random.default_rng(seed + 7)
    old = _old_crossover(categorical, problem, X, a)
    new = GeneCrossover(categorical)._do(problem, X, random_state=b)
    assert old.dtype == new.dtype and np.array_equal(old, new)
    assert a.random() == b.random()


def test_spread_factor_branches_and_nan():
    """The two branches of the spread factor, and a gene where neither holds (NaN) keeps 0 as in pymoo."""
    from dse.search.sbx import _betaq
    rng = np.random.default_rng(3)
    beta = np.concatenate([1.0 + rng.random(1000) * 9, [np.nan, 1.0]])
    eta, rand = np.full(len(beta), 15.0), np.concatenate([rng.random(1000), [0.5, 0.0]])
    alpha = 2.0 - np.power(beta, -(eta + 1.0))
    mask, mask_not = rand <= 1.0 / alpha, rand > 1.0 / alpha
    ref = np.zeros(len(beta))
    ref[mask] = np.power(rand * alpha, 1.0 / (eta + 1.0))[mask]
    ref[mask_not] = np.power(1.0 / (2.0 - rand * alpha), 1.0 / (eta + 1.0))[mask_not]
    assert mask.any() and mask_not.any() and not (mask | mask_not).all()
    assert np.array_equal(_betaq(beta, eta, rand), ref)
