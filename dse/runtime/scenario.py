"""The scenario file of `dse timeline` (docs/runtime.md): horizon and windows, expert popularity over
time, offered load, failures and repairs, spares, and how migration shares the package with serving.

Read as strictly as a study (dse.study.schema.common.StrictModel: unknown keys, wrong types and
non-finite numbers are errors; YAML through dse.study.yaml_input), every problem one `StudyError` naming
the key."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, NonNegativeInt, ValidationError, model_validator

from ..errors import StudyError
from ..study.schema.common import StrictModel, Tuple
from ..study.yaml_input import read_yaml_file

#: windows a scenario may have (a day of minutes); more is a typo, and costs a population of that size
MAX_WINDOWS = 1440
Positive = Annotated[float, Field(gt=0)]
NonNegative = Annotated[float, Field(ge=0)]


class PopularitySpec(StrictModel):
    """Expert popularity over time. The study's routing (zipf, dirichlet, uniform, a trace) gives each
    layer's popularity shape; ``drift`` moves which experts are hot: ``none``; ``rotate`` (the popularity
    ranks advance ``rate_per_s`` experts per second, the hot set rotating through the experts);
    ``random_walk`` (``rate_per_s`` random swaps of an expert's popularity with another's per second and
    layer, seeded by ``seed``). The shape is kept, only the experts carrying it change (TensorRT-LLM's
    observation: hot experts stable for tens to hundreds of steps, then moving)."""

    drift: Literal["none", "rotate", "random_walk"] = "none"
    rate_per_s: NonNegative = 0.0
    seed: NonNegativeInt = 0


class LoadSpec(StrictModel):
    """Offered load: ``tokens_per_s`` (None: saturating, every window serves what the design can);
    ``diurnal``: ``tokens_per_s * (1 + amplitude * sin(2 pi t / period_s))``."""

    kind: Literal["constant", "diurnal"] = "constant"
    tokens_per_s: Positive | None = None
    amplitude: Annotated[float, Field(ge=0, le=1)] = 0.0
    period_s: Positive = 86400.0


class FailureEvent(StrictModel):
    """A chiplet (its slot in the design) failing at ``t_s``, back after ``repair_s`` (None: never)."""

    t_s: NonNegative
    chiplet: NonNegativeInt
    repair_s: Positive | None = None


class FailuresSpec(StrictModel):
    """Failures: explicit ``events`` and random chiplet failures at ``chiplet_mtbf_h`` (mean time between
    failures of one chiplet, exponential, seeded) each repaired after ``repair_h``; ``spares`` cold spare
    chiplets in the package that can take a failed chiplet's place (its role and slot in the network)."""

    events: Tuple(tuple[FailureEvent, ...]) = Field((), max_length=10_000)
    chiplet_mtbf_h: Positive | None = None
    repair_h: Positive | None = None
    seed: NonNegativeInt = 0
    spares: NonNegativeInt = 0


class MigrationSpec(StrictModel):
    """How a move shares the package: ``stall`` (serving stops while the weights move, at the full
    modelled bandwidth) or ``background`` (the weights stream at ``share`` of that bandwidth, taking
    ``1 / share`` as long, while the old mapping keeps serving: throughput stays the old mapping's until
    the move lands; contention with serving's own traffic is not modelled); ``bandwidth_scale`` scales the
    modelled bandwidths a move uses (a what-if knob). No policy acts while a move is in flight."""

    mode: Literal["stall", "background"] = "stall"
    share: Annotated[float, Field(gt=0, le=1)] = 0.5
    bandwidth_scale: Positive = 1.0


class Scenario(StrictModel):
    """A scenario: ``horizon_s`` cut into windows of ``window_s``; popularity, load, failures, migration."""

    name: str = "scenario"
    horizon_s: Positive
    window_s: Positive
    popularity: PopularitySpec = PopularitySpec()
    load: LoadSpec = LoadSpec()
    failures: FailuresSpec = FailuresSpec()
    migration: MigrationSpec = MigrationSpec()

    @model_validator(mode="after")
    def _windows(self):
        if self.window_s > self.horizon_s:
            raise ValueError(f"window_s {self.window_s:g} is longer than horizon_s {self.horizon_s:g}")
        if self.windows > MAX_WINDOWS:
            raise ValueError(f"{self.windows} windows; at most {MAX_WINDOWS} (lengthen window_s)")
        return self

    @property
    def windows(self) -> int:
        """Windows in the horizon (the last may be shorter)."""
        return int(-(-self.horizon_s // self.window_s))

    def starts(self) -> list[float]:
        """Start time of each window, s."""
        return [i * self.window_s for i in range(self.windows)]

    def lengths(self) -> list[float]:
        """Length of each window, s."""
        return [min(self.window_s, self.horizon_s - t) for t in self.starts()]


def scenario_from_dict(data, source: str | None = None) -> Scenario:
    """A `Scenario` from parsed YAML; a `StudyError` naming the first bad key."""
    if not isinstance(data, dict):
        raise StudyError("a scenario file is a mapping of keys (horizon_s, window_s, popularity, ...)",
                         source=source)
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "scenario"
        raise StudyError(err["msg"].removeprefix("Value error, "), key=key, source=source) from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file."""
    return scenario_from_dict(read_yaml_file(path, "scenario file"), source=str(path))
