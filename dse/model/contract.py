"""The evaluator contract: what every evaluator of a study takes and returns.

An evaluator scores a population of designs of one study's design space. It takes either decision
vectors (``X``: ``[P, space.n_var]`` integer genes) or design records (`dse.study.space.Design`, as read
from a file), and returns a metrics table: one row per design, one named column per metric (units in the
names). A subclass implements the two array methods (`metrics_array`, `design_metrics`), `designs` and
`columns`; the DataFrame methods (`__call__`, `evaluate_designs`) are built here once, as pymoo's
``Problem.evaluate`` wraps each problem's ``_evaluate``.

Evaluators compose by explicit delegation: the package evaluator (dse.model.evaluator.Evaluator), its
variants (dse.model.variants), systems of packages (dse.system.evaluator) and the phases built over a
system (serving, training) each hold the evaluator they build on and call it through this contract.
`package_evaluators` names the package evaluators under any of them (the search's screening fidelity
switches them).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..study.space import Design, Space


class DecodedDesigns(NamedTuple):
    """A population's packages and mappings as the kernels read them (dse.model.placement)."""

    rows: np.ndarray        # [P] mesh rows
    cols: np.ndarray        # [P] mesh columns
    kind: np.ndarray        # [P, S] chiplet kind per slot
    stacks: np.ndarray      # [P, S] HBM stacks per slot
    ddr: np.ndarray         # [P] DDR channels of the package
    slots: np.ndarray       # [P, U, C] chiplet slot of each copy of each unit (-1: none)
    ncopy: np.ndarray       # [P, U] copies of each unit
    unplaced: np.ndarray    # [P] experts the decoding could not place

    @property
    def chiplets(self) -> np.ndarray:
        """Chiplets in each design's package."""
        return self.rows * self.cols

    def take(self, rows: slice | np.ndarray) -> "DecodedDesigns":
        """The designs ``rows`` of the population."""
        return DecodedDesigns(*(a[rows] for a in self))


class DecodedPackages(NamedTuple):
    """A population's packages alone (`DecodedDesigns` without the units)."""

    rows: np.ndarray        # [P] mesh rows
    cols: np.ndarray        # [P] mesh columns
    kind: np.ndarray        # [P, S] chiplet kind per slot
    stacks: np.ndarray      # [P, S] HBM stacks per slot
    ddr: np.ndarray         # [P] DDR channels of the package

    @property
    def chiplets(self) -> np.ndarray:
        """Chiplets in each design's package."""
        return self.rows * self.cols


class FaultsWithin(NamedTuple):
    """``with_faults`` for the designs whose intact metrics lie within ``limits`` only: ``limits[j]`` bounds
    the population kernel's metric column j (dse.model.metrics, ``N_KERNEL_METRICS`` of them; +inf: no
    bound), and a design with a metric above its bound skips the failure pass, its fault columns as
    ``with_faults=False`` leaves them (dse.model.objectives.fault_limits: the bounds beyond which a study's
    design is surely infeasible). Every other column, and a design within bounds, is as with
    ``with_faults=True``. The package evaluator (dse.model.evaluator), its variants and its quality wrapper
    honour it; any other evaluator reads it as ``True`` (a truthy value: all the failures)."""

    limits: np.ndarray


class PopulationEvaluator(ABC):
    """Scores populations of one study's designs (module docstring).

    ``space`` is the design space of the decision vectors it takes."""

    space: Space

    @property
    @abstractmethod
    def columns(self) -> list[str]:
        """Names of the columns `metrics_array` and `design_metrics` return, in order."""

    @property
    def metric_names(self) -> list[str]:
        """The columns the DataFrame methods report (default: every column)."""
        return self.columns

    @abstractmethod
    def metrics_array(self, X: np.ndarray, with_faults: bool = True) -> np.ndarray:
        """Every metric (`columns`) of the decision vectors ``X``: ``[P, len(columns)]``; ``with_faults``: a
        bool, or `FaultsWithin` (the failure pass for some designs only)."""

    @abstractmethod
    def design_metrics(self, designs: list[Design], with_faults: bool = True) -> np.ndarray:
        """Every metric (`columns`) of designs given directly (hand-written or read back)."""

    @abstractmethod
    def designs(self, X: np.ndarray) -> list[Design]:
        """The design records the decision vectors ``X`` stand for."""

    def designs_and_placements(self, X: np.ndarray) -> tuple[list[Design], list | None]:
        """`designs` of ``X`` and, where this evaluator has them as arrays, each record's placement as
        dse.model.records.placement_arrays gives it (copies of each unit, every unit's slots one after
        another, int32, in the placement's order); None: the caller reads the records (the default)."""
        return self.designs(X), None

    @abstractmethod
    def decode(self, X: np.ndarray) -> DecodedDesigns:
        """The packages and mappings of the decision vectors ``X`` as arrays."""

    def decode_packages(self, X: np.ndarray) -> DecodedPackages:
        """The packages of `decode` alone, for a caller that reads only them (an evaluator may give them
        without decoding the units)."""
        d = self.decode(X)
        return DecodedPackages(d.rows, d.cols, d.kind, d.stacks, d.ddr)

    @abstractmethod
    def package_evaluators(self) -> list:
        """The package evaluators (dse.model.evaluator.Evaluator) this evaluator builds on."""

    def vectors(self, X: np.ndarray) -> np.ndarray:
        """``X`` as an ``[P, n_var]`` integer array."""
        return np.asarray(X, dtype=np.int64).reshape(-1, self.space.n_var)

    def __call__(self, X: np.ndarray, with_faults: bool = True) -> pd.DataFrame:
        """The metrics table of the decision vectors ``X``."""
        return self.table(self.metrics_array(X, with_faults))

    def evaluate_designs(self, designs: list[Design], with_faults: bool = True) -> pd.DataFrame:
        """The metrics table of designs given directly."""
        return self.table(self.design_metrics(designs, with_faults))

    def table(self, metrics: np.ndarray) -> pd.DataFrame:
        """A metrics array as the table the DataFrame methods return (`metric_names` columns)."""
        frame = pd.DataFrame(metrics, columns=self.columns)
        return frame if self.metric_names == self.columns else frame[self.metric_names]
