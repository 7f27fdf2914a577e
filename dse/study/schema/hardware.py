"""Study schema: the ``hardware`` section (chiplet library, memory, package network)."""
from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
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
from pydantic_core import InitErrorDetails, PydanticCustomError

import arch
import memory
import noc

from . import limits
from .common import IntRange, StrictModel, Tuple, check_finite, check_range


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
    freq_ghz: PositiveFloat = 1.0
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
    mem_efficiency: float = Field(default=1.0, gt=0, le=1)
    kernel_overhead_us: float = Field(default=0.0, ge=0, lt=10000)
    dispatch_us: float = Field(default=0.0, ge=0, lt=10000)
    dispatch_mode: Literal["ahead", "per_kernel"] = "ahead"
    sequence_us: float = Field(default=0.0, ge=0, lt=10000)
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


class MemoryEntry(StrictModel):
    """One memory of the study: its kind (or kinds the search may choose among, all HBM or all DDR), how
    many units the search may attach, and preset overrides."""

    kind: str | list[str]
    stacks: IntRange | None = None
    channels: IntRange | None = None
    overrides: dict[str, float] = Field(default_factory=dict)

    @property
    def kinds(self) -> list[str]:
        return list(self.kind) if isinstance(self.kind, list) else [self.kind]

    @field_validator("overrides")
    @classmethod
    def _known_overrides(cls, value: dict, info):
        kind = info.data.get("kind")
        for k in (kind if isinstance(kind, list) else [kind]):
            if k in memory.memory_kinds():
                try:
                    memory.memory_preset(k, value)
                except memory.MemorySpecError as exc:
                    raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _counts(self):
        if not self.kinds:
            raise ValueError("kind needs at least one memory kind")
        for kind in self.kinds:
            if kind not in memory.memory_kinds():
                raise ValueError(f"unknown memory kind {kind!r}; allowed: {', '.join(memory.memory_kinds())}")
        classes = {memory.memory_preset(k).is_hbm for k in self.kinds}
        if len(classes) > 1:
            raise ValueError(f"the kinds of one entry are all HBM or all DDR/LPDDR, got {', '.join(self.kinds)}")
        hbm = classes.pop()
        name = "/".join(self.kinds)
        want, other = ("stacks", "channels") if hbm else ("channels", "stacks")
        if getattr(self, other) is not None:
            raise ValueError(f"{name} is counted in {want}, not {other}")
        if getattr(self, want) is None:
            raise ValueError(f"{name} needs '{want}: [low, high]'")
        check_range(getattr(self, want), 0)
        cap = limits.HBM_STACKS if hbm else limits.DDR_CHANNELS
        if getattr(self, want)[1] > cap.limit:
            raise _invalid((want,), cap.message(f"{name} {want}:"), list(getattr(self, want)))
        return self

    @property
    def is_hbm(self) -> bool:
        return memory.memory_preset(self.kinds[0]).is_hbm

    @property
    def count_range(self) -> tuple[int, int]:
        return self.stacks if self.stacks is not None else self.channels

    def spec(self) -> memory.MemorySpec:
        """The preset with this entry's overrides applied (SI units); the entry must name one kind."""
        if len(self.kinds) != 1:
            raise ValueError(f"memory entry {self.kind} names several kinds: choose one (Study.variants)")
        return memory.memory_preset(self.kinds[0], self.overrides)


class MeshSpec(StrictModel):
    rows: IntRange
    cols: IntRange

    @field_validator("rows", "cols")
    @classmethod
    def _positive(cls, value):
        check_range(value, 1)
        if value[1] > limits.MESH_SIDE.limit:
            raise ValueError(limits.MESH_SIDE.message())
        return value

    def shapes(self) -> list[tuple[int, int]]:
        return [(r, c) for r in range(self.rows[0], self.rows[1] + 1) for c in range(self.cols[0], self.cols[1] + 1)]


def _known_tech(value: str) -> str:
    if value not in noc.link_kinds():
        raise ValueError(f"unknown link technology {value!r}; allowed: {', '.join(noc.link_kinds())}")
    return value


def _invalid(loc: tuple, message: str, value) -> ValidationError:
    """A validation error at a location below the model being validated (so the study key names it)."""
    error = PydanticCustomError("value_error", "{message}", {"message": message})
    return ValidationError.from_exception_data("PackageSpec", [InitErrorDetails(type=error, loc=loc, input=value)])


def _neighbours(a: int, b: int, rows: int, cols: int, torus: bool) -> bool:
    (ra, ca), (rb, cb) = divmod(a, cols), divmod(b, cols)
    dr, dc = abs(ra - rb), abs(ca - cb)
    if torus:
        dr = min(dr, rows - dr) if rows >= 3 else dr
        dc = min(dc, cols - dc) if cols >= 3 else dc
    return dr + dc == 1


