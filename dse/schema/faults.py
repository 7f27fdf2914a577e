"""Study schema: the ``faults`` section (which failures fault tolerance is measured over)."""
from __future__ import annotations

from pydantic import Field, NonNegativeInt, PositiveInt

from .common import StrictModel


class MonteCarloSpec(StrictModel):
    """Random multi-chiplet failures: ``samples`` sets of ``failures`` chiplets each (0 samples: off)."""

    failures: PositiveInt = 2
    samples: NonNegativeInt = Field(0, le=10_000)
    seed: int = 0


class FaultsSpec(StrictModel):
    monte_carlo: MonteCarloSpec = MonteCarloSpec()
