"""The study file: a validated pydantic model of what to explore, and `load_study` to read one.

Every problem in a study surfaces as one `StudyError` naming the YAML key (``search.population``),
what was wrong, and what is allowed. Ranges are written ``[low, high]`` (inclusive) or as one number.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PositiveFloat, PositiveInt,
                      ValidationError, field_validator, model_validator)

import arch
import memory
import noc
import workloads

from .errors import StudyError

OBJECTIVES = ("latency", "throughput", "energy", "area", "cost", "fault_tolerance")
MAPPINGS = ("one-to-one", "one-to-many", "many-to-one", "many-to-many")
ALGORITHMS = ("nsga2", "random")


def _as_range(value: Any) -> Any:
    """Accept ``n`` or ``[low, high]`` and return ``(low, high)``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return (value, value)
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return tuple(value)
    raise ValueError(f"expected a whole number or a [low, high] pair, got {value!r}")


def _check_range(value: tuple[int, int], minimum: int) -> tuple[int, int]:
    low, high = value
    if low > high:
        raise ValueError(f"low end {low} is above high end {high}")
    if low < minimum:
        raise ValueError(f"must be >= {minimum}, got {low}")
    return value


IntRange = Annotated[tuple[int, int], BeforeValidator(_as_range)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RoutingSpec(_Strict):
    distribution: Literal["uniform", "zipf"] = "uniform"
    s: float = Field(1.0, ge=0.0, description="Zipf exponent")
    seed: int = 0


class WorkloadSpec(_Strict):
    model: str = Field(description="bundled preset name or path to a HuggingFace config.json")
    phase: Literal["prefill", "decode"] = "decode"
    batch: PositiveInt = 1
    context: PositiveInt = 2048
    precision: Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"] = "bf16"
    per_layer: bool = False
    routing: RoutingSpec = RoutingSpec()


class ChipletSpec(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    kind: Literal["systolic"] = "systolic"
    array: tuple[PositiveInt, PositiveInt]
    dataflow: Literal["os", "ws", "is"] = "ws"
    sram_mb: PositiveFloat
    freq_ghz: PositiveFloat
    node: str

    @field_validator("node")
    @classmethod
    def _known_node(cls, value: str) -> str:
        if value not in arch.nodes():
            raise ValueError(f"unknown technology node {value!r}; allowed: {', '.join(arch.nodes())}")
        return value

    def to_chiplet(self) -> arch.Chiplet:
        return arch.Chiplet(name=self.name, kind=self.kind, rows=self.array[0], cols=self.array[1],
                            dataflow=self.dataflow, sram_bytes=self.sram_mb * 2**20,
                            freq_hz=self.freq_ghz * 1e9, node=self.node)


class MemoryEntry(_Strict):
    kind: str
    stacks: IntRange | None = None
    channels: IntRange | None = None

    @model_validator(mode="after")
    def _counts(self):
        if self.kind not in memory.memory_kinds():
            raise ValueError(f"unknown memory kind {self.kind!r}; allowed: {', '.join(memory.memory_kinds())}")
        hbm = memory.memory_preset(self.kind).is_hbm
        want, other = ("stacks", "channels") if hbm else ("channels", "stacks")
        if getattr(self, other) is not None:
            raise ValueError(f"{self.kind} is counted in {want}, not {other}")
        if getattr(self, want) is None:
            raise ValueError(f"{self.kind} needs '{want}: [low, high]'")
        _check_range(getattr(self, want), 0)
        return self

    @property
    def count_range(self) -> tuple[int, int]:
        return self.stacks if self.stacks is not None else self.channels


class MeshSpec(_Strict):
    rows: IntRange
    cols: IntRange

    @field_validator("rows", "cols")
    @classmethod
    def _positive(cls, value):
        return _check_range(value, 1)


class PackageSpec(_Strict):
    mesh: MeshSpec
    link: str = "ucie-advanced"

    @field_validator("link")
    @classmethod
    def _known_link(cls, value: str) -> str:
        if value not in noc.link_kinds():
            raise ValueError(f"unknown link technology {value!r}; allowed: {', '.join(noc.link_kinds())}")
        return value


class HardwareSpec(_Strict):
    chiplets: list[ChipletSpec] = Field(min_length=1)
    memory: list[MemoryEntry] = Field(min_length=1)
    package: PackageSpec

    @model_validator(mode="after")
    def _unique(self):
        names = [c.name for c in self.chiplets]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"chiplet names must be unique; repeated: {', '.join(sorted(dup))}")
        hbm = [m.kind for m in self.memory if memory.memory_preset(m.kind).is_hbm]
        ddr = [m.kind for m in self.memory if not memory.memory_preset(m.kind).is_hbm]
        if len(hbm) > 1 or len(ddr) > 1:
            raise ValueError("at most one HBM kind and one DDR/LPDDR kind per study")
        return self


class MappingSpec(_Strict):
    kind: Literal["one-to-one", "one-to-many", "many-to-one", "many-to-many"] = "many-to-many"
    max_replicas: PositiveInt = 2


class ConstraintsSpec(_Strict):
    area_mm2: PositiveFloat | None = None
    power_w: PositiveFloat | None = None
    cost_usd: PositiveFloat | None = None


class SearchSpec(_Strict):
    objectives: list[Literal["latency", "throughput", "energy", "area", "cost", "fault_tolerance"]] = Field(
        default=["latency", "energy", "area", "fault_tolerance"], min_length=2, max_length=6)
    algorithm: Literal["nsga2", "random"] = "nsga2"
    population: int = Field(48, ge=4, le=100_000)
    generations: int = Field(30, ge=1, le=100_000)
    seed: int = 1

    @field_validator("objectives")
    @classmethod
    def _distinct(cls, value):
        if len(set(value)) != len(value):
            raise ValueError("objectives must not repeat")
        return value


class Study(_Strict):
    """A validated study. Build one with `load_study` (file) or `Study.from_dict`."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    workload: WorkloadSpec
    hardware: HardwareSpec
    mapping: MappingSpec = MappingSpec()
    constraints: ConstraintsSpec = ConstraintsSpec()
    search: SearchSpec = SearchSpec()

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> "Study":
        if not isinstance(data, dict):
            raise StudyError("a study is a YAML mapping with keys name, workload, hardware, search", source=source)
        try:
            study = cls.model_validate(data)
        except ValidationError as exc:
            raise _to_study_error(exc, source) from None
        study._check_references(source)
        return study

    def _check_references(self, source: str | None) -> None:
        """Checks that need the other packages: the model exists and parses."""
        try:
            workloads.load_model(self.workload.model)
        except workloads.WorkloadError as exc:
            raise StudyError(str(exc), key="workload.model", source=source) from None

    def resolved(self) -> dict:
        """The study with every default filled in, as plain YAML-ready data."""
        return self.model_dump(mode="json")


def _key(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part).startswith(("function-", "tagged-union")):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out


def _fields_at(loc: tuple) -> list[str] | None:
    """Field names allowed at a location of the study, to list in an unknown-key message."""
    model: Any = Study
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if hasattr(model, "model_fields") else None
        if field is None:
            return None
        annotation = field.annotation
        inner = getattr(annotation, "__args__", None)
        if inner:   # list[X] or X | None
            annotation = next((a for a in inner if hasattr(a, "model_fields")), annotation)
        model = annotation
    return list(model.model_fields) if hasattr(model, "model_fields") else None


def _to_study_error(exc: ValidationError, source: str | None) -> StudyError:
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    kind = err["type"]
    if kind == "extra_forbidden":
        allowed = _fields_at(loc[:-1])
        hint = f"; allowed: {', '.join(allowed)}" if allowed else ""
        return StudyError(f"unknown key {loc[-1]!r}{hint}", key=_key(loc), source=source)
    if kind == "missing":
        return StudyError("required key is missing", key=_key(loc), source=source)
    message = re.sub(r"^Value error, ", "", err["msg"])
    if "input" in err and kind not in ("model_type",) and not isinstance(err["input"], dict):
        message += f" (got {err['input']!r})"
    return StudyError(message, key=_key(loc), source=source)


def load_study(path: str | Path) -> Study:
    """Read and validate a study YAML file."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise StudyError(f"study file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StudyError(f"cannot read study file {path}: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise StudyError(f"not valid YAML{where}: {getattr(exc, 'problem', exc)}", source=str(path)) from None
    return Study.from_dict(data, source=str(path))
