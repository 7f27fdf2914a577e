"""The study file: a validated pydantic model of what to explore, and `load_study` to read one.

Every problem in a study surfaces as one `StudyError` naming the YAML key (``search.population``),
what was wrong, and what is allowed. Sections are defined in ``dse/study/schema/`` (one module each).
"""
from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator

import workloads

from ..errors import StudyError
from .schema import (
    ALGORITHMS,
    MAPPINGS,
    OBJECTIVES,
    CarbonSpec,
    ConstraintsSpec,
    FaultsSpec,
    HardwareSpec,
    MappingSpec,
    RuntimeSpec,
    SearchSpec,
    ServingSpec,
    SystemSpec,
    TrainingSpec,
    WorkloadSpec,
)
from .schema import limits
from .schema.search import RUNTIME_OBJECTIVES, SERVING_OBJECTIVES, TRAINING_OBJECTIVES
from .schema.common import SAFE_NAME, StrictModel, check_safe_name
from .yaml_input import read_yaml_file

__all__ = ["Study", "load_study", "OBJECTIVES", "MAPPINGS", "ALGORITHMS"]


class Study(StrictModel):
    """A validated study. Build one with `load_study` (file) or `Study.from_dict`."""

    #: the study's name: letters, digits, '_', '.', '-'; results go to results/<name>/
    name: str = Field(pattern=SAFE_NAME)
    #: what runs: one model or an ensemble of experts, its phase, batch, context, precision, routing
    workload: WorkloadSpec
    #: what the search may build: the chiplet library, the memories, the package network
    hardware: HardwareSpec
    #: how placement units (layers, experts) may map to chiplets, and their copies
    mapping: MappingSpec = MappingSpec()
    #: optional budgets; designs over them are infeasible
    constraints: ConstraintsSpec = ConstraintsSpec()
    #: which failures fault_tolerance averages over
    faults: FaultsSpec = FaultsSpec()
    system: SystemSpec | None = None        # several packages in nodes (dse.system); None: one package
    training: TrainingSpec | None = None    # workload.phase: train (dse.training.package)
    serving: ServingSpec | None = None      # workload.phase: serve (dse.serving.package)
    #: operational and embodied carbon (ACT): grids, abatement, board, lifetime
    carbon: CarbonSpec = CarbonSpec()
    #: the objectives and the search: algorithm, population, generations, seed
    search: SearchSpec = SearchSpec()
    runtime: RuntimeSpec | None = None      # a design through a scenario (dse.runtime.search)

    @field_validator("name")
    @classmethod
    def _not_a_folder_step(cls, value: str) -> str:
        check_safe_name(value, "a study name")
        if len(value) > limits.NAME_CHARS.limit:
            raise ValueError(f"{len(value)} characters; " + limits.NAME_CHARS.message())
        return value

    @classmethod
    def load(cls, path: str | Path) -> "Study":
        """Read and validate a study YAML file."""
        path = Path(path)
        return cls.from_dict(read_yaml_file(path, "study file"), source=str(path), base_dir=path.parent)

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None, base_dir: str | Path | None = None) -> "Study":
        """A study from its YAML mapping; relative model and trace paths resolve against ``base_dir`` (the
        study file's folder) where the file is there."""
        if not isinstance(data, dict):
            raise StudyError("a study is a YAML mapping with keys name, workload, hardware, search", source=source)
        try:
            study = cls.model_validate(data, context={"base_dir": str(base_dir)} if base_dir is not None else None)
        except ValidationError as exc:
            raise _to_study_error(exc, source) from None
        study._check_references(source)
        study._check_training(source)
        study._check_runtime(source)
        study._check_quality(source)
        return study._with_serving(data, source)

    def _check_quality(self, source: str | None) -> None:
        """Quality (the ``quality`` objective, ``search.precision``) is modelled for one model
        (dse.quality); ``search.precision`` varies one package's step (prefill or decode)."""
        asked = "quality" in self.search.objectives or self.search.precision is not None
        if asked and self.workload.model is None:
            key = "search.precision" if self.search.precision is not None else "search.objectives"
            raise StudyError("quality is modelled for one model (workload.model), not an ensemble (docs/quality.md)",
                             key=key, source=source)
        if asked and (self.system is not None or self.workload.phase not in ("prefill", "decode")):
            key = "search.precision" if self.search.precision is not None else "search.objectives"
            raise StudyError("quality and search.precision follow one package's prefill or decode step: a study "
                             "without a system section and with workload.phase prefill or decode (got "
                             f"{self.workload.phase}"
                             f"{', a system' if self.system is not None else ''})", key=key, source=source)

    def _check_training(self, source: str | None) -> None:
        """``workload.phase: train`` and the ``training`` section come together; one model trains."""
        training = self.workload.phase == "train"
        if training and self.training is None:
            raise StudyError("a training study needs a training section (training: {global_batch: B, ...})",
                             key="training", source=source)
        if self.training is not None and not training:
            raise StudyError(f"the training section needs workload.phase: train (got {self.workload.phase})",
                             key="workload.phase", source=source)
        if self.workload.tokens is not None and not training:
            raise StudyError("a token budget is a training run's: workload.tokens needs workload.phase: train",
                             key="workload.tokens", source=source)
        asked = [o for o in self.search.objectives if o in TRAINING_OBJECTIVES]
        if asked and not (training and self.workload.tokens is not None):
            raise StudyError(f"{', '.join(asked)} needs a training study with a token budget (workload.phase: train, "
                             "workload.tokens)", key="search.objectives", source=source)
        if training and self.workload.ensemble is not None:
            raise StudyError("an ensemble's members train separately: give each member's model as workload.model "
                             "in a training study of its own", key="workload.ensemble", source=source)

    def _check_runtime(self, source: str | None) -> None:
        """The runtime objectives need a ``runtime`` section; it follows one package's step or server."""
        asked = [o for o in self.search.objectives if o in RUNTIME_OBJECTIVES]
        if asked and self.runtime is None:
            raise StudyError(f"{', '.join(asked)} needs a runtime section (runtime: {{scenario: FILE, policy: P}})",
                             key="search.objectives", source=source)
        if self.runtime is not None and (self.system is not None or self.workload.phase == "train"):
            raise StudyError("runtime follows one package's step or server: a study without system and with "
                             "workload.phase prefill, decode or serve", key="runtime", source=source)

    def _with_serving(self, data: dict, source: str | None) -> "Study":
        """``workload.phase: serve`` and the ``serving`` section come together; the study's decode step is
        then the serving section's (batch ``max_batch`` at the mean context), so workload.batch and
        workload.context are not given."""
        serving = self.workload.phase == "serve"
        if not serving:
            if self.serving is not None:
                raise StudyError(f"the serving section needs workload.phase: serve (got {self.workload.phase})",
                                 key="workload.phase", source=source)
            asked = [o for o in self.search.objectives if o in SERVING_OBJECTIVES]
            if asked:
                raise StudyError(f"{', '.join(asked)} needs a serving study (workload.phase: serve with a serving "
                                 "section)", key="search.objectives", source=source)
            return self
        if self.serving is None:
            raise StudyError("a serving study needs a serving section (serving: {input_len: I, output_len: O, "
                             "request_rate: R})", key="serving", source=source)
        if self.workload.ensemble is not None:
            raise StudyError("a serving study serves one model (workload.model)", key="workload.ensemble",
                             source=source)
        given = data.get("workload", {}) if isinstance(data.get("workload"), dict) else {}
        step = {"batch": self.serving.max_batch, "context": self.serving.mean_context}
        for key, instead in (("batch", "serving.max_batch"), ("context", "input_len + output_len // 2")):
            if key in given and given[key] != step[key]:
                raise StudyError(f"a serving study's step is set by {instead} ({step[key]}); leave workload.{key} "
                                 "out", key=f"workload.{key}", source=source)
        return self.model_copy(update={"workload": self.workload.model_copy(update=step)})

    def _check_references(self, source: str | None) -> None:
        """Checks that need the other packages: every model the workload names exists and parses."""
        for key, model in self.workload.model_refs():
            try:
                workloads.load_model(model)
            except workloads.WorkloadError as exc:
                raise StudyError(str(exc), key=f"workload.{key}", source=source) from None

    def variants(self) -> list[tuple[str, "Study"]]:
        """The concrete packages the study's choices span: one study per combination of topology, link
        technology, memory kinds (``topology: [..]``, ``link: [..]``, ``memory[i].kind: [..]``) and
        assignment of ``search.precision`` (each role one precision), with a label naming the choice
        ("topology link memory-kinds [precision]"; `precision_label`)."""
        package = self.hardware.package
        kinds = [m.kinds for m in self.hardware.memory]
        assignments = self.search.precision_assignments()
        out = []
        for topology, link, *chosen in itertools.product(package.topology_choices, package.link_choices, *kinds):
            memory = [m.model_copy(update={"kind": k}) for m, k in zip(self.hardware.memory, chosen)]
            concrete = package.model_copy(update={"topology": topology, "link": link})
            hardware = self.hardware.model_copy(update={"memory": memory, "package": concrete})
            for assignment in assignments:
                update = {"hardware": hardware}
                label = [topology, link, *chosen]
                if assignment:
                    one = [assignment[""]] if "" in assignment else {r: [p] for r, p in assignment.items()}
                    update["search"] = self.search.model_copy(update={"precision": one})
                    label.append(precision_label(assignment))
                out.append((" ".join(label), self.model_copy(update=update)))
        return out

    def precision_choice(self) -> dict[str, str] | None:
        """Role -> precision of a concrete study (`variants`: one precision per role of ``search.precision``;
        ``""``: every unit), None without ``search.precision``; a ValueError while it still lists choices."""
        assignments = self.search.precision_assignments()
        if len(assignments) > 1:
            raise ValueError("search.precision still lists choices: take one of study.variants()")
        return assignments[0] or None

    def resolved(self) -> dict:
        """The study with every default filled in, as plain YAML-ready data."""
        return self.model_dump(mode="json")


def precision_label(assignment: dict[str, str]) -> str:
    """A precision assignment as a design names it: ``int4`` (every unit) or ``expert=int4,attention=bf16``."""
    return assignment[""] if "" in assignment else ",".join(f"{r}={p}" for r, p in assignment.items())


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
        message += f" (got {_short(err['input'])})"
    return StudyError(message, key=_key(loc), source=source)


def _short(value: Any, chars: int = 80) -> str:
    """``repr(value)``, cut to ``chars`` characters (an error names a value, it does not print a file)."""
    text = repr(value)
    return text if len(text) <= chars else text[: chars - 3] + "..."


def load_study(path: str | Path) -> Study:
    """Read and validate a study YAML file."""
    return Study.load(path)
