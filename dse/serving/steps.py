"""Step latencies of one design for a serving simulation: the project's step model at a grid of batch
sizes and contexts, interpolated.

A prefill of ``b`` prompts of ``L`` tokens and a decode step of ``b`` sequences holding ``L`` tokens each
are evaluated by the study's own evaluator (dse.model) on the design, at a grid of b and L (powers of
two up to the study's caps); between grid points the latency is interpolated linearly in log b and
log L (times grow smoothly with both: compute and weight and KV bytes are sums of terms linear in b and
L). The grid's error against direct evaluation is measured in tests/test_serving.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.interpolate import RegularGridInterpolator

from ..model.evaluator import Evaluator
from ..model.prepare import Prepared
from ..model.tables import build_tables
from ..study.space import Design, build_space

BATCHES = (1, 4, 16, 64, 256, 1024)
CONTEXTS = (128, 512, 2048, 8192, 32768, 131072)


def step_latency_s(prepared: Prepared, design: Design, phase: str, batch: int, context: int) -> float:
    """The evaluator's latency of one step of ``design`` with the study's workload at this phase, batch
    and context (faults off)."""
    study = prepared.study
    workload = study.workload.model_copy(update={"phase": phase, "batch": int(batch), "context": int(context)})
    changed = study.model_copy(update={"workload": workload})
    tables = build_tables(changed)
    space = build_space(changed, tables.kind_names, tables.unit_names)
    evaluator = Evaluator(tables, space, changed.hardware.package, changed.mapping.max_replicas, faults=changed.faults)
    return float(evaluator.evaluate_designs([design], with_faults=False)["latency_s"].iloc[0])


@dataclass
class StepTable:
    """Prefill and decode step latency of one design over a (batch, context) grid, interpolated."""

    batches: np.ndarray
    contexts: np.ndarray
    prefill_s: np.ndarray              # [batches, contexts]
    decode_s: np.ndarray

    def __post_init__(self):
        grid = (np.log(self.batches), np.log(self.contexts))
        self._prefill = RegularGridInterpolator(grid, np.log(self.prefill_s), bounds_error=False, fill_value=None)
        self._decode = RegularGridInterpolator(grid, np.log(self.decode_s), bounds_error=False, fill_value=None)

    def _at(self, f, batch: float, context: float) -> float:
        point = np.log([[max(batch, 1.0), max(context, 1.0)]])
        return float(np.exp(f(point)[0]))

    def prefill(self, batch: float, context: float) -> float:
        """Seconds to prefill ``batch`` prompts of ``context`` tokens."""
        return self._at(self._prefill, batch, context)

    def decode(self, batch: float, context: float) -> float:
        """Seconds of one decode step of ``batch`` sequences of ``context`` tokens."""
        return self._at(self._decode, batch, context)

    @classmethod
    def build(cls, prepared: Prepared, design: Design, max_batch: int, max_context: int) -> "StepTable":
        batches = np.array([b for b in BATCHES if b <= max(max_batch, 2)] or [1, 2], float)
        if batches[-1] < max_batch:
            batches = np.append(batches, max_batch)
        contexts = np.array([c for c in CONTEXTS if c <= max(max_context, 128)], float)
        if contexts[-1] < max_context:
            contexts = np.append(contexts, max_context)
        prefill = np.array([[step_latency_s(prepared, design, "prefill", b, c) for c in contexts] for b in batches])
        decode = np.array([[step_latency_s(prepared, design, "decode", b, c) for c in contexts] for b in batches])
        return cls(batches=batches, contexts=contexts, prefill_s=prefill, decode_s=decode)
