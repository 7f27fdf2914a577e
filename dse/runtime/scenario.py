"""The scenario file of `dse timeline` (docs/runtime.md): horizon and windows, expert popularity over
time, offered load, failures and repairs, spares, and how migration shares the package with serving.

Read as strictly as a study (dse.study.schema.common.StrictModel: unknown keys, wrong types and
non-finite numbers are errors; YAML through dse.study.yaml_input), every problem one `StudyError` naming
the key."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, NonNegativeInt, ValidationError, field_validator, model_validator

from ..errors import StudyError
from ..study.schema.common import StrictModel, Tuple
from ..study.schema.workload import relative_to_study
from ..study.yaml_input import read_yaml_file

#: windows a scenario may have (a day of minutes); more is a typo, and costs a population of that size
MAX_WINDOWS = 1440
Positive = Annotated[float, Field(gt=0)]
NonNegative = Annotated[float, Field(ge=0)]
#: drift rate cap (experts per second): 10 a second reshuffles every layer of the largest MoE (256 experts)
#: within a minute; more is a typo, and overflows the rotation's 64-bit shift (1e30 did)
MAX_DRIFT_PER_S = 10.0


class PopularitySpec(StrictModel):
    """Expert popularity over time. The study's routing (zipf, dirichlet, uniform, a trace) gives each
    layer's popularity shape; ``drift`` moves which experts are hot: ``none``; ``rotate`` (the popularity
    ranks advance ``rate_per_s`` experts per second, the hot set rotating through the experts);
    ``random_walk`` (``rate_per_s`` random swaps of an expert's popularity with another's per second and
    layer, seeded by ``seed``). The shape is kept, only the experts carrying it change (TensorRT-LLM's
    observation: hot experts stable for tens to hundreds of steps, then moving). ``trace``: which experts
    are hot in each window is read from a JSONL routing trace with time stamps (rows ``{t, layer, token,
    experts}``; dse.runtime.traces), the file given as ``trace`` (relative to the scenario file)."""

    drift: Literal["none", "rotate", "random_walk", "trace"] = "none"
    rate_per_s: Annotated[float, Field(ge=0, le=MAX_DRIFT_PER_S)] = 0.0
    seed: NonNegativeInt = 0
    trace: str | None = Field(None, min_length=1, max_length=4096)

    _trace = field_validator("trace")(lambda value, info: relative_to_study(value, info))

    @model_validator(mode="after")
    def _trace_given(self):
        if (self.drift == "trace") != (self.trace is not None):
            raise ValueError("popularity.trace (a JSONL routing trace with t) goes with drift: trace, and only with it")
        return self


class LoadSpec(StrictModel):
    """Offered load: ``tokens_per_s`` (None: saturating, every window serves what the design can);
    ``diurnal``: ``tokens_per_s * (1 + amplitude * sin(2 pi t / period_s))``; ``trace``: the requests of a
    request trace (``trace``: the files `dse serve --dataset` reads, an Azure CSV with time stamps or a JSON
    of length pairs arriving at ``rate`` requests/s), each window offered the tokens arriving in it
    (dse.runtime.traces)."""

    kind: Literal["constant", "diurnal", "trace"] = "constant"
    tokens_per_s: Positive | None = None
    amplitude: Annotated[float, Field(ge=0, le=1)] = 0.0
    period_s: Positive = 86400.0
    trace: str | None = Field(None, min_length=1, max_length=4096)
    rate: Annotated[float, Field(gt=0, le=1e6)] | None = None

    _trace = field_validator("trace")(lambda value, info: relative_to_study(value, info))

    @model_validator(mode="after")
    def _trace_given(self):
        if (self.kind == "trace") != (self.trace is not None):
            raise ValueError("load.trace (a request trace) goes with kind: trace, and only with it")
        if self.kind == "trace" and self.tokens_per_s is not None:
            raise ValueError("a request trace sets the load: leave tokens_per_s out")
        return self


class FailureEvent(StrictModel):
    """A component failing at ``t_s``, back after ``repair_s`` (None: never): ``component: chiplet`` (the
    chiplet in slot ``chiplet``), ``link`` (the package link between chiplets ``link: [a, b]``) or ``hbm``
    (HBM stack ``stack`` of chiplet ``chiplet``)."""

    t_s: NonNegative
    component: Literal["chiplet", "link", "hbm"] = "chiplet"
    chiplet: NonNegativeInt | None = None
    link: Tuple(tuple[NonNegativeInt, NonNegativeInt]) | None = None
    stack: NonNegativeInt = 0
    repair_s: Positive | None = None

    @model_validator(mode="after")
    def _names_one(self):
        if self.component == "link":
            if self.link is None or self.chiplet is not None or self.link[0] == self.link[1]:
                raise ValueError("a link failure names link: [a, b] (two chiplets), no chiplet")
        elif self.chiplet is None or self.link is not None:
            raise ValueError(f"a {self.component} failure names chiplet (its slot), no link")
        return self


class FailuresSpec(StrictModel):
    """Failures: explicit ``events`` and random failures at ``chiplet_mtbf_h``, ``link_mtbf_h`` and
    ``hbm_mtbf_h`` (mean time between failures of one chiplet, one package link, one HBM stack;
    exponential, seeded) each repaired after ``repair_h``; ``spares`` spare chiplets in the package
    that can take a failed chiplet's place (its role and slot in the network); they do not fail while
    they wait, powered and idle (dse.runtime.serving_window charges their idle power). ``reconfigurable``: chiplet
    slots whose chiplet can take another chiplet's role (its units) when that one fails, after
    ``reconfigure_s`` seconds of reconfiguration (dse.runtime.policies.on_failure)."""

    events: Tuple(tuple[FailureEvent, ...]) = Field((), max_length=10_000)
    chiplet_mtbf_h: Positive | None = None
    link_mtbf_h: Positive | None = None
    hbm_mtbf_h: Positive | None = None
    repair_h: Positive | None = None
    seed: NonNegativeInt = 0
    spares: NonNegativeInt = 0
    reconfigurable: Tuple(tuple[NonNegativeInt, ...]) = Field((), max_length=4096)
    reconfigure_s: NonNegative = 0.0


class MigrationSpec(StrictModel):
    """How a move shares the package: ``stall`` (serving stops while the weights move, at the full
    modelled bandwidth) or ``background`` (the old mapping keeps serving while the weights take the link
    bandwidth its traffic leaves, at least ``share`` of it; serving slowed where the move takes more:
    dse.runtime.contention); ``bandwidth_scale`` scales the modelled bandwidths a move uses (a what-if
    knob). No policy acts while a move is in flight."""

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


def scenario_from_dict(data, source: str | None = None, base_dir: str | Path | None = None) -> Scenario:
    """A `Scenario` from parsed YAML (trace files relative to ``base_dir``); a `StudyError` naming the
    first bad key."""
    if not isinstance(data, dict):
        raise StudyError("a scenario file is a mapping of keys (horizon_s, window_s, popularity, ...)",
                         source=source)
    try:
        return Scenario.model_validate(data, context={"base_dir": str(base_dir)} if base_dir is not None else None)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "scenario"
        raise StudyError(err["msg"].removeprefix("Value error, "), key=key, source=source) from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file."""
    return scenario_from_dict(read_yaml_file(path, "scenario file"), source=str(path), base_dir=Path(path).parent)
