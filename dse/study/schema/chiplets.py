"""Study schema: the chiplet library of the ``hardware`` section (presets or kinds with their fields, and
the ``options`` the search may choose among)."""
from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any, Literal

from pydantic import (
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

import arch

from . import limits
from .common import StrictModel, Tuple, check_finite


class ModeSpec(StrictModel):
    """One configuration of a reconfigurable chiplet."""

    array: Tuple(tuple[PositiveInt, PositiveInt])
    dataflow: Literal["os", "ws", "is"]
    arrays: PositiveInt = 1


def _option_label(value: Any) -> str:
    return "x".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)


class ChipletSpec(StrictModel):
    """One chiplet kind of the library: ``{preset: h100-like}`` (optionally changing some fields) or a
    ``kind`` with its fields. Which fields each kind takes, their units and defaults: docs/arch.md.
    Only the keys written in the study reach arch (the defaults below are placeholders)."""

    name: str = Field(default="", pattern=r"^[A-Za-z0-9_.-]*$")
    kind: Literal["systolic", "gpu", "cpu", "reconfigurable"] = "systolic"
    array: Tuple(tuple[PositiveInt, PositiveInt]) = (1, 1)
    dataflow: Literal["os", "ws", "is"] = "ws"
    sram_mb: PositiveFloat = 1.0
    freq_ghz: float = Field(default=1.0, gt=0, le=100)     # GHz; 100 GHz caps typos (CMOS logic runs < 10 GHz)
    node: str = "7nm"
    preset: str = ""
    arrays: PositiveInt = 1
    sram_split: Tuple(tuple[PositiveFloat, PositiveFloat, PositiveFloat]) = (3 / 7, 3 / 7, 1 / 7)
    sram_bank_kb: PositiveFloat = 256.0
    pe_precision: Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"] = "bf16"
    weight_buffering: Literal["double", "single"] = "double"
    vector_lanes: NonNegativeInt = 0
    d2d_phys: NonNegativeInt = 4
    memory_phys: NonNegativeInt = 0
    memory_phy_mm2: NonNegativeFloat = 11.0
    sms: PositiveInt = 1
    die_sms: NonNegativeInt = 0
    tensor_flops_per_sm_cycle: dict[str, PositiveFloat] = Field(default_factory=dict)
    l2_mb: PositiveFloat = 1.0
    smem_kb_per_sm: PositiveFloat = 228.0
    fp32_lanes_per_sm: PositiveInt = 128
    max_efficiency: float = Field(default=0.8, gt=0, le=1)
    precision_efficiency: dict[str, float] = Field(default_factory=dict)
    tile_overhead_us: float = Field(default=0.0, ge=0, lt=1000)
    sfu_per_sm: PositiveInt = 16
    attention_overhead_us: float = Field(default=0.0, ge=0, lt=1000)
    split_kv: Literal["fill", "gqa"] = "fill"
    mem_efficiency: float = Field(default=1.0, gt=0, le=1)
    kernel_overhead_us: float = Field(default=0.0, ge=0, lt=10000)
    dispatch_us: float = Field(default=0.0, ge=0, lt=10000)
    dispatch_mode: Literal["ahead", "per_kernel"] = "ahead"
    sequence_us: float = Field(default=0.0, ge=0, lt=10000)
    power_limit_w: NonNegativeFloat = 0.0
    voltage_floor: float = Field(default=0.7, gt=0, le=1)
    idle_w: NonNegativeFloat = 0.0
    io_area_mm2: NonNegativeFloat = 0.0
    sm_area_mm2: NonNegativeFloat = 0.0
    cores: PositiveInt = 1
    simd_bits: PositiveInt = 512
    fma_units: PositiveInt = 2
    llc_mb: PositiveFloat = 1.0
    core_area_mm2: NonNegativeFloat = 0.0
    instruction_pj: NonNegativeFloat = 500.0
    modes: list[ModeSpec] = Field(default_factory=list)
    reconfig_us: NonNegativeFloat = 1.0
    reconfig_uj: NonNegativeFloat = 1.0
    reconfig_area_fraction: NonNegativeFloat = 0.1
    overrides: dict[str, Any] = Field(default_factory=dict)
    options: dict[str, list[Any]] = Field(default_factory=dict, description=(
        "fields the search may choose, each with its candidate values: one library variant per combination"))

    _chiplet: Any = PrivateAttr(default=None)
    _variants: list = PrivateAttr(default_factory=list)

    @field_validator("node")
    @classmethod
    def _known_node(cls, value: str) -> str:
        if value not in arch.nodes():
            raise ValueError(f"unknown technology node {value!r}; allowed: {', '.join(arch.nodes())}")
        return value

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, value: str) -> str:
        if value and value not in arch.preset_names():
            raise ValueError(f"unknown chiplet preset {value!r}; available: {', '.join(arch.preset_names())}")
        return value

    @field_validator("overrides")
    @classmethod
    def _finite_overrides(cls, value: dict) -> dict:
        return check_finite(value, "overrides")

    @model_validator(mode="after")
    def _build(self):
        given = self.model_fields_set
        combinations = 1
        for key, values in self.options.items():
            if key not in type(self).model_fields or key in ("name", "kind", "preset", "options", "overrides"):
                raise ValueError(f"options: {key!r} cannot be left open; any other field of the chiplet can")
            if not values:
                raise ValueError(f"options.{key} needs at least one value")
            combinations *= len(values)
        if combinations > limits.LIBRARY.limit:
            raise ValueError(f"options make {combinations:,} chiplet variants; "
                             + limits.LIBRARY.message("the library holds"))
        if not self.preset and not self.name:
            raise ValueError("every chiplet needs a 'name' (or a 'preset', whose name it then takes)")
        spec = {k: getattr(self, k) for k in given if k not in ("preset", "options")}
        if "modes" in spec:
            spec["modes"] = [m.model_dump() for m in self.modes]
        if self.preset:
            spec = {"preset": self.preset, "name": self.name or self.preset, **{k: v for k, v in spec.items() if k != "name"}}
            if "kind" not in given:
                spec.pop("kind", None)
        try:
            self._chiplet = arch.build_chiplet(spec)
        except arch.ArchError as exc:
            raise ValueError(str(exc)) from None
        if self.options:
            self._variants = self._build_variants()
        return self

    @model_serializer(mode="wrap")
    def _only_given(self, handler):
        """Dump only the keys the study gave: the others are placeholders (a kind's real defaults live in
        arch), and a resolved study must load again."""
        data = handler(self)
        return {k: v for k, v in data.items() if k in self.model_fields_set}

    @property
    def chiplet_name(self) -> str:
        return self._chiplet.name

    def variants(self) -> list[arch.Chiplet]:
        """The chiplets this entry stands for: itself, or one per combination of its ``options`` values,
        named ``name[field=value,...]`` (built and checked when the study loads)."""
        return self._variants or [self._chiplet]

    def _build_variants(self) -> list[arch.Chiplet]:
        given = {k: v for k, v in self.model_dump().items() if k != "options"}
        fields = list(self.options)
        out = []
        for combo in itertools.product(*(self.options[f] for f in fields)):
            values = dict(zip(fields, combo))
            try:
                chiplet = ChipletSpec.model_validate({**given, **values})._chiplet
            except ValidationError as exc:
                err = exc.errors()[0]
                raise ValueError(f"options: {', '.join(f'{k}={v!r}' for k, v in values.items())}: "
                                 f"{re.sub(r'^Value error, ', '', err['msg'])}") from None
            label = ",".join(f"{f}={_option_label(v)}" for f, v in values.items())
            out.append(dataclasses.replace(chiplet, name=f"{self.chiplet_name}[{label}]"))
        return out

    def to_chiplet(self) -> arch.Chiplet:
        return self._chiplet
