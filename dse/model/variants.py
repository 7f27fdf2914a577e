"""Package variants: topology, link technology and memory kinds chosen by the search.

A study may list several topologies (``hardware.package.topology: [mesh, torus]``), link technologies
(``hardware.package.link: [a, b]``) or kinds for a memory (``hardware.memory[i].kind: [hbm3, hbm3e]``).
Each combination is a *variant* (`Study.variants`): a concrete study with its own memory and link
tables and route bank, hence its own `Evaluator`. The
design space gains one gene, ``variant``; `VariantEvaluator` sends each design to its variant's
evaluator and puts the results back in order. Operator costs do not depend on the variant: the workload
is extracted once and shared.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..study.space import Design, Space
from .evaluator import Evaluator
from .metrics import METRICS


class VariantEvaluator:
    """The `Evaluator` interface over several package variants (see module docstring)."""

    def __init__(self, labels: list[str], evaluators: list[Evaluator], kinds: list[tuple[str | None, str | None]],
                 space: Space):
        self.labels, self.evaluators, self.kinds, self.space = labels, evaluators, kinds, space
        self.gene = space.slices["variant"].start

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
        """The variant a design names by its topology, link and memory kinds (unnamed ones match any)."""
        for v, (ev, (hbm, ddr)) in enumerate(zip(self.evaluators, self.kinds)):
            if (design.link == ev.link and design.topology in (None, ev.topology)
                    and design.hbm_kind in (None, hbm) and design.ddr_kind in (None, ddr)):
                return v
        raise ValueError(f"no variant of the study has topology {design.topology!r}, link {design.link!r}, "
                         f"HBM {design.hbm_kind!r} and DDR {design.ddr_kind!r}; variants: {'; '.join(self.labels)}")

    def _by_variant(self, variant: np.ndarray, run) -> np.ndarray:
        out = np.empty((len(variant), len(METRICS)))
        for v in np.unique(variant):
            rows = np.where(variant == v)[0]
            out[rows] = run(self.evaluators[v], rows)
        return out

    def metrics_array(self, X: np.ndarray, with_faults: bool = True) -> np.ndarray:
        X = np.asarray(X, dtype=np.int64).reshape(-1, self.space.n_var)
        return self._by_variant(self.variant_of(X), lambda ev, rows: ev.metrics_array(X[rows], with_faults))

    def __call__(self, X: np.ndarray, with_faults: bool = True) -> pd.DataFrame:
        return pd.DataFrame(self.metrics_array(X, with_faults), columns=METRICS)

    def evaluate_designs(self, designs: list[Design], with_faults: bool = True) -> pd.DataFrame:
        variant = np.array([self.variant_for(d) for d in designs])
        out = self._by_variant(variant, lambda ev, rows: ev.evaluate_designs([designs[i] for i in rows],
                                                                          with_faults).to_numpy())
        return pd.DataFrame(out, columns=METRICS)

    def designs(self, X: np.ndarray) -> list[Design]:
        X = np.asarray(X, dtype=np.int64).reshape(-1, self.space.n_var)
        out = []
        for x, v in zip(X, self.variant_of(X)):
            design = self.evaluators[v].designs(x[None, :])[0]
            design.hbm_kind, design.ddr_kind = self.kinds[v]
            out.append(design)
        return out

    def decode(self, X: np.ndarray):
        return self.evaluators[0].decode(X)

    def failure_report(self, design: Design) -> pd.DataFrame:
        return self.evaluators[self.variant_for(design)].failure_report(design)

    def link_failure_report(self, design: Design) -> pd.DataFrame:
        return self.evaluators[self.variant_for(design)].link_failure_report(design)

    def remapped(self, design: Design, failed: list[int]) -> Design | None:
        return self.evaluators[self.variant_for(design)].remapped(design, failed)
