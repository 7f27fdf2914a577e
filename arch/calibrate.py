"""Fit a chiplet's run-time parameters to measured operator latencies (``dse calibrate``).

The model of one GEMM kernel is the step model's (arch.roofline.kernel_time_s): compute from the
chiplet's cost model (arch.costing.matrix_costs: tiles, waves and split-K on a GPU, at the fraction
``max_efficiency`` of peak), memory = the kernel's DRAM bytes / (the attached memory's sustained
bandwidth, memory.effective_bandwidth_Bps as the step model's tables charge it, x ``mem_efficiency``),
overlapped in the kernel's load-compute pipeline, plus ``kernel_overhead_us``, never less than
``dispatch_us`` (a row times one kernel launched back to back: a host issuing ahead then gives each
launch the longer of the kernel's time and its issue time, the floor, so the fit serves both
``dispatch_mode`` values). `fit` chooses the parameters named in ``fields`` that minimise the
squared log ratio of modelled to measured time over every row (scipy.optimize.least_squares, bounded),
the error measure of the end-to-end validation (geometric-mean relative error).

Measurements are CSV rows ``M, N, K, batch, precision, measured_us`` (other columns are kept; lines
starting with ``#`` are comments, for the source): arch/data/calibration/ holds the public sets the
presets were fitted to. A file says what its times include, in a comment line ``# includes: kernel``
(or an ``includes`` column of one value): `INCLUDES` maps each declaration to the fields such times can
measure, and the fit holds every other field at the chiplet's value. A file that declares nothing is
taken as ``kernel`` (`DEFAULT_INCLUDES`), so no fit invents a host time its data may not hold.
"""
from __future__ import annotations

import dataclasses
import io
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from .chiplet import Chiplet, GpuChiplet
from .costing import gemm_kernel, matrix_costs
from .errors import ArchError
from .technology import precisions

#: fitted field -> (dataclass attribute, scale from the friendly unit, lower, upper bound)
FIELDS = {
    "max_efficiency": ("max_efficiency", 1.0, 0.2, 1.0),
    "tile_overhead_us": ("tile_overhead_s", 1e-6, 0.0, 50.0),
    "mem_efficiency": ("mem_efficiency", 1.0, 0.2, 1.0),
    "kernel_overhead_us": ("kernel_overhead_s", 1e-6, 0.0, 500.0),
    "dispatch_us": ("dispatch_s", 1e-6, 0.0, 500.0),
}
#: what the measured times include -> the fields they measure. ``kernel``: the kernels' own time (a
#: profiler's kernel durations); ``kernel+launch``: the device's time between launches too (CUDA-graph
#: replays timed by events, the GPU's launch gaps but no host); both hold the efficiencies and the fixed
#: time per kernel. ``kernel+launch+dispatch``: wall clock of kernels the host issues one at a time
#: (eager PyTorch), which alone holds the host's dispatch time.
INCLUDES = {
    "kernel": ("max_efficiency", "tile_overhead_us", "mem_efficiency", "kernel_overhead_us"),
    "kernel+launch": ("max_efficiency", "tile_overhead_us", "mem_efficiency", "kernel_overhead_us"),
    "kernel+launch+dispatch": tuple(FIELDS),
}
#: fields of GPU-like chiplets only (their tiles and waves, arch.gpu)
GPU_ONLY = ("max_efficiency", "tile_overhead_us")
#: taken when a file declares nothing
DEFAULT_INCLUDES = "kernel"
COLUMNS = ("M", "N", "K", "batch", "precision", "measured_us")
MAX_ROWS = 100_000


