"""How the search treats the genes of a design space: bounds, sampling, variation, enumeration.

The one place that knows what a gene is. The space gives inclusive integer bounds
(``space.lower``, ``space.upper``) and, optionally, ``space.categorical`` (a boolean per gene: a
choice among unordered options, such as a chiplet kind or a link technology). Every algorithm in
dse.search.algorithms takes its operators from `operators`, so a new kind of gene changes this module only.

* Ordinal genes: simulated binary crossover (SBX, Deb & Agrawal 1995) and polynomial mutation (PM,
  Deb & Goyal 1996) on the real line, rounded to the nearest integer. A mutated gene always moves:
  when rounding brings it back to its old value it steps one unit (up or down, at random, within
  bounds), so narrow genes (a 0..1 choice) are not frozen by the rounding.
* Categorical genes: uniform crossover (each child gene from either parent) and random resetting
  mutation (a different option, uniformly).
* Each gene mutates with probability 1 / (number of free genes), at least one gene per offspring.
* Layer moves (per-layer studies): a unit repeated in every layer ("L0.e5", "L1.e5", ...) is one role;
  with probability ``search.layer_moves`` (default ``LAYER_MOVE_SHARE``) an offspring also moves one
  role in every layer at once: half the time it swaps the genes of two roles layer by layer (a balanced
  placement stays balanced), else it sets the role's placement genes, or its copies genes, to one new
  value drawn uniformly. A per-gene mutation changes one of tens of thousands of genes; a layer move
  changes an expert's chiplet in the whole model, the step a shared expert-to-chiplet pattern takes,
  while the per-gene moves keep per-layer deviations.
"""
from __future__ import annotations

import re

import numpy as np
from pymoo.core.crossover import Crossover
from pymoo.core.duplicate import DefaultDuplicateElimination
from pymoo.core.mutation import Mutation
from pymoo.core.sampling import Sampling

from .sbx import sbx

#: largest space `enumerate_batch` will walk (the ``exhaustive`` algorithm)
MAX_ENUMERATION = 1_000_000
#: share of offspring that also make a layer move (see module docstring)
LAYER_MOVE_SHARE = 0.5
_LAYER_GENE = re.compile(r"(place|copies)\[L\d+\.(.+)\]")


def bounds(space) -> tuple[np.ndarray, np.ndarray]:
    """Inclusive integer bounds of the genes."""
    return np.asarray(space.lower, dtype=np.int64), np.asarray(space.upper, dtype=np.int64)


def categorical_mask(space) -> np.ndarray:
    """True for genes that choose among unordered options (none unless the space says so)."""
    mask = getattr(space, "categorical", None)
    return np.zeros(space.n_var, bool) if mask is None else np.asarray(mask, dtype=bool)


def layer_roles(space) -> list[np.ndarray]:
    """Gene indices of every role repeated across layers (placement and copies genes apart), two or more
    genes each; none for a study without per-layer units."""
    groups: dict[tuple[str, str], list[int]] = {}
    for i, name in enumerate(getattr(space, "names", [])):
        match = _LAYER_GENE.fullmatch(name)
        if match:
            groups.setdefault(match.groups(), []).append(i)
    return [np.array(g) for g in groups.values() if len(g) > 1]


def space_size(lower: np.ndarray, upper: np.ndarray) -> int:
    """Number of distinct decision vectors within bounds (a Python int: may be astronomically large)."""
    size = 1
    for n in (np.asarray(upper, np.int64) - np.asarray(lower, np.int64) + 1).tolist():
        size *= n
    return size


