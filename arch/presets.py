"""Build chiplets from plain mappings in the study's friendly units, and the bundled presets.

A mapping names a ``kind`` and that kind's fields, or a ``preset`` (``arch/data/chiplets.yaml``)
whose fields the rest of the mapping overrides. Friendly units: ``freq_ghz``, ``sram_mb`` / ``l2_mb`` /
``llc_mb`` (MiB), ``sram_tbps`` (TB/s), ``smem_kb_per_sm``, ``array: [rows, cols]``, ``arrays: n`` or a grid
``[rows, cols]`` of arrays, ``reconfig_us`` / ``reconfig_uj``.
Unknown keys are an ArchError naming the key and the ones the kind allows.
"""
from __future__ import annotations

import math
from functools import lru_cache
from importlib import resources

import yaml

from .chiplet import CLASSES, KINDS, Chiplet, SystolicMode
from .errors import ArchError

MIB = 2.0 ** 20

COMMON = ("name", "kind", "node", "freq_ghz", "vector_lanes", "d2d_phys", "memory_phys", "memory_phy_mm2",
          "overrides", "mem_efficiency", "kernel_overhead_us", "dispatch_us", "dispatch_mode", "sequence_us",
          "power_limit_w", "voltage_floor", "idle_w")
KIND_FIELDS = {
    "systolic": ("array", "arrays", "dataflow", "sram_mb", "sram_split", "sram_bank_kb", "pe_precision",
                 "weight_buffering", "sram_tbps", "wafer_cores", "spare_cores", "hbm_phy", "macs_per_pe",
                 "array_link_words"),
    "gpu": ("sms", "die_sms", "tensor_flops_per_sm_cycle", "l2_mb", "smem_kb_per_sm", "fp32_lanes_per_sm",
            "max_efficiency", "precision_efficiency", "tile_overhead_us", "sfu_per_sm", "attention_overhead_us",
            "io_area_mm2", "sm_area_mm2", "l2_bytes_per_cycle", "split_kv"),
    "cpu": ("cores", "simd_bits", "fma_units", "llc_mb", "max_efficiency", "core_area_mm2", "instruction_pj"),
}
KIND_FIELDS["reconfigurable"] = KIND_FIELDS["systolic"] + ("modes", "reconfig_us", "reconfig_uj",
                                                           "reconfig_area_fraction")
REQUIRED = {"systolic": ("array", "sram_mb"), "gpu": ("sms", "tensor_flops_per_sm_cycle", "l2_mb"),
            "cpu": ("cores", "llc_mb"), "reconfigurable": ("array", "sram_mb", "modes")}
_SCALE = {"freq_ghz": ("freq_hz", 1e9), "sram_mb": ("sram_bytes", MIB), "l2_mb": ("l2_bytes", MIB),
          "llc_mb": ("llc_bytes", MIB), "smem_kb_per_sm": ("smem_bytes_per_sm", 1024.0),
          "reconfig_us": ("reconfig_s", 1e-6), "reconfig_uj": ("reconfig_j", 1e-6),
          "kernel_overhead_us": ("kernel_overhead_s", 1e-6), "dispatch_us": ("dispatch_s", 1e-6),
          "sequence_us": ("sequence_s", 1e-6), "tile_overhead_us": ("tile_overhead_s", 1e-6),
          "attention_overhead_us": ("attention_overhead_s", 1e-6), "sram_tbps": ("sram_Bps", 1e12)}


@lru_cache(maxsize=1)
def _presets() -> dict:
    return yaml.safe_load((resources.files("arch") / "data" / "chiplets.yaml").read_text())


def preset_names() -> list[str]:
    return list(_presets())


def preset_spec(name: str) -> dict:
    """The friendly-unit mapping of a bundled preset."""
    table = _presets()
    if name not in table:
        raise ArchError(f"unknown chiplet preset {name!r}; available: {', '.join(table)}")
    return {"name": name, **table[name]}


def allowed_fields(kind: str) -> tuple[str, ...]:
    return COMMON + KIND_FIELDS[kind]


