"""Caps on the sizes a study may ask for, each with the reason it exists.

A study past a cap would run out of memory or time (a 32 x 32 mesh took 6 GiB within 18 s of
``dse validate``; a 50,000-chiplet library over a minute) or overflow the models' arithmetic (10^9 HBM
stacks divided by zero). Every cap is far above the bundled studies, tests and benchmarks and above the
packages built so far; the error that enforces one names the key, the cap and this reason.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import AfterValidator


@dataclass(frozen=True)
class Cap:
    limit: int
    why: str

    def message(self, what: str = "") -> str:
        return f"{what + ' ' if what else ''}at most {self.limit:,} ({self.why})"


#: rows and columns of the package mesh (each)
MESH_SIDE = Cap(16, "256 chiplet slots; the route tables of every package shape grow with the slots squared: "
                    "rows and cols [1, 16] already take about 1 GB")
#: chiplet kinds of the library, every combination of ``options`` counted
LIBRARY = Cap(64, "each kind costs every operator of the workload once; a 50,000-kind library took minutes")
#: HBM stacks on one package
HBM_STACKS = Cap(128, "the largest packages built carry 8 to 16 stacks")
#: DDR/LPDDR channels of one package
DDR_CHANNELS = Cap(64, "a server socket has 8 to 12 channels")
#: copies of a unit (``mapping.max_replicas``) and tensor-parallel shards (``tp``)
COPIES = Cap(256, "one per chiplet slot of the largest mesh")
#: sequences served together
BATCH = Cap(65_536, "the operator tables hold batch x context x width products")
#: tokens of context
CONTEXT = Cap(10_000_000, "the longest context windows published hold 10 M tokens")
#: evaluations of one search: population x generations
EVALUATIONS = Cap(1_000_000, "every evaluated design is kept in memory and in evaluations.csv, about 1 KB each")
#: chiplets failing together in one Monte Carlo set
MC_FAILURES = Cap(256, "one per chiplet slot of the largest mesh")
#: nodes of an ensemble and the step scenarios it keeps
ENSEMBLE_NODES = Cap(256, "each node is a model of its own, extracted once")
SCENARIOS = Cap(4_096, "every design is evaluated once per scenario")
#: characters of the study name (it names the results folder and its hidden siblings)
NAME_CHARS = Cap(100, "it names the results folder, and file names end at 255 bytes")
#: random seeds (numpy's legacy generators take 0 .. 2**32 - 1)
SEED = Cap(2**32 - 1, "numpy's seed range")


def at_most(cap: Cap) -> AfterValidator:
    """A pydantic check: a number (or the high end of a ``(low, high)`` range) is at most ``cap``."""
    def check(value: Any) -> Any:
        high = value[1] if isinstance(value, tuple) else value
        if high > cap.limit:
            raise ValueError(cap.message())
        return value
    return AfterValidator(check)