def read_measurements(path: str | Path) -> pd.DataFrame:
    """Measured GEMMs from a CSV (see module docstring); an `ArchError` names what is wrong."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ArchError(f"{path}: cannot read the measurements ({exc.__class__.__name__})") from None
    try:
        df = pd.read_csv(io.StringIO(text), comment="#", skipinitialspace=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ArchError(f"{path}: not a CSV of measurements ({str(exc).splitlines()[0]})") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ArchError(f"{path}: needs the columns {', '.join(COLUMNS)}; missing {', '.join(missing)}")
    if not 1 <= len(df) <= MAX_ROWS:
        raise ArchError(f"{path}: needs 1 to {MAX_ROWS:,} rows, got {len(df)}")
    for c in ("M", "N", "K", "batch", "measured_us"):
        values = pd.to_numeric(df[c], errors="coerce").to_numpy(float)
        bad = ~np.isfinite(values) | (values <= 0)
        if bad.any():
            raise ArchError(f"{path}: row {int(np.flatnonzero(bad)[0]) + 1}: {c} must be a positive finite number")
        df[c] = values
    unknown = sorted(set(df["precision"]) - set(precisions()))
    if unknown:
        raise ArchError(f"{path}: unknown precision {unknown[0]!r}; allowed: {', '.join(precisions())}")
    return df


def read_includes(path: str | Path, rows: pd.DataFrame) -> tuple[str, bool]:
    """What the times of the measurements file ``path`` (read into ``rows``) include (`INCLUDES`), and
    whether the file declares it: a ``# includes: ...`` line or an ``includes`` column of one value;
    (`DEFAULT_INCLUDES`, False) when it declares nothing. An `ArchError` names a bad or mixed declaration."""
    text = Path(path).read_text()
    found = {m.group(1).lower() for m in re.finditer(r"^\s*#\s*includes\s*:\s*(\S+)", text, re.M | re.I)}
    if "includes" in rows.columns:
        found |= {str(v).strip().lower() for v in rows["includes"]}
    unknown = sorted(found - set(INCLUDES))
    if unknown:
        raise ArchError(f"{path}: includes {unknown[0]!r} unknown; allowed: {', '.join(INCLUDES)}")
    if len(found) > 1:
        raise ArchError(f"{path}: the rows declare different includes ({', '.join(sorted(found))}); "
                        "give one file per kind of measurement")
    return (found.pop(), True) if found else (DEFAULT_INCLUDES, False)


def measured_fields(ch: Chiplet, includes: str) -> tuple[str, ...]:
    """The fields times that include ``includes`` measure on ``ch`` (max_efficiency on GPU-like chiplets only)."""
    return tuple(f for f in INCLUDES[includes] if f not in GPU_ONLY or isinstance(ch, GpuChiplet))


def predict_us(ch: Chiplet, rows: pd.DataFrame, memory_bandwidth_Bps: float) -> np.ndarray:
    """Modelled time of each measured GEMM, in microseconds."""
    out = np.zeros(len(rows))
    for precision, part in rows.groupby("precision"):
        idx = rows.index.get_indexer(part.index)
        mc = matrix_costs(ch, part["M"].to_numpy(float), part["N"].to_numpy(float), part["K"].to_numpy(float),
                          part["batch"].to_numpy(float), precision)
        out[idx] = gemm_kernel(ch, mc, memory_bandwidth_Bps).time_s * 1e6
    return out


def with_values(ch: Chiplet, values: dict[str, float]) -> Chiplet:
    """The chiplet with fitted fields set (friendly units, as in `FIELDS`)."""
    changes = {FIELDS[k][0]: v * FIELDS[k][1] for k, v in values.items()}
    if "max_efficiency" in values and isinstance(ch, GpuChiplet):
        changes["precision_efficiency"] = {}          # one efficiency for every precision measured
    return dataclasses.replace(ch, **changes)


def current(ch: Chiplet, field: str) -> float:
    attr, scale, _, _ = FIELDS[field]
    return getattr(ch, attr) / scale


def fit(ch: Chiplet, rows: pd.DataFrame, memory_bandwidth_Bps: float,
        fields: tuple[str, ...] = tuple(FIELDS), includes: str | None = None) -> tuple[Chiplet, pd.DataFrame]:
    """The chiplet with ``fields`` fitted to ``rows`` (the others held at ``ch``'s values), and a per-row
    table (measured, modelled, error). With ``includes`` (`INCLUDES`), a field such times cannot
    measure is an `ArchError`."""
    if not math.isfinite(memory_bandwidth_Bps) or memory_bandwidth_Bps <= 0:
        raise ArchError("the memory bandwidth must be a positive finite number")
    unknown = [f for f in fields if f not in FIELDS]
    if unknown or not fields:
        raise ArchError(f"cannot fit {unknown[0] if unknown else 'nothing'!r}; fields: {', '.join(FIELDS)}")
    if includes is not None:
        if includes not in INCLUDES:
            raise ArchError(f"includes {includes!r} unknown; allowed: {', '.join(INCLUDES)}")
        outside = [f for f in fields if f not in INCLUDES[includes]]
        if outside:
            raise ArchError(f"cannot fit {outside[0]!r}: times that include {includes} do not measure it")
    gpu_only = [f for f in fields if f in GPU_ONLY]
    if gpu_only and not isinstance(ch, GpuChiplet):
        raise ArchError(f"chiplet {ch.name!r}: {gpu_only[0]} is fitted on GPU-like chiplets only")
    measured = rows["measured_us"].to_numpy(float)
    lower = np.array([FIELDS[f][2] for f in fields])
    upper = np.array([FIELDS[f][3] for f in fields])

    def residuals(x):
        model = predict_us(with_values(ch, dict(zip(fields, x))), rows, memory_bandwidth_Bps)
        return np.log(model / measured)

    best = None
    for start in _starts(ch, fields, lower, upper):
        result = least_squares(residuals, start, bounds=(lower, upper), x_scale=np.maximum(upper - lower, 1e-9) / 10,
                               diff_step=1e-4)
        if best is None or result.cost < best.cost:
            best = result
    fitted = with_values(ch, dict(zip(fields, best.x)))
    modelled = predict_us(fitted, rows, memory_bandwidth_Bps)
    report = rows.assign(modelled_us=modelled, error=modelled / measured - 1.0)
    return fitted, report


def _starts(ch: Chiplet, fields, lower, upper) -> list[np.ndarray]:
    """The chiplet's own values and the middle of the bounds: the floor (dispatch) makes the fit
    piecewise, so two starts guard against a local minimum."""
    own = np.clip([current(ch, f) for f in fields], lower, upper)
    return [own, (lower + upper) / 2.0]


def geomean_error(report: pd.DataFrame) -> float:
    """exp(mean |log(modelled / measured)|) - 1."""
    return float(np.exp(np.mean(np.abs(np.log(report["modelled_us"] / report["measured_us"])))) - 1.0)
