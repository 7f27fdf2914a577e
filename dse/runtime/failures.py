"""Chiplet failures over a scenario: explicit events and random failures at a chiplet MTBF.

Random failures: each chiplet of the design fails after an exponential time of mean ``chiplet_mtbf_h``
(a constant failure rate, the usual model of a component's useful life, e.g. JEDEC JEP122's failure-rate
figures), is repaired ``repair_h`` later and may fail again; drawn from ``seed``. An outage is a
(chiplet, start, end) triple, end ``inf`` when never repaired."""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..errors import StudyError
from .scenario import FailuresSpec

HOUR = 3600.0


class Outage(NamedTuple):
    chiplet: int
    start_s: float
    end_s: float


def outages(spec: FailuresSpec, chiplets: int, horizon_s: float) -> list[Outage]:
    """Every outage within the horizon, explicit and random, by start time."""
    out = []
    for i, e in enumerate(spec.events):
        if e.chiplet >= chiplets:
            raise StudyError(f"chiplet {e.chiplet} is not in the design (slots 0..{chiplets - 1})",
                             key=f"failures.events.{i}.chiplet")
        out.append(Outage(e.chiplet, e.t_s, e.t_s + e.repair_s if e.repair_s else math.inf))
    if spec.chiplet_mtbf_h:
        rng = np.random.default_rng(spec.seed)
        repair = spec.repair_h * HOUR if spec.repair_h else math.inf
        for c in range(chiplets):
            t = rng.exponential(spec.chiplet_mtbf_h * HOUR)
            while t < horizon_s:
                out.append(Outage(c, t, t + repair))
                t += repair + rng.exponential(spec.chiplet_mtbf_h * HOUR)
    return sorted(out, key=lambda o: (o.start_s, o.chiplet))


def failed_at(outs: list[Outage], t: float) -> frozenset[int]:
    """Chiplets down at time ``t``."""
    return frozenset(o.chiplet for o in outs if o.start_s <= t < o.end_s)


def change_times(outs: list[Outage], t0: float, t1: float) -> list[float]:
    """Times in ``(t0, t1)`` where the failed set changes."""
    return sorted({x for o in outs for x in (o.start_s, o.end_s) if t0 < x < t1})
