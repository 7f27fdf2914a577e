"""Study schema: the ``faults`` section (which failures fault tolerance is measured over)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveInt

from .common import StrictModel


class MonteCarloSpec(StrictModel):
    """Random multi-chiplet failures: ``samples`` sets of ``failures`` chiplets each (0 samples: off)."""

    failures: PositiveInt = 2
    samples: NonNegativeInt = Field(0, le=10_000)
    seed: int = 0


class FaultsSpec(StrictModel):
    """Single failures are every chiplet and, with ``links``, every physical link of the package (each
    equally likely). ``failed_router``: a failed chiplet's router keeps forwarding (``forwards``, as on
    an active interposer that survives the die) or fails with it (``fails``: routes through it detour)."""

    links: bool = False
    failed_router: Literal["forwards", "fails"] = "forwards"
    monte_carlo: MonteCarloSpec = MonteCarloSpec()
