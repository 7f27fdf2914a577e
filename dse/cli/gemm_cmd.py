"""``dse gemm``: one GEMM on a systolic array (cycles, stalls, SRAM and DRAM accesses) or a preset chiplet."""
from __future__ import annotations

import json
import math

import click

import arch
from arch import systolic as S

from .common import FiniteFloat, cli
from .output import compiles

POSITIVE = FiniteFloat(0, open_min=True)

WORD_FIELDS = ("sram_ifmap_reads", "sram_filter_reads", "sram_ofmap_writes", "sram_ofmap_reads",
               "dram_ifmap_reads", "dram_filter_reads", "dram_ofmap_writes", "dram_ofmap_reads")


def _array_report(m, n, k, rows, cols, dataflow, sram_kb, bandwidth, freq_ghz, accumulate) -> dict:
    words = math.inf if sram_kb is None else sram_kb * 1024.0
    r = arch.simulate(m, n, k, rows, cols, dataflow, sram_ifmap_words=words, sram_filter_words=words,
                      sram_ofmap_words=words, bandwidth_words=bandwidth or math.inf, accumulate=accumulate)[0, 0]
    out = {"M": m, "N": n, "K": k, "array": [rows, cols], "dataflow": dataflow,
           "sram_kb_per_buffer": sram_kb, "bandwidth_words_per_cycle": bandwidth}
    out.update({f: float(r[S.F[f]]) for f in S.FIELDS})
    total = r[S.CYCLES] + r[S.STALL]
    out["total_cycles"] = float(total)
    out["latency_s"] = float(total / (freq_ghz * 1e9))
    out["achieved_flops"] = 2.0 * m * n * k / out["latency_s"]
    return out


def _print(report: dict) -> None:
    width = max(len(k) for k in report)
    for key, value in report.items():
        if isinstance(value, float):
            text = f"{value:,.0f}" if (key in WORD_FIELDS or key.endswith("cycles") or key == "folds") \
                else f"{value:.4g}"
        else:
            text = str(value)
        click.echo(f"{key:<{width}}  {text}")


@cli.command("gemm")
@click.option("--m", "m", type=POSITIVE, required=True, help="Rows of A and C.")
@click.option("--n", "n", type=POSITIVE, required=True, help="Columns of B and C.")
@click.option("--k", "k", type=POSITIVE, required=True, help="Reduction dimension.")
@click.option("--rows", type=click.IntRange(min=1), help="Systolic array rows.")
@click.option("--cols", type=click.IntRange(min=1), help="Systolic array columns.")
@click.option("--dataflow", type=click.Choice(arch.DATAFLOWS), default="ws", show_default=True)
@click.option("--sram-kb", type=POSITIVE, default=None,
              help="Size of each of the ifmap, filter and ofmap buffers in KB of words (default: unlimited).")
@click.option("--bandwidth", type=POSITIVE, default=None,
              help="DRAM words per cycle per buffer port (default: unlimited, no stalls).")
@click.option("--freq-ghz", type=POSITIVE, default=1.0, show_default=True,
              help="Clock, for the latency of an array.")
@click.option("--no-accumulate", is_flag=True,
              help="Write every partial sum to DRAM instead of accumulating on chip (SCALE-Sim's accounting).")
@click.option("--chiplet", default=None, help=f"A preset chiplet instead of an array: {', '.join(arch.preset_names())}.")
@click.option("--precision", type=click.Choice(arch.precisions()), default="bf16", show_default=True,
              help="Operand precision (with --chiplet).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@compiles("gemm")
def gemm(m, n, k, rows, cols, dataflow, sram_kb, bandwidth, freq_ghz, no_accumulate, chiplet, precision, as_json):
    """Cost one GEMM (M x K) @ (K x N): on an R x C systolic array (--rows, --cols) or a preset chiplet."""
    if chiplet is not None:
        if rows is not None or cols is not None or sram_kb is not None or bandwidth is not None:
            raise arch.ArchError("--chiplet takes the array, SRAM and clock from the preset; "
                                 "drop --rows/--cols/--sram-kb/--bandwidth")
        report = arch.gemm_report(arch.preset(chiplet), m, n, k, precision)
    else:
        if rows is None or cols is None:
            raise arch.ArchError("give --rows and --cols for a systolic array, or --chiplet NAME "
                                 f"(presets: {', '.join(arch.preset_names())})")
        report = _array_report(m, n, k, rows, cols, dataflow, sram_kb, bandwidth, freq_ghz, not no_accumulate)
    if as_json:
        click.echo(json.dumps(report))
    else:
        _print(report)
