"""``dse calibrate``: fit a chiplet's run-time parameters to measured GEMM latencies (arch.calibrate).

``--memory-bandwidth-gbps`` is the peak (datasheet) bandwidth of the memory the GEMMs ran with; the fit
reads at its sustained streaming fraction (memory.efficiency of ``--memory KIND``, by default the preset
GPU's datasheet memory: dse.validation.gpu.DATASHEET_MEMORY), the bandwidth the step model's tables charge,
so a fitted ``mem_efficiency`` is the fraction of sustained bandwidth the step model applies it to.
"""
from __future__ import annotations

import json
import math

import click
import yaml
from rich.console import Console
from rich.table import Table

import arch
import memory
from arch import calibrate as C

from ..validation.gpu import DATASHEET_MEMORY, streaming_fraction
from .common import cli, fail
from .safe_write import check_replace, write_text
from .output import compiles

MAX_BANDWIDTH_GBPS = 1e6          # 1 PB/s: far beyond any memory attached to one chip


@cli.command("calibrate")
@click.option("--chiplet", "chiplet_name", required=True, help="preset to start from (dse gemm --chiplet names them)")
@click.option("--measurements", type=click.Path(dir_okay=False), required=True,
              help="CSV of measured GEMMs: M, N, K, batch, precision, measured_us")
@click.option("--memory-bandwidth-gbps", type=float, required=True,
              help="peak (datasheet) bandwidth of the memory the chiplet ran with, GB/s (A100 80 GB: 2039); "
                   "the fit reads at its sustained streaming fraction, as the step model")
@click.option("--memory", "memory_kind", type=click.Choice(memory.memory_kinds()), default=None,
              help="kind of that memory (default: the preset GPU's datasheet memory)")
@click.option("--fit", "fields", default=None,
              help=f"comma-separated parameters to fit, of: {', '.join(C.FIELDS)} (default: those the "
                   "measurements include: a '# includes: kernel|kernel+launch|kernel+launch+dispatch' line, "
                   f"'{C.DEFAULT_INCLUDES}' when absent)")
@click.option("--out", type=click.Path(dir_okay=False), help="write the calibrated chiplet as YAML for a study")
@click.option("--force", is_flag=True, help="replace --out even if dse did not write it")
@click.option("--json", "as_json", is_flag=True, help="print the fit and every row as JSON")
@compiles("calibrate")
def calibrate_cmd(chiplet_name, measurements, memory_bandwidth_gbps, memory_kind, fields, out, force, as_json):
    """Fit a preset chiplet's efficiency, thread-block overhead, memory efficiency, kernel overhead and dispatch
    time to measured GEMM latencies (scipy least squares on log ratios), print each row's error and write a
    chiplet a study can use under hardware.chiplets. Only what the times include is fitted (dispatch only from times
    that hold the host's dispatch); the other parameters keep the preset's values, and the output says
    which were fitted and which held."""
    if chiplet_name not in arch.preset_names():
        fail(f"--chiplet: unknown preset {chiplet_name!r}; available: {', '.join(arch.preset_names())}")
    if not math.isfinite(memory_bandwidth_gbps) or not 0 < memory_bandwidth_gbps <= MAX_BANDWIDTH_GBPS:
        fail(f"--memory-bandwidth-gbps: must be a number in (0, {MAX_BANDWIDTH_GBPS:,.0f}], got {memory_bandwidth_gbps}")
    if memory_kind is None and chiplet_name not in DATASHEET_MEMORY:
        fail(f"--memory: preset {chiplet_name!r} has no datasheet memory; give --memory KIND "
             f"({', '.join(memory.memory_kinds())})")
    sustained_gbps = memory_bandwidth_gbps * streaming_fraction(chiplet_name, memory_kind)
    chosen = None if fields is None else tuple(f.strip() for f in fields.split(",") if f.strip())
    unknown = [f for f in chosen or () if f not in C.FIELDS]
    if unknown or chosen == ():
        fail(f"--fit: unknown parameter {unknown[0] if unknown else '(none)'!r}; allowed: {', '.join(C.FIELDS)}")
    if out:
        check_replace(out, "--out", force)
    rows = C.read_measurements(measurements)
    chiplet = arch.preset(chiplet_name)
    includes, declared = C.read_includes(measurements, rows)
    chosen = _fields(chiplet, chosen, includes, declared, measurements)
    fitted, report = C.fit(chiplet, rows, sustained_gbps * 1e9, chosen, includes)
    values = {f: round(float(C.current(fitted, f)), 6) for f in chosen}
    held = {f: round(float(C.current(chiplet, f)), 6) for f in C.FIELDS
            if f not in chosen and hasattr(chiplet, C.FIELDS[f][0])}
    source = f"the file declares 'includes: {includes}'" if declared else \
        f"the file declares nothing: taken as 'includes: {includes}'"
    error = C.geomean_error(report)
    if out:
        spec = {"preset": chiplet_name, "name": f"{chiplet_name}-calibrated", **values}
        write_text(out, f"# dse calibrate --chiplet {chiplet_name} --measurements {measurements}: geometric-mean "
                        f"error {error:.1%} over {len(report)} rows\n" + yaml.safe_dump(spec, sort_keys=False),
                   "--out", force)
    if as_json:
        click.echo(json.dumps({"chiplet": chiplet_name, "includes": includes, "includes_declared": declared,
                               "sustained_bandwidth_gbps": sustained_gbps,
                               "fitted": values, "held": held, "geomean_error": error,
                               "rows": report.to_dict(orient="records")}, default=float))
        return
    table = Table(title=f"{chiplet_name}: {len(report)} measured GEMMs")
    for column in ("M", "N", "K", "batch", "precision", "measured us", "modelled us", "error"):
        table.add_column(column, justify="right")
    for r in report.itertuples(index=False):
        table.add_row(f"{r.M:g}", f"{r.N:g}", f"{r.K:g}", f"{r.batch:g}", r.precision, f"{r.measured_us:.4g}",
                      f"{r.modelled_us:.4g}", f"{r.error:+.1%}")
    console = Console()
    console.print(table)
    console.print("fitted: " + ", ".join(f"{k} = {v:.4g}" for k, v in values.items()))
    if held:
        console.print("held at the preset's values: " + ", ".join(f"{k} = {v:.4g}" for k, v in held.items()))
    console.print(f"measured times include {includes} ({source}); memory read at {sustained_gbps:,.0f} GB/s "
                  f"sustained of {memory_bandwidth_gbps:,.0f} peak")
    console.print(f"geometric-mean error {error:.1%}, worst {report['error'].abs().max():.1%}"
                  + (f"; chiplet written to {out}" if out else ""))


def _fields(chiplet, chosen, includes: str, declared: bool, path) -> tuple[str, ...]:
    """The parameters to fit: ``chosen`` (--fit) if the measurements include them, else those they measure."""
    measured = C.measured_fields(chiplet, includes)
    if chosen is None:
        return measured
    outside = [f for f in chosen if f not in C.INCLUDES[includes]]
    if outside:
        said = "declares" if declared else "declares nothing, taken as"
        fail(f"--fit: {outside[0]} is not in the measurements: {path} {said} 'includes: {includes}', which "
             f"measure {', '.join(C.INCLUDES[includes])}; times holding the host's dispatch declare "
             "'# includes: kernel+launch+dispatch'")
    return chosen
