"""Systems a model trains on: identical devices in nodes, a scale-up fabric inside a node, a scale-out
network between nodes. The presets are dse.system's (dse/system/data/systems.yaml: one source for the
hardware of a DGX) with the figures of their training software; a system YAML may give the same fields.

The collective model per level is alpha-beta (Thakur, Rabenseifner & Gropp, IJHPCA 2005): a ring over p
ranks takes 2(p - 1) steps of ``alpha + bytes / (p x bus bandwidth)``; the bus bandwidth is the link's
per-direction bandwidth times the fraction NCCL reaches with large messages (nccl-tests "busbw").
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import yaml

import arch
import memory
import noc

from ..errors import StudyError
from ..system import hardware
from .stacks import DEFAULT, TrainingStack, load_stack


@dataclass(frozen=True)
class TrainingSystem:
    """Devices (one chiplet each, with its HBM) in nodes joined by a fabric and a network. SI units."""

    name: str
    chiplet: arch.Chiplet
    hbm: memory.MemorySpec
    hbm_stacks: int
    gpus_per_node: int
    fabric: noc.LinkTech              # per device per direction inside a node (NVLink through NVSwitch)
    fabric_efficiency: float          # busbw / link bandwidth of large collectives in the node
    network_Bps: float                # scale-out bandwidth per device per direction (one NIC per GPU)
    network_latency_s: float          # alpha of one step of a collective between nodes
    network_efficiency: float
    network_energy_j_per_byte: float  # NICs, cables and switches a byte crosses between two nodes
    stack: TrainingStack | None = None   # the training software (dse.training.stacks); None: megatron-core
    failure_rates: dict | None = None    # failures per day per device, node and job (dse.training.resilience)

    @property
    def memory_bytes(self) -> float:
        return self.hbm.capacity_bytes * self.hbm_stacks

    @property
    def memory_Bps(self) -> float:
        """Bandwidth the device's kernels draw from its HBM (sustained x the chiplet's mem_efficiency)."""
        return memory.effective_bandwidth_Bps(self.hbm, self.hbm_stacks) * self.chiplet.mem_efficiency


#: What a system preset (dse/system/data/systems.yaml: packages per node, fabric, network, NICs, the
#: reference package) needs besides its hardware to train: the HBM data rate of its reference package and
#: the fractions its training software reaches.
#: A100 80GB SXM: 5 HBM2e stacks at 3.186 Gb/s per pin, 2,039 GB/s (A100 datasheet); H100 SXM5 80GB: 5 HBM3
#: stacks at 5.24 Gb/s, 3,352 GB/s (H100 datasheet).
#: Efficiencies: 8 x A100 nccl-tests all-reduce busbw 234.9 GB/s at 16 GiB = 0.78 of 300 (S. Bekman,
#: ml-engineering network/README.md); InfiniBand HDR all-reduce across nodes reaches about 0.9 of line
#: rate (L). 8 x H100 ring busbw 370 GB/s = 0.82 of 450 (NVIDIA/nccl issue 1455).
#: The training software's GEMM efficiency is the stack's (dse/training/stacks.py), not the system's.
TRAINING_SOFTWARE = {
    "dgx-a100-80gb": dict(data_rate_gbps=3.186, fabric_efficiency=0.78, network_efficiency=0.9),
    "dgx-h100-80gb": dict(data_rate_gbps=5.24, fabric_efficiency=0.82, network_efficiency=0.9),
}


def _preset(name: str) -> dict:
    """A training system's keys from the system preset ``name`` and its training software figures; the
    network's latency is one step of a collective between two nodes (dse.system.hardware.network_level)."""
    preset = hardware.systems_table()["presets"][name]
    package = preset["reference_package"]
    link = hardware.systems_table()["fabrics"][preset["fabric"]]["link"]
    per_node = int(preset["packages_per_node"])
    network = hardware.network_level(preset["network"], int(preset["nics_per_node"]), per_node,
                                     preset["network_topology"], nodes=2)
    return dict(chiplet=package["chiplet"], hbm=package["memory"], hbm_stacks=int(package["stacks"]),
                gpus_per_node=per_node, fabric=link, network_gbps=network.bandwidth_Bps * 8e-9,
                network_latency_us=network.alpha_s * 1e6,
                network_energy_pj_per_bit=network.energy_j_per_byte / 8e-12, **TRAINING_SOFTWARE[name])


PRESETS = {name: _preset(name) for name in TRAINING_SOFTWARE}
#: optional keys: run-time parameters of the device's chiplet under the system's training software
#: (arch.Chiplet fields in the chiplet YAML's units, e.g. max_efficiency)
CHIPLET_KEYS = {"max_efficiency", "mem_efficiency", "kernel_overhead_us", "dispatch_us", "dispatch_mode"}
#: optional keys beside them: ``failure_rates`` (per device, node and job per day; dse.training.resilience)
OPTIONAL_KEYS = CHIPLET_KEYS | {"failure_rates"}
KEYS = set(PRESETS["dgx-a100-80gb"]) | OPTIONAL_KEYS
FAILURE_RATE_KEYS = ("device_per_day", "node_per_day", "job_per_day")
MAX_FAILURES_PER_DAY = 1e5


