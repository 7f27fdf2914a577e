"""A design's verdict: feasible or not, and why, judged by the constraints the search and ``dse run``
use (dse.model.objectives.violations over constraint_matrix), each violated one in a line of words."""
from __future__ import annotations

import math
from typing import NamedTuple

import pandas as pd

from arch.technology import reticle_limit_mm2

from ..model.objectives import violations
from ..study.spec import Study

GIB = 2**30


class Verdict(NamedTuple):
    """Whether a design is feasible, and one line per violated constraint (empty when feasible)."""

    feasible: bool
    reasons: list[str]


def design_verdict(metrics: pd.Series, study: Study, memory_slots: dict[int, int] | None = None) -> Verdict:
    """The verdict on one design from its metrics (every column of the study's evaluator);
    ``memory_slots``: chiplet slot -> unit copies without a memory path (an evaluator's
    ``memory_path_report``; a system's first package), to name the slots."""
    broken = violations(metrics.to_frame().T.infer_objects(), study)[0]
    return Verdict(not broken, [reason(name, value, metrics, study, memory_slots or {})
                                for name, value in broken.items()])


def reason(name: str, value: float, metrics: pd.Series, study: Study, memory_slots: dict[int, int]) -> str:
    """One line saying how the constraint ``name`` (dse.model.objectives.constraint_names) is violated."""
    if math.isnan(value):
        return f"{name}: not evaluable (NaN)"
    if name == "capacity_short_gib":
        return (f"capacity short by {value:.3g} GiB: the design's bytes do not fit its HBM (an SRAM-resident "
                f"chiplet's SRAM) plus DDR"
                if math.isfinite(value) else "capacity: the layout cannot be costed (no whole micro-batches)")
    if name == "unplaced_experts":
        return f"{int(value)} experts unplaced: one-to-one mapping needs a chiplet per expert"
    if name == "units_without_memory":
        where = ", ".join(f"{k} on slot {s}" for s, k in sorted(memory_slots.items()))
        if where and sum(memory_slots.values()) != int(value):      # a system: the slots of its first package
            where = f"first package: {where}"
        return (f"{int(value)} unit copies without a memory path (no HBM stack on their chiplet, no DDR)"
                f"{': ' + where if where else ''}")
    if name == "reticle_over":
        return (f"largest die {float(metrics['max_die_mm2']):.0f} mm2 over the reticle limit "
                f"{reticle_limit_mm2():.0f} mm2")
    if name.endswith("_over") and name[: -len("_over")] in ("area_mm2", "peak_power_w", "cost_usd"):
        budget = name[: -len("_over")]
        return (f"{budget} {float(metrics[budget]):.4g} over constraints.{budget} "
                f"{getattr(study.constraints, budget):.4g}")
    if name == "quality_short":
        kept = study.constraints.min_quality - value
        return (f"quality {kept:.4g} below constraints.min_quality {study.constraints.min_quality:.4g} "
                f"(the score kept at the study's precision and experts: dse quality)")
    if name == "request_rate_over":
        saturation = float(metrics["saturation_req_s"])
        return (f"request rate {study.serving.request_rate:.4g} req/s over the design's saturation rate "
                f"{saturation:.4g} req/s")
    return f"{name} violated by {value:.4g}"
