"""Simulated binary crossover (SBX, Deb & Agrawal 1995) as pymoo's ``cross_sbx`` draws and computes it,
worked on the crossed genes only.

pymoo's ``cross_sbx`` (pymoo.operators.crossover.sbx) builds full (matings x genes) arrays of the bounds,
the spread ``eta`` and the exchange probability before masking them, raises both branches of the spread
factor to their power for every crossed gene, swaps the children by whole-array ``np.where`` and clamps
every gene to its bounds. With 30,012 genes (DeepSeek-V3 per layer) one call took about 0.1 CPU-s. `sbx`
makes the same random draws in the same order and the same floating-point operations on each crossed gene
(the same ufuncs on contiguous arrays, so the same values), indexing the crossed genes once by their flat
positions, and clamps the crossed genes only: the others are the parents' own, which the search keeps
within the bounds (and rounds and clips every child after: dse.search.variables.GeneCrossover).
tests/test_search_sbx.py compares the rounded children with pymoo's on random parents.
"""
from __future__ import annotations

import numpy as np

#: parents' genes closer than this are not crossed (pymoo's ``eps``)
EPS = 1.0e-14
#: chance that a gene is crossed (pymoo's ``prob_var``) and that two children swap a gene (``prob_bin``)
PROB_VAR = 0.5
PROB_BIN = 0.5


def sbx(parents: np.ndarray, xl: np.ndarray, xu: np.ndarray, eta: float, random_state) -> np.ndarray:
    """Two children per mating of ``parents`` (2 x matings x genes, float, within the bounds), as
    ``cross_sbx(parents, xl, xu, eta, prob_var=0.5, prob_bin=0.5)`` gives them (module docstring).
    ``xl``, ``xu``: float bounds per gene; ``random_state``: a NumPy Generator, drawn as pymoo draws it."""
    _, n_matings, n_var = parents.shape
    cross = random_state.random((n_matings, n_var)) < PROB_VAR
    cross[np.abs(parents[0] - parents[1]) <= EPS] = False
    cross[:, xl == xu] = False
    at = np.flatnonzero(cross)              # crossed genes, in the order a boolean mask reads them
    genes = at % n_var
    p1 = parents[0].reshape(-1)[at]
    p2 = parents[1].reshape(-1)[at]
    smaller = p1 < p2
    y1 = np.where(smaller, p1, p2)
    y2 = np.where(smaller, p2, p1)
    spread = np.full(len(at), float(eta))
    rand = random_state.random(len(at))
    delta = y2 - y1
    low, high = xl[genes], xu[genes]
    c1 = 0.5 * ((y1 + y2) - _betaq(1.0 + (2.0 * (y1 - low) / delta), spread, rand) * delta)
    c2 = 0.5 * ((y1 + y2) + _betaq(1.0 + (2.0 * (high - y2) / delta), spread, rand) * delta)
    c1 = np.minimum(np.maximum(c1, low), high)          # pymoo's clamp (a NaN stays NaN, as there)
    c2 = np.minimum(np.maximum(c2, low), high)
    exchange = np.bitwise_xor(random_state.random(len(at)) < np.full(len(at), PROB_BIN), p1 > p2)
    first = exchange != smaller             # parent 1's child is c1 (by order, then by exchange), else c2
    children = parents.copy()
    flat = children.reshape(2, -1)
    flat[0, at] = np.where(first, c1, c2)
    flat[1, at] = np.where(first, c2, c1)
    return children


def _betaq(beta: np.ndarray, eta: np.ndarray, rand: np.ndarray) -> np.ndarray:
    """pymoo's spread factor of each crossed gene: its branch's base chosen first, then one power (pymoo
    raises both branches' bases to the power for every gene and keeps one: the same power of the same
    base); a gene where neither branch holds (a NaN) keeps 0, as in pymoo."""
    alpha = 2.0 - np.power(beta, -(eta + 1.0))
    below = rand <= (1.0 / alpha)
    above = rand > (1.0 / alpha)
    out = np.power(np.where(below, rand * alpha, 1.0 / (2.0 - rand * alpha)), 1.0 / (eta + 1.0))
    out[~(below | above)] = 0.0
    return out
