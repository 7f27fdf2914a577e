"""Search algorithms by the name a study gives in ``search.algorithm``.

Every algorithm is driven one generation at a time by dse.search.loop (pymoo's ``setup`` / ``has_next`` /
``next``), so they share seeding, progress, convergence tracking, checkpoints and parallel evaluation:

=============  ================================================================================
nsga2          NSGA-II (Deb et al. 2002): non-dominated sorting and crowding distance
nsga3          NSGA-III (Deb & Jain 2014): reference directions instead of crowding
agemoea2       AGE-MOEA-II (Panichella 2022): survival by the estimated geometry of the front
smsemoa        SMS-EMOA (Beume et al. 2007): drops the least hypervolume contributor
moead          MOEA/D (Zhang & Li 2007), batch variant, neighbours replaced by Deb's feasibility
               rules so budgets stay constraints (pymoo's own MOEA/D refuses constraints)
random         uniform random designs, ``population`` per generation (baseline)
exhaustive     every decision vector of a small space, in batches (baseline; the true front)
=============  ================================================================================

The genetic algorithms take their sampling and variation operators from dse.search.variables.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import pymoo.algorithms.moo.age as pymoo_age
import pymoo.algorithms.moo.age2 as pymoo_age2
from numba.extending import is_jitted
from pymoo.algorithms.moo.age2 import AGEMOEA2
from pymoo.algorithms.moo.moead import ParallelMOEAD
from pymoo.algorithms.moo.nsga2 import NSGA2
from pymoo.algorithms.moo.nsga3 import NSGA3
from pymoo.algorithms.moo.sms import SMSEMOA
from pymoo.core.algorithm import Algorithm
from pymoo.decomposition.pbi import PBI
from pymoo.decomposition.tchebicheff import Tchebicheff
from pymoo.util.reference_direction import UniformReferenceDirectionFactory
from scipy.spatial.distance import cdist

from ..errors import StudyError
from .variables import LAYER_MOVE_SHARE, MAX_ENUMERATION, enumerate_batch, operators, space_size

#: designs per batch of the exhaustive walk (at least; the population if larger)
ENUMERATION_BATCH = 1024


def reference_directions(n_obj: int, n_points: int) -> np.ndarray:
    """Exactly ``n_points`` unit-simplex directions, spread evenly and deterministically.

    Das & Dennis (1998) lattice with the most partitions p giving at most ``n_points`` directions,
    filled up with points of the (p + 1) lattice chosen farthest-first (greedy max-min distance).
    """
    p = 1
    while math.comb(p + 1 + n_obj - 1, n_obj - 1) <= n_points:
        p += 1
    chosen = UniformReferenceDirectionFactory(n_obj, n_partitions=p).do()
    if len(chosen) > n_points:       # fewer points than objectives: the first n_points axes
        return chosen[:n_points]
    candidates = UniformReferenceDirectionFactory(n_obj, n_partitions=p + 1).do()
    nearest = cdist(candidates, chosen).min(axis=1)
    extra = []
    while len(chosen) + len(extra) < n_points:
        i = int(np.argmax(nearest))
        extra.append(candidates[i])
        nearest = np.minimum(nearest, np.linalg.norm(candidates - candidates[i], axis=1))
    return np.vstack([chosen] + extra) if extra else chosen


class Baseline:
    """A search that proposes whole batches without learning: the interface of a pymoo `Algorithm`
    that dse.search.loop uses (``setup``, ``has_next``, ``next``), without pymoo's per-design objects,
    which would cost more than evaluating a design."""

    def __init__(self, batch: int):
        self.batch = batch

    def setup(self, problem, termination: tuple, seed: int | None = None):
        self.problem, self.generations, self.seed = problem, termination[1], seed
        self.random_state = np.random.default_rng(seed)
        self.n_gen = 0
        return self

    def has_next(self) -> bool:
        return self.n_gen < self.generations

    def next(self) -> None:
        self.problem.evaluate(self.propose())
        self.n_gen += 1

    def propose(self) -> np.ndarray:
        raise NotImplementedError


class RandomSearch(Baseline):
    """Uniform random decision vectors, ``batch`` per generation."""

    def propose(self) -> np.ndarray:
        p = self.problem
        return self.random_state.integers(p.xl, p.xu + 1, size=(self.batch, p.n_var))


class Enumeration(Baseline):
    """Every decision vector in mixed-radix order, ``batch`` per generation."""

    def propose(self) -> np.ndarray:
        p = self.problem
        start = self.n_gen * self.batch
        return enumerate_batch(p.xl, p.xu, start, min(start + self.batch, space_size(p.xl, p.xu)))


class ConstrainedMOEAD(ParallelMOEAD):
    """MOEA/D evaluating a generation at once; a neighbour is replaced by feasibility rules.

    The offspring replaces neighbour j when both are feasible and its decomposed value is lower, or
    when its constraint violation is lower (Deb 2000 feasibility rules, as in Jan & Zhang 2010).
    Objectives are decomposed after normalising by the ideal point and the population's worst values
    (Zhang & Li 2007, section V-E): the objectives differ by orders of magnitude (seconds vs mm2).
    """

    def _setup(self, problem, **kwargs):
        self.pop_size = len(self.ref_dirs)
        self.neighbors = np.argsort(cdist(self.ref_dirs, self.ref_dirs), axis=1, kind="stable")[:, : self.n_neighbors]
        if self.decomposition is None:
            self.decomposition = Tchebicheff() if problem.n_obj <= 2 else PBI()

    def _replace(self, k, off):
        N = self.neighbors[k]
        pop = self.pop
        scale = np.maximum(pop.get("F").max(axis=0) - self.ideal, 1e-12)
        zero = np.zeros_like(self.ideal)
        FV = self.decomposition.do((pop[N].get("F") - self.ideal) / scale, weights=self.ref_dirs[N, :], ideal_point=zero)
        off_FV = self.decomposition.do(((off.F - self.ideal) / scale)[None, :], weights=self.ref_dirs[N, :],
                                       ideal_point=zero)
        cv, off_cv = pop[N].get("CV")[:, 0], float(off.CV[0])
        better = np.where((cv <= 0) & (off_cv <= 0), off_FV < FV, off_cv < cv)
        pop[N[better]] = off


@functools.cache
def _cache_age_kernels() -> None:
    """Let Numba cache AGE-MOEA(-II)'s jitted kernels on disk (pymoo 0.6 jits them without ``cache=True``).

    Their survival compiles a few Numba functions in every new process (20-40 s here); with caching only
    the first run on a machine pays it, as for the toolkit's own kernels. ``enable_caching`` is what
    numba's ``jit(cache=True)`` itself calls on the dispatcher; done once per process.
    """
    for holder in (pymoo_age, pymoo_age2, pymoo_age.AGEMOEASurvival, pymoo_age2.AGEMOEA2Survival):
        for value in list(vars(holder).values()):
            function = value.__func__ if isinstance(value, staticmethod) else value
            if is_jitted(function):
                function.enable_caching()


def make_algorithm(name: str, space, n_obj: int, population: int, generations: int,
                   layer_moves: float = LAYER_MOVE_SHARE) -> tuple[Algorithm | Baseline, int]:
    """The algorithm called ``name`` for a space, and the number of generations it will run;
    ``layer_moves``: share of offspring making a layer move (dse.search.variables)."""
    if name == "random":
        return RandomSearch(population), generations
    if name == "exhaustive":
        size = space_size(space.lower, space.upper)
        if size > MAX_ENUMERATION:
            raise StudyError(f"exhaustive enumeration needs a space of at most {MAX_ENUMERATION:,} designs; this "
                             f"one has {size:.3g} ({' x '.join(str(int(n)) for n in space.upper - space.lower + 1)});"
                             " choose nsga2, nsga3, agemoea2, smsemoa, moead or random",
                             key="search.algorithm")
        batch = max(population, ENUMERATION_BATCH)
        return Enumeration(batch), -(-size // batch)
    ops = operators(space, layer_moves)
    if name == "nsga2":
        return NSGA2(pop_size=population, **ops), generations
    if name == "nsga3":
        return NSGA3(reference_directions(n_obj, population), pop_size=population, **ops), generations
    if name == "agemoea2":
        _cache_age_kernels()
        return AGEMOEA2(pop_size=population, **ops), generations
    if name == "smsemoa":
        return SMSEMOA(pop_size=population, **ops), generations
    if name == "moead":
        ops.pop("eliminate_duplicates")
        return ConstrainedMOEAD(reference_directions(n_obj, population), n_neighbors=min(20, population),
                                **ops), generations
    raise StudyError(f"unknown algorithm {name!r}", key="search.algorithm")