def enumerate_batch(lower: np.ndarray, upper: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Decision vectors number ``start`` to ``stop - 1`` in mixed-radix order (last gene fastest)."""
    lower, upper = np.asarray(lower, np.int64), np.asarray(upper, np.int64)
    digits = np.unravel_index(np.arange(start, stop, dtype=np.int64), tuple((upper - lower + 1).tolist()))
    return np.column_stack(digits).astype(np.int64) + lower


def as_integers(X: np.ndarray) -> np.ndarray:
    return np.asarray(np.rint(X), dtype=np.int64)


class GeneSampling(Sampling):
    """The problem's heuristic seed designs (dse.model.heuristics), if any, then uniform over each gene's range."""

    def _do(self, problem, n_samples, *args, random_state=None, **kwargs):
        X = random_state.integers(problem.xl, problem.xu + 1, size=(n_samples, problem.n_var))
        seeds = getattr(problem, "seeds", None)
        if seeds is not None and len(seeds):
            k = min(len(seeds), n_samples // 2)       # at most half: the rest keeps the search diverse
            X[:k] = np.clip(seeds[:k], problem.xl, problem.xu)
        return X


class GeneCrossover(Crossover):
    """SBX on ordinal genes, uniform crossover on categorical ones; two parents, two children."""

    def __init__(self, categorical: np.ndarray, prob: float = 0.9, eta: float = 15.0):
        super().__init__(2, 2, prob=prob)
        self.categorical, self.eta = categorical, eta

    def _do(self, problem, X, *args, random_state=None, **kwargs):
        _, n_matings, n_var = X.shape
        parents = X.astype(float)
        children = sbx(parents, problem.xl.astype(float), problem.xu.astype(float), self.eta, random_state)
        cat = self.categorical
        if cat.any():
            swap = random_state.random((n_matings, int(cat.sum()))) < 0.5
            a, b = parents[0][:, cat], parents[1][:, cat]
            children[0][:, cat] = np.where(swap, b, a)
            children[1][:, cat] = np.where(swap, a, b)
        return np.clip(as_integers(children), problem.xl, problem.xu)


class GeneMutation(Mutation):
    """Rounded polynomial mutation that always moves a mutated gene; random resetting if categorical."""

    roles: tuple = ()           # a mutation pickled in a checkpoint before layer moves existed makes none
    layer_moves: float = 0.0

    def __init__(self, categorical: np.ndarray, eta: float = 20.0, genes: float = 1.0,
                 roles: list[np.ndarray] | None = None, layer_moves: float = LAYER_MOVE_SHARE):
        super().__init__(prob=1.0)
        self.categorical, self.eta, self.genes = categorical, eta, genes
        self.roles, self.layer_moves = roles or [], layer_moves

    def _do(self, problem, X, *args, random_state=None, **kwargs):
        X = as_integers(X)
        xl, xu = problem.xl.astype(np.int64), problem.xu.astype(np.int64)
        free = np.flatnonzero(xu > xl)
        if len(free) == 0:
            return X
        n = len(X)
        mutate = np.zeros(X.shape, bool)
        mutate[:, free] = random_state.random((n, len(free))) < self.genes / len(free)
        lonely = ~mutate.any(axis=1)
        mutate[np.flatnonzero(lonely), random_state.choice(free, size=int(lonely.sum()))] = True
        out = X.copy()
        rows, genes = np.nonzero(mutate)
        lo, hi, old = xl[genes], xu[genes], X[rows, genes]
        u = random_state.random(len(genes))
        # polynomial mutation (Deb & Goyal 1996), the "highly disruptive" form pymoo uses
        d1, d2 = (old - lo) / (hi - lo), (hi - old) / (hi - lo)
        power = 1.0 / (self.eta + 1.0)
        low_side = u <= 0.5
        with np.errstate(invalid="ignore"):
            dq = np.where(low_side,
                          (2 * u + (1 - 2 * u) * (1 - d1) ** (self.eta + 1)) ** power - 1,
                          1 - (2 * (1 - u) + 2 * (u - 0.5) * (1 - d2) ** (self.eta + 1)) ** power)
        new = np.clip(as_integers(old + dq * (hi - lo)), lo, hi)
        # rounding gave the old value back: one step, towards the side the draw chose when possible
        step = np.where(low_side, -1, 1)
        step = np.where(old + step < lo, 1, np.where(old + step > hi, -1, step))
        new = np.where(new == old, old + step, new)
        cat = self.categorical[genes]
        if cat.any():   # random resetting: another option, uniformly
            span = hi[cat] - lo[cat]
            shift = 1 + (random_state.random(int(cat.sum())) * span).astype(np.int64)
            new[cat] = lo[cat] + (old[cat] - lo[cat] + shift) % (span + 1)
        out[rows, genes] = new
        if self.roles:
            self._layer_moves(out, xl, xu, random_state)
        return out

    def _layer_moves(self, X: np.ndarray, xl: np.ndarray, xu: np.ndarray, random_state) -> None:
        """Move one role in every layer (see module docstring) in a share of the offspring, in place."""
        for row in np.flatnonzero(random_state.random(len(X)) < self.layer_moves):
            a, b = random_state.integers(len(self.roles), size=2)
            genes, other = self.roles[a], self.roles[b]
            if random_state.random() < 0.5 and a != b and len(genes) == len(other) and xu[genes[0]] == xu[other[0]]:
                X[row, genes], X[row, other] = X[row, other], X[row, genes].copy()     # swap two roles
            elif xu[genes[0]] > xl[genes[0]]:
                X[row, genes] = random_state.integers(xl[genes[0]], xu[genes[0]] + 1)


class WholeDuplicates(DefaultDuplicateElimination):
    """pymoo's default duplicate elimination (a row within 1e-16 of an earlier row, or of a row of the other
    population, by every pair's Euclidean distance) found by comparing equal rows where the genes are whole
    numbers: two such rows lie within 1e-16 exactly when they are equal (distinct integers below 2**53
    differ by 1 or more as floats), so the same rows are duplicates without the pairs' distances (30,000
    genes a row for DeepSeek-V3 per layer). Rows are compared whole only where one integer sum of their
    genes (fixed odd weights, wrapping) agrees. Other genes: pymoo's distances."""

    def _do(self, pop, other, is_duplicate):
        X = np.asarray(self.func(pop))
        Y = None if other is None else np.asarray(self.func(other))
        if not all(a.dtype.kind in "iu" and a.ndim == 2 and (not a.size or -2 ** 53 < a.min() and a.max() < 2 ** 53)
                   for a in ((X,) if Y is None else (X, Y))):
            return super()._do(pop, other, is_duplicate)
        weights = np.random.default_rng(0).integers(0, 2 ** 62, X.shape[1], dtype=np.int64) * 2 + 1
        earlier: dict[int, list[np.ndarray]] = {}
        if Y is not None:
            for key, row in zip((Y.astype(np.int64) @ weights).tolist(), Y):
                earlier.setdefault(key, []).append(row)
        for i, (key, row) in enumerate(zip((X.astype(np.int64) @ weights).tolist(), X)):
            rows = earlier.setdefault(key, [])
            if any(np.array_equal(row, r) for r in rows):
                is_duplicate[i] = True
            if Y is None:
                rows.append(row)
        return is_duplicate


def operators(space, layer_moves: float = LAYER_MOVE_SHARE) -> dict:
    """Sampling, crossover, mutation and duplicate elimination for a pymoo genetic algorithm."""
    categorical = categorical_mask(space)
    return dict(sampling=GeneSampling(), crossover=GeneCrossover(categorical),
                mutation=GeneMutation(categorical, roles=layer_roles(space), layer_moves=layer_moves),
                eliminate_duplicates=WholeDuplicates())
