"""Package variants: topology, link technology, memory kinds and unit precisions chosen by the search.

A study may list several topologies (``hardware.package.topology: [mesh, torus]``), link technologies
(``hardware.package.link: [a, b]``), kinds for a memory (``hardware.memory[i].kind: [hbm3, hbm3e]``) or
precisions for its units (``search.precision``). Each combination is a *variant* (`Study.variants`): a
concrete study with its own memory and link tables and route bank, hence its own `Evaluator`. The
design space gains one gene, ``variant``; `VariantEvaluator` sends each design to its variant's
evaluator and puts the results back in order. Operator costs do not depend on the package: the workload
is extracted once per precision and shared (a precision assignment's tables: dse.model.unit_precision).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..study.space import Design, Space
from .contract import DecodedDesigns, PopulationEvaluator
from .evaluator import Evaluator
from .metrics import METRICS
from .package_figures import PACKAGE_FIGURES


class VariantEvaluator(PopulationEvaluator):
    """The evaluator contract (dse.model.contract) over several package variants (see module docstring);
    columns `METRICS`."""

    def __init__(self, labels: list[str], evaluators: list[Evaluator], kinds: list[tuple[str | None, str | None]],
                 space: Space, precisions: list[str | None] | None = None):
        self.labels, self.evaluators, self.kinds, self.space = labels, evaluators, kinds, space
        self.precisions = precisions or [None] * len(evaluators)     # search.precision's assignment per variant
        self.gene = space.slices["variant"].start

    @property
    def columns(self) -> list[str]:
        return METRICS

    def package_evaluators(self) -> list[Evaluator]:
        return list(self.evaluators)

    # the parts of the study every variant shares
    @property
    def tables(self):
        return self.evaluators[0].tables

    @property
    def max_copies(self) -> int:
        return self.evaluators[0].max_copies

    def variant_of(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=np.int64).reshape(-1, self.space.n_var)[:, self.gene]

    def variant_for(self, design: Design) -> int:
        """The variant a design names by its topology, link, memory kinds and precisions (unnamed ones
        match any)."""
        for v, (ev, (hbm, ddr), precision) in enumerate(zip(self.evaluators, self.kinds, self.precisions)):
            if (design.link == ev.link and design.topology in (None, ev.topology)
                    and design.hbm_kind in (None, hbm) and design.ddr_kind in (None, ddr)
                    and design.precision in (None, precision)):
                return v
        raise ValueError(f"no variant of the study has topology {design.topology!r}, link {design.link!r}, "
                         f"HBM {design.hbm_kind!r}, DDR {design.ddr_kind!r} and precision {design.precision!r}; "
                         f"variants: {'; '.join(self.labels)}")

    def _by_variant(self, variant: np.ndarray, run) -> np.ndarray:
        out = np.empty((len(variant), len(METRICS)))
        for v in np.unique(variant):
            rows = np.where(variant == v)[0]
            out[rows] = run(self.evaluators[v], rows)
        return out

    def metrics_array(self, X: np.ndarray, with_faults: bool = True, package: np.ndarray | None = None) -> np.ndarray:
        """Every metric of ``X``, each design by its variant's evaluator (``package``: their package
        figures when known, dse.model.evaluator.Evaluator.metrics_array)."""
        X = self.vectors(X)
        return self._by_variant(self.variant_of(X), lambda ev, rows: ev.metrics_array(
            X[rows], with_faults, None if package is None else package[rows]))

    def package_figures(self, X: np.ndarray) -> np.ndarray:
        """Each design's package figures by its variant's evaluator: ``[P, 6]``."""
        X = self.vectors(X)
        variant = self.variant_of(X)
        out = np.empty((len(X), len(PACKAGE_FIGURES)))
        for v in np.unique(variant):
            rows = np.where(variant == v)[0]
            out[rows] = self.evaluators[v].package_figures(X[rows])
        return out

    def design_metrics(self, designs: list[Design], with_faults: bool = True) -> np.ndarray:
        variant = np.array([self.variant_for(d) for d in designs])
        return self._by_variant(variant, lambda ev, rows: ev.design_metrics([designs[i] for i in rows], with_faults))

    def designs(self, X: np.ndarray) -> list[Design]:
        X = self.vectors(X)
        out = []
        for x, v in zip(X, self.variant_of(X)):
            design = self.evaluators[v].designs(x[None, :])[0]
            design.hbm_kind, design.ddr_kind = self.kinds[v]
            design.precision = self.precisions[v]
            out.append(design)
        return out

    def decode(self, X: np.ndarray) -> DecodedDesigns:
        return self.evaluators[0].decode(X)

    def failure_report(self, design: Design) -> pd.DataFrame:
        return self.evaluators[self.variant_for(design)].failure_report(design)

    def link_failure_report(self, design: Design) -> pd.DataFrame:
        return self.evaluators[self.variant_for(design)].link_failure_report(design)

    def memory_path_report(self, design: Design) -> dict[int, int]:
        return self.evaluators[self.variant_for(design)].memory_path_report(design)

    def remapped(self, design: Design, failed: list[int]) -> Design | None:
        return self.evaluators[self.variant_for(design)].remapped(design, failed)