def resolve(spec: dict) -> dict:
    """Merge a ``preset`` with the mapping's own fields; the result has no ``preset`` key."""
    spec = dict(spec)
    name = spec.pop("preset", None)
    if name is None:
        return spec
    return {**preset_spec(name), **spec}


def _array(label: str, value) -> tuple[int, int]:
    if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) and v >= 1 for v in value)):
        raise ArchError(f"{label}: expected [rows, cols] of positive whole numbers, got {value!r}")
    return int(value[0]), int(value[1])


def _check_finite(label: str, value, key: str = "") -> None:
    """Every number of a chiplet spec is finite (``inf`` clocks gave infinite power)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ArchError(f"{label}: {key} must be a finite number, got {value!r}")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_finite(label, v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_finite(label, v, f"{key}[{i}]")


def build_chiplet(spec: dict) -> Chiplet:
    """A Chiplet from a friendly-unit mapping (see module docstring)."""
    spec = resolve(spec)
    name = spec.get("name", "?")
    _check_finite(f"chiplet {name!r}", spec)
    kind = spec.get("kind")
    if kind not in KINDS:
        raise ArchError(f"chiplet {name!r}: unknown kind {kind!r}; allowed: {', '.join(KINDS)}")
    allowed = allowed_fields(kind)
    for key in spec:
        if key not in allowed:
            raise ArchError(f"chiplet {name!r}: unknown field {key!r} for kind {kind}; allowed: {', '.join(allowed)}")
    missing = [k for k in ("name", "node", "freq_ghz") + REQUIRED[kind] if k not in spec]
    if missing:
        raise ArchError(f"chiplet {name!r}: missing {', '.join(missing)} (kind {kind})")
    fields = {}
    for key, value in spec.items():
        if key == "kind" or value is None:
            continue
        if key in _SCALE:
            target, factor = _SCALE[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ArchError(f"chiplet {name!r}: {key} must be a number, got {value!r}")
            fields[target] = float(value) * factor
        elif key == "array":
            fields["rows"], fields["cols"] = _array(f"chiplet {name!r}: array", value)
        elif key == "arrays" and isinstance(value, (list, tuple)):
            g_r, g_c = _array(f"chiplet {name!r}: arrays", value)
            fields["arrays"], fields["grid_rows"] = g_r * g_c, g_r
        elif key == "modes":
            if not isinstance(value, (list, tuple)):
                raise ArchError(f"chiplet {name!r}: modes must be a list of two modes")
            modes = []
            for i, m in enumerate(value):
                extra = set(m) - {"array", "dataflow", "arrays"}
                if extra or "array" not in m or "dataflow" not in m:
                    raise ArchError(f"chiplet {name!r}: modes[{i}] takes array, dataflow and optional arrays; "
                                    f"got {', '.join(map(str, m))}")
                r, c = _array(f"chiplet {name!r}: modes[{i}].array", m["array"])
                modes.append(SystolicMode(rows=r, cols=c, dataflow=m["dataflow"], arrays=int(m.get("arrays", 1))))
            fields["modes"] = tuple(modes)
        elif key == "sram_split":
            fields[key] = tuple(float(v) for v in value)
        elif key == "tensor_flops_per_sm_cycle":
            fields[key] = {str(k): float(v) for k, v in dict(value).items()}
        elif key == "macs_per_pe":
            if not isinstance(value, dict):
                raise ArchError(f"chiplet {name!r}: macs_per_pe must map precisions to MACs per PE per cycle, "
                                f"got {value!r}")
            fields[key] = dict(value)
        elif key == "overrides":
            fields[key] = dict(value)
        else:
            fields[key] = value
    try:
        return CLASSES[kind](**fields)
    except TypeError as exc:                      # a value of the wrong type reached the dataclass
        raise ArchError(f"chiplet {name!r}: {exc}") from None


def preset(name: str, **changes) -> Chiplet:
    """A bundled preset as a Chiplet, with optional friendly-unit field changes."""
    return build_chiplet({"preset": name, **changes})