def failure_rates(value, where: str, flag: str) -> dict:
    """A system YAML's ``failure_rates``: failures per day of each device, node and the job, each >= 0."""
    if not isinstance(value, dict) or not value:
        raise StudyError(f"{where}: failure_rates is a mapping of {', '.join(FAILURE_RATE_KEYS)}", key=flag)
    out = {}
    for key, rate in value.items():
        if key not in FAILURE_RATE_KEYS:
            raise StudyError(f"{where}: unknown failure_rates key {key!r}; allowed: {', '.join(FAILURE_RATE_KEYS)}",
                             key=flag)
        out[key] = _rate(rate, f"{flag} failure_rates.{key}")
    return out


def _rate(value, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or \
            not 0 <= value <= MAX_FAILURES_PER_DAY:
        raise StudyError(f"must be failures per day in [0, {MAX_FAILURES_PER_DAY:g}], got {value!r}", key=key)
    return float(value)


def system_names() -> list[str]:
    return sorted(PRESETS)


def load_system(name_or_path: str, flag: str = "--system", stack: str = DEFAULT) -> TrainingSystem:
    """A preset by name or a YAML file of the preset's keys (any may be left out when ``preset:`` names
    one to start from), running the training software ``stack`` (dse.training.stacks)."""
    if name_or_path in PRESETS:
        return build_system(name_or_path, PRESETS[name_or_path], flag, stack)
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        raise StudyError(f"unknown system {name_or_path!r}; presets: {', '.join(system_names())}, or a system YAML",
                         key=flag)
    try:
        data = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as exc:
        raise StudyError(f"{path}: not a readable YAML file ({exc.__class__.__name__})", key=flag) from None
    if not isinstance(data, dict):
        raise StudyError(f"{path}: a system is a mapping of {', '.join(sorted(KEYS))}", key=flag)
    base = dict(PRESETS.get(data.pop("preset", ""), {}))
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise StudyError(f"{path}: unknown key {unknown[0]!r}; allowed: preset, {', '.join(sorted(KEYS))}", key=flag)
    return build_system(path.stem, {**base, **data}, flag, stack)


def stack_chiplet_changes(chiplet: str, stack: TrainingStack) -> dict:
    """The chiplet preset's GEMM efficiencies (overall and per precision) scaled by the stack's factor."""
    spec = arch.preset_spec(chiplet)
    if "max_efficiency" not in spec:
        return {}
    per_precision = {"fp8": spec["max_efficiency"], **(spec.get("precision_efficiency") or {})}
    return {"max_efficiency": min(1.0, spec["max_efficiency"] * stack.gemm_factor),
            "precision_efficiency": {p: min(1.0, e * (stack.fp8_factor if p == "fp8" else stack.gemm_factor))
                                     for p, e in per_precision.items()}}


def build_system(name: str, spec: dict, flag: str, stack: str = DEFAULT) -> TrainingSystem:
    """The system of ``spec`` running ``stack``; chiplet keys the spec gives are taken as they are."""
    missing = sorted(KEYS - OPTIONAL_KEYS - set(spec))
    if missing:
        raise StudyError(f"system {name!r} needs {', '.join(missing)}", key=flag)
    for key in ("data_rate_gbps", "network_gbps", "network_latency_us", "fabric_efficiency", "network_efficiency",
                "network_energy_pj_per_bit"):
        value = spec[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise StudyError(f"system {name!r}: {key} must be a positive number, got {value!r}", key=flag)
    for key in ("fabric_efficiency", "network_efficiency"):
        if spec[key] > 1:
            raise StudyError(f"system {name!r}: {key} is a fraction in (0, 1], got {spec[key]}", key=flag)
    for key in ("hbm_stacks", "gpus_per_node"):
        if isinstance(spec[key], bool) or not isinstance(spec[key], int) or not 1 <= spec[key] <= 64:
            raise StudyError(f"system {name!r}: {key} must be a whole number from 1 to 64", key=flag)
    try:
        software = load_stack(stack, "--stack")
        changes = {**stack_chiplet_changes(spec["chiplet"], software),
                   **{k: spec[k] for k in CHIPLET_KEYS if k in spec}}
        chiplet = arch.preset(spec["chiplet"], **changes)
        hbm = memory.memory_preset(spec["hbm"], {"data_rate_gbps": spec["data_rate_gbps"]})
        fabric = noc.link_tech(spec["fabric"])
    except (arch.ArchError, memory.MemorySpecError, noc.NocError) as exc:
        raise StudyError(f"system {name!r}: {exc}", key=flag) from None
    rates = None
    if "failure_rates" in spec:
        rates = failure_rates(spec["failure_rates"], f"system {name!r}", flag)
    return TrainingSystem(name=name, chiplet=chiplet, hbm=hbm, hbm_stacks=spec["hbm_stacks"],
                          gpus_per_node=spec["gpus_per_node"], fabric=fabric,
                          fabric_efficiency=float(spec["fabric_efficiency"]),
                          network_Bps=spec["network_gbps"] * 1e9 / 8.0,
                          network_latency_s=spec["network_latency_us"] * 1e-6,
                          network_efficiency=float(spec["network_efficiency"]),
                          network_energy_j_per_byte=spec["network_energy_pj_per_bit"] * 8e-12, stack=software,
                          failure_rates=rates)