def _unreached(n: int, links: list[tuple[int, int]]) -> list[int]:
    """Chiplets 0..n-1 with no path of ``links`` to chiplet 0."""
    neighbours: dict[int, list[int]] = {}
    for a, b in links:
        neighbours.setdefault(a, []).append(b)
        neighbours.setdefault(b, []).append(a)
    reached, todo = {0}, [0]
    while todo:
        for nxt in neighbours.get(todo.pop(), []):
            if nxt not in reached:
                reached.add(nxt)
                todo.append(nxt)
    return [i for i in range(n) if i not in reached]


class LinkSpec(StrictModel):
    """One chiplet-to-chiplet link: the links of a ``graph`` package, or a technology override on a grid."""

    between: Tuple(tuple[NonNegativeInt, NonNegativeInt])
    tech: str | None = None

    @field_validator("tech")
    @classmethod
    def _known(cls, value):
        return None if value is None else _known_tech(value)


class LinkOverrides(StrictModel):
    """Figures of the package's link technology a study changes (noc/data/links.yaml units): a link of
    a known technology at another width or speed, or a measured fabric."""

    bandwidth_gbps: float | None = Field(None, gt=0, le=1e6)
    latency_ns: float | None = Field(None, ge=0, le=1e9)
    energy_pj_per_bit: float | None = Field(None, ge=0, le=1e6)
    sync_latency_us: float | None = Field(None, ge=0, le=1e6)

    def apply(self, tech: noc.LinkTech) -> noc.LinkTech:
        changes = {"bandwidth_Bps": self.bandwidth_gbps and self.bandwidth_gbps * 1e9,
                   "latency_s": self.latency_ns is not None and self.latency_ns * 1e-9,
                   "energy_j_per_byte": self.energy_pj_per_bit is not None and self.energy_pj_per_bit * 8e-12,
                   "sync_latency_s": self.sync_latency_us is not None and self.sync_latency_us * 1e-6}
        given = {"bandwidth_Bps": self.bandwidth_gbps, "latency_s": self.latency_ns,
                 "energy_j_per_byte": self.energy_pj_per_bit, "sync_latency_s": self.sync_latency_us}
        return dataclasses.replace(tech, **{k: float(v) for k, v in changes.items() if given[k] is not None})


