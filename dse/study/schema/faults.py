"""Study schema: the ``faults`` section (which failures fault tolerance is measured over)."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, NonNegativeInt, PositiveInt

from . import limits
from .common import StrictModel


class MonteCarloSpec(StrictModel):
    """Random multi-chiplet failures: ``samples`` sets of ``failures`` chiplets each (0 samples: off)."""

    #: chiplets failing together in one sample
    failures: Annotated[PositiveInt, limits.at_most(limits.MC_FAILURES)] = 2
    #: random failure sets (0: off)
    samples: NonNegativeInt = Field(0, le=10_000)
    #: random seed of the failure sets
    seed: Annotated[NonNegativeInt, limits.at_most(limits.SEED)] = 0


class FaultsSpec(StrictModel):
    """Single failures are every chiplet and, with ``links``, every physical link of the package (each
    equally likely). ``failed_router``: a failed chiplet's router keeps forwarding (``forwards``, as on
    an active interposer that survives the die) or fails with it (``fails``: routes through it detour)."""

    #: true: every single link failure too (traffic detours around it)
    links: bool = False
    #: forwards: a failed chiplet's router keeps forwarding; fails: it dies with the chiplet
    failed_router: Literal["forwards", "fails"] = "forwards"
    #: random multi-chiplet failures
    monte_carlo: MonteCarloSpec = MonteCarloSpec()
