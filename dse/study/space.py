"""The design space of a study as an integer decision vector, and its decoding into designs.

Gene layout (every gene an inclusive integer range):

==============  =====================  ==============================================================
genes           range                  meaning
==============  =====================  ==============================================================
rows, cols      study mesh ranges      package mesh size; N = rows x cols chiplet slots
kind[s]         0 .. K-1               chiplet kind of slot s (row-major; slots >= N are unused)
hbm             study stack range      HBM stacks on the package, spread evenly over the N chiplets
ddr             study channel range    DDR channels shared by the package
place[u]        0 .. S_max-1           primary slot of unit u, taken modulo N
copies[u]       1 .. max_replicas      copies (many-to-many) or shards (one-to-many) of unit u
variant         0 .. V-1               link technology and memory kinds (only when the study lists
                                       several: dse.model.variants)
pipeline,       index into the study's system.parallel choices (only with a ``system`` section:
experts,        pipeline stages, expert-parallel ranks and data-parallel replicas across packages;
replicas        dse.system)
==============  =====================  ==============================================================

Decoding is a repair: any vector in the bounds gives a valid design (dse.model.placement).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import StudyError
from .schema import limits
from .spec import Study, precision_label

SPLIT_MAPPINGS = ("one-to-many",)
SYSTEM_AXES = ("pipeline", "experts", "replicas")
COPY_MAPPINGS = ("one-to-many", "many-to-many")


@dataclass
class Space:
    """Bounds and slices of the decision vector of one study."""

    names: list[str]
    lower: np.ndarray
    upper: np.ndarray
    max_slots: int
    n_units: int
    has_hbm: bool
    has_ddr: bool
    mapping: str
    split: bool
    exclusive_experts: bool
    slices: dict = field(default_factory=dict)
    seeds: np.ndarray | None = None     # heuristic designs the search starts from (dse.model.heuristics.seed_vectors)

    @property
    def n_var(self) -> int:
        return len(self.lower)

    def part(self, X: np.ndarray, name: str) -> np.ndarray:
        return X[..., self.slices[name]]


def build_space(study: Study, kind_names: list[str], unit_names: list[str], variants: int = 1) -> Space:
    """The genes of ``study`` over its chiplet library variants ``kind_names`` and workload placement units
    ``unit_names`` (both from dse.model.tables), with a ``variant`` gene when ``variants`` > 1."""
    hw = study.hardware
    mesh = hw.package.mesh
    max_slots = mesh.rows[1] * mesh.cols[1]
    K = len(kind_names)                 # library variants (chiplet options expanded)
    U = len(unit_names)
    names, lower, upper, slices = [], [], [], {}

    def add(name: str, lo: int, hi: int, count: int = 1, labels=None):
        start = len(names)
        for i in range(count):
            names.append(f"{name}[{labels[i] if labels else i}]" if count > 1 or labels else name)
            lower.append(lo)
            upper.append(hi)
        slices[name] = slice(start, len(names))

    add("rows", *mesh.rows)
    add("cols", *mesh.cols)
    add("kind", 0, K - 1, max_slots)
    hbm = next((m for m in hw.memory if m.is_hbm), None)
    ddr = next((m for m in hw.memory if not m.is_hbm), None)
    add("hbm", *(hbm.count_range if hbm else (0, 0)))
    add("ddr", *(ddr.count_range if ddr else (0, 0)))
    add("place", 0, max_slots - 1, U, labels=unit_names)
    copies = study.mapping.max_replicas if study.mapping.kind in COPY_MAPPINGS else 1
    add("copies", 1, copies, U, labels=unit_names)
    if variants > 1:                    # link technology and memory kinds the study leaves open (dse.model.variants)
        add("variant", 0, variants - 1)
    if study.system is not None:        # the parallel layout across packages (dse.system)
        parallel = study.system.parallel
        for axis in SYSTEM_AXES:
            add(axis, 0, len(getattr(parallel, axis)) - 1)
    return Space(names=names, lower=np.array(lower), upper=np.array(upper), max_slots=max_slots, n_units=U,
                 has_hbm=hbm is not None, has_ddr=ddr is not None, mapping=study.mapping.kind,
                 split=study.mapping.kind in SPLIT_MAPPINGS,
                 exclusive_experts=study.mapping.kind == "one-to-one", slices=slices)


@dataclass
class Design:
    """One package and mapping, decoded from a decision vector; readable and writable as YAML."""

    rows: int
    cols: int
    chiplets: list[str]                 # kind name per slot, row-major
    hbm_stacks: list[int]               # per slot
    ddr_channels: int
    link: str
    mapping: str
    placement: dict[str, list[int]]     # unit -> slots holding it (copies or shards)
    topology: str | None = None         # mesh, torus or graph (None: the study's)
    hbm_kind: str | None = None         # when the study lets the search choose memory kinds
    ddr_kind: str | None = None
    system: dict | None = None          # {pipeline, experts, replicas} across packages (dse.system); the
                                        # package and placement above are every package's
    precision: str | None = None        # the units' precisions when the study lets the search choose them
                                        # (search.precision; dse.study.spec.precision_label: ``int4`` or
                                        # ``expert=int4,attention=bf16``)

    def to_dict(self) -> dict:
        system = {"system": dict(self.system)} if self.system else {}
        return dict(rows=self.rows, cols=self.cols, chiplets=list(self.chiplets), hbm_stacks=list(self.hbm_stacks),
                    ddr_channels=self.ddr_channels, link=self.link, mapping=self.mapping, **self.package_choices(),
                    **system, placement={u: list(s) for u, s in self.placement.items()})

    def package_choices(self) -> dict[str, str]:
        """Topology and memory kinds where the design names them."""
        return {k: v for k, v in (("topology", self.topology), ("hbm_kind", self.hbm_kind),
                                  ("ddr_kind", self.ddr_kind), ("precision", self.precision)) if v is not None}


def check_design(design: Design, study: Study, kind_names: list[str], unit_names: list[str],
                 source: str | None = None, expert_units: set[str] | frozenset = frozenset(),
                 in_space: bool = True) -> None:
    """Raise a `StudyError` naming the design key when ``design`` cannot be evaluated under ``study``, whose
    chiplet library variants are ``kind_names`` and whose workload has the placement units ``unit_names``
    (``expert_units`` of them routed experts).

    ``in_space`` (``dse evaluate``): the design must also lie in the study's design space, as the search
    would build it: HBM stacks and DDR channels within the study's ranges, at most ``max_replicas`` copies
    (one for mappings without copies) and, one-to-one, no two experts on a chiplet. Without it (what-if
    evaluation of changed designs) only what the models need is checked."""
    package = study.hardware.package
    hbm_entry = next((m for m in study.hardware.memory if m.is_hbm), None)
    ddr_entry = next((m for m in study.hardware.memory if not m.is_hbm), None)
    for key, value, allowed in (("topology", design.topology, package.topology_choices),
                                ("link", design.link, package.link_choices),
                                ("hbm_kind", design.hbm_kind, hbm_entry.kinds if hbm_entry else []),
                                ("ddr_kind", design.ddr_kind, ddr_entry.kinds if ddr_entry else []),
                                ("mapping", design.mapping if in_space else None, [study.mapping.kind]),
                                ("precision", design.precision,
                                 [precision_label(a) for a in study.search.precision_assignments() if a])):
        if value is not None and value not in allowed:
            raise StudyError(f"{value!r} is not a choice of the study; allowed: {', '.join(allowed) or 'none'}",
                             key=key, source=source)
    _check_system(design, study, source)
    mesh = package.mesh
    for key, value, (low, high) in (("rows", design.rows, mesh.rows), ("cols", design.cols, mesh.cols)):
        if not low <= value <= high:
            raise StudyError(f"{value} is outside the study's mesh range {low}..{high} "
                             f"(hardware.package.mesh.{key})", key=key, source=source)
    n = design.rows * design.cols
    unknown = [k for k in design.chiplets if k not in kind_names]
    if unknown:
        raise StudyError(f"chiplet kind {unknown[0]!r} is not in the study's library; allowed: "
                         f"{', '.join(kind_names)}", key="chiplets", source=source)
    if len(design.hbm_stacks) != n or any(h < 0 for h in design.hbm_stacks):
        raise StudyError(f"needs {n} whole numbers >= 0, one per chiplet slot", key="hbm_stacks", source=source)
    no_phy = {c.name for c in study.hardware.library() if not c.takes_hbm}
    bad = [i for i, (k, h) in enumerate(zip(design.chiplets, design.hbm_stacks)) if h > 0 and k in no_phy]
    if bad:
        raise StudyError(f"slot {bad[0]} is a {design.chiplets[bad[0]]}, which has no HBM interface (hbm_phy "
                         "false): give it 0 stacks", key="hbm_stacks", source=source)
    _check_counts(design, study, in_space, source)
    units = set(unit_names)
    extra = [u for u in design.placement if u not in units]
    if extra:
        raise StudyError(f"unit {extra[0]!r} is not in the workload; its units are {', '.join(unit_names[:4])}"
                         f", ... ({len(units)} in all; `dse workload` lists them)", key="placement", source=source)
    missing = [u for u in unit_names if u not in design.placement]
    if missing:
        raise StudyError(f"unit {missing[0]!r} has no chiplet ({len(missing)} units unplaced); every unit of the "
                         "workload needs at least one slot", key="placement", source=source)
    copies = study.mapping.max_replicas if study.mapping.kind in COPY_MAPPINGS else 1
    holder: dict[int, str] = {}
    for unit, slots in design.placement.items():
        if not slots or len(set(slots)) != len(slots) or any(not 0 <= x < n for x in slots):
            raise StudyError(f"needs 1 to {n} distinct slots in 0..{n - 1}, got {slots}",
                             key=f"placement.{unit}", source=source)
        if in_space and len(slots) > copies:
            what = f"mapping.max_replicas is {copies}" if copies > 1 else f"a {study.mapping.kind} mapping " \
                "places one copy of each unit"
            raise StudyError(f"{len(slots)} copies, outside the study's space: {what}", key=f"placement.{unit}",
                             source=source)
        if in_space and study.mapping.kind == "one-to-one" and unit in expert_units:
            if slots[0] in holder:
                raise StudyError(f"expert shares slot {slots[0]} with expert {holder[slots[0]]!r}; a one-to-one "
                                 "mapping gives each expert a chiplet of its own", key=f"placement.{unit}",
                                 source=source)
            holder[slots[0]] = unit


def _check_counts(design: Design, study: Study, in_space: bool, source: str | None) -> None:
    """HBM stacks and DDR channels: within the study's ranges (``in_space``), always within the caps."""
    memory = study.hardware.memory
    for key, value, is_hbm, cap in (("hbm_stacks", sum(design.hbm_stacks), True, limits.HBM_STACKS),
                                    ("ddr_channels", design.ddr_channels, False, limits.DDR_CHANNELS)):
        index = next((i for i, m in enumerate(memory) if m.is_hbm == is_hbm), None)
        low, high = memory[index].count_range if index is not None else (0, 0)
        if in_space and not low <= value <= high:
            counted = "stacks" if is_hbm else "channels"
            where = f"hardware.memory[{index}].{counted}" if index is not None else \
                f"the study has no {'HBM' if is_hbm else 'DDR'}"
            raise StudyError(f"{value}{' in all' if is_hbm else ''} is outside the study's range {low}..{high} "
                             f"({where})", key=key, source=source)
        if value > cap.limit:
            raise StudyError(f"{value} in all; " + cap.message(), key=key, source=source)


def _check_system(design: Design, study: Study, source: str | None) -> None:
    """A design's parallel layout across packages against the study's ``system.parallel`` choices."""
    if study.system is None:
        if design.system:
            raise StudyError("the design is a system of packages but the study has no system section",
                             key="system", source=source)
        return
    if not isinstance(design.system, dict):
        raise StudyError("a design of a system study names its layout: system: {pipeline: P, experts: E, "
                         "replicas: R}", key="system", source=source)
    for axis in SYSTEM_AXES:
        allowed = getattr(study.system.parallel, axis)
        value = design.system.get(axis, 1)
        if value not in allowed:
            raise StudyError(f"{value!r} is not a choice of the study; allowed: {', '.join(map(str, allowed))} "
                             f"(system.parallel.{axis})", key=f"system.{axis}", source=source)