class PackageSpec(StrictModel):
    """The package network: topology, link technology (per package, or per link) and routing.

    ``mesh`` gives the chiplet slots (rows x cols, row-major ids) of every topology; a ``graph`` package
    has a fixed size and lists its ``links``; on a mesh or torus ``links`` override the technology of
    some links. Routing defaults to ``xy`` on grids and ``shortest`` on graphs. ``topology`` and ``link``
    may list several choices (``[mesh, torus]``): each combination is a package variant the search
    chooses among (`dse.study.spec.Study.variants`); `network` and `route_bank` need a single choice of each.
    """

    topology: str | list[str] = "mesh"          # mesh | torus | graph, or a list of mesh and torus
    mesh: MeshSpec
    link: str | list[str] = "ucie-advanced"      # or several technologies for the search to choose among
    links: list[LinkSpec] = Field(default_factory=list)
    routing: Literal["xy", "shortest"] | None = None
    link_overrides: LinkOverrides | None = None     # the package technology's figures, changed

    @field_validator("link")
    @classmethod
    def _known_link(cls, value):
        if isinstance(value, list):
            if not value:
                raise ValueError("link needs at least one technology")
            return [_known_tech(v) for v in value]
        return _known_tech(value)

    @field_validator("topology")
    @classmethod
    def _known_topology(cls, value):
        if isinstance(value, list):
            if not value or any(v not in ("mesh", "torus") for v in value) or len(set(value)) < len(value):
                raise ValueError(f"a list of topologies holds distinct choices among mesh, torus, got {value}")
        elif value not in ("mesh", "torus", "graph"):
            raise ValueError("unknown topology; allowed: mesh, torus, graph, or a list of mesh and torus")
        return value

    @property
    def link_choices(self) -> list[str]:
        return list(self.link) if isinstance(self.link, list) else [self.link]

    @property
    def topology_choices(self) -> list[str]:
        return list(self.topology) if isinstance(self.topology, list) else [self.topology]

    @model_validator(mode="after")
    def _consistent(self):
        rows, cols = self.mesh.rows, self.mesh.cols
        if self.topology == "graph":
            if rows[0] != rows[1] or cols[0] != cols[1]:
                raise _invalid(("mesh",), "a graph package has a fixed number of chiplets: give mesh rows and "
                               "cols as single numbers (chiplets = rows x cols)", self.mesh.model_dump())
            if not self.links:
                raise _invalid(("links",), "a graph package needs its links: [{between: [a, b]}, ...]", [])
            if self.routing == "xy":
                raise _invalid(("routing",), "routing 'xy' needs a mesh or torus; use 'shortest' on a graph",
                               self.routing)
        n_max = rows[1] * cols[1]
        seen: dict[tuple[int, int], int] = {}
        for i, spec in enumerate(self.links):
            a, b = spec.between
            loc = ("links", i, "between")
            for x in (a, b):
                if x >= n_max:
                    raise _invalid(loc, f"chiplet {x} is outside the package; ids are 0..{n_max - 1} "
                                   f"(row-major on the {rows[1]} x {cols[1]} grid)", list(spec.between))
            if a == b:
                raise _invalid(loc, "a link joins two different chiplets", list(spec.between))
            key = (min(a, b), max(a, b))
            if key in seen:
                raise _invalid(loc, f"chiplets {a} and {b} are already linked by links[{seen[key]}]",
                               list(spec.between))
            seen[key] = i
            if self.topology != "graph":
                grids = " or ".join(self.topology_choices)
                if spec.tech is None:
                    raise _invalid(("links", i, "tech"), f"on a {grids} a links entry overrides a link's "
                                   f"technology and needs 'tech' (one of {', '.join(noc.link_kinds())})",
                                   spec.model_dump())
                for topology in self.topology_choices:
                    for r, c in self.mesh.shapes():
                        if max(a, b) < r * c and not _neighbours(a, b, r, c, topology == "torus"):
                            raise _invalid(loc, f"chiplets {a} and {b} are not neighbours on the {r} x {c} "
                                           f"{topology}", list(spec.between))
        if self.topology == "graph":
            alone = _unreached(n_max, list(seen))
            if alone:
                raise _invalid(("links",), f"chiplet {alone[0]} is not connected to chiplet 0 ({len(alone)} "
                               "chiplets unreachable); every chiplet of a graph package needs a path to every "
                               "other", [list(k) for k in seen])
        return self

    @property
    def routing_algorithm(self) -> str:
        return self.routing or ("shortest" if self.topology == "graph" else "xy")

    def _single(self) -> None:
        if len(self.topology_choices) > 1 or len(self.link_choices) > 1:
            raise ValueError(f"package with topology {self.topology} and link {self.link} is several packages: "
                             "choose one (Study.variants)")

    def link_tech(self) -> noc.LinkTech:
        """The package's link technology with the study's ``link_overrides``."""
        self._single()
        tech = noc.link_tech(self.link)
        return self.link_overrides.apply(tech) if self.link_overrides else tech

    def network(self, rows: int, cols: int) -> noc.Topology:
        """The package network of one rows x cols design."""
        tech = self.link_tech()
        if self.topology == "graph":
            links = [(s.between[0], s.between[1], s.tech) if s.tech else tuple(s.between) for s in self.links]
            return noc.from_links(rows * cols, links, tech)
        n = rows * cols
        overrides = {tuple(s.between): s.tech for s in self.links if max(s.between) < n}
        return noc.build(self.topology, rows, cols, tech, overrides=overrides)

    def route_bank(self) -> noc.RouteBank:
        """Route tables of every package shape the study allows (see noc.bank)."""
        self._single()
        return noc.route_bank([self.network(r, c) for r, c in self.mesh.shapes()], self.routing_algorithm)


def _library_size(value: Any) -> Any:
    """Refuse an oversized library before building any of its chiplets."""
    if isinstance(value, list) and len(value) > limits.LIBRARY.limit:
        raise ValueError(f"{len(value):,} chiplets listed; " + limits.LIBRARY.message("the library holds"))
    return value


class HardwareSpec(StrictModel):
    chiplets: Annotated[list[ChipletSpec], BeforeValidator(_library_size)] = Field(min_length=1)
    memory: list[MemoryEntry] = Field(min_length=1)
    package: PackageSpec

    def library(self) -> list[arch.Chiplet]:
        """Every chiplet kind the search may place: each entry, or each variant of its ``options``."""
        return [chiplet for spec in self.chiplets for chiplet in spec.variants()]

    @model_validator(mode="after")
    def _unique(self):
        names = [c.chiplet_name for c in self.chiplets]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"chiplet names must be unique; repeated: {', '.join(sorted(dup))}")
        kinds = sum(len(c.variants()) for c in self.chiplets)
        if kinds > limits.LIBRARY.limit:
            raise _invalid(("chiplets",), f"the chiplets and their options make {kinds:,} kinds; "
                           + limits.LIBRARY.message("the library holds"), len(self.chiplets))
        hbm = [m.kind for m in self.memory if m.is_hbm]
        ddr = [m.kind for m in self.memory if not m.is_hbm]
        if len(hbm) > 1 or len(ddr) > 1:
            raise ValueError("at most one HBM kind and one DDR/LPDDR kind per study")
        return self
