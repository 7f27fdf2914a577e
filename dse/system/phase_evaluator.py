"""The base of an evaluator a phase builds over the system evaluator (dse.serving.package,
dse.training.package): it keeps the system's decision vectors, so designs, their decoding and the package
evaluators underneath are the system evaluator's, handed on by explicit delegation; a phase adds its own
columns (`columns`) and metrics (`metrics_array`, `design_metrics`)."""
from __future__ import annotations

import numpy as np

from ..model.contract import DecodedDesigns, PopulationEvaluator
from ..study.space import Design
from .evaluator import SystemEvaluator


class PhaseEvaluator(PopulationEvaluator):
    """An evaluator over ``system``'s designs (module docstring)."""

    def __init__(self, system: SystemEvaluator):
        self.system = system
        self.space = system.space

    def designs(self, X: np.ndarray) -> list[Design]:
        return self.system.designs(X)

    def decode(self, X: np.ndarray) -> DecodedDesigns:
        return self.system.decode(X)

    def package_evaluators(self) -> list:
        return self.system.package_evaluators()
