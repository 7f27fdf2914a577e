"""``dse gemm``: one GEMM on a systolic array (cycles, stalls, SRAM and DRAM accesses) or a preset chiplet.

On a preset chiplet the GEMM runs as one kernel reading its operands from memory, as the step model runs
an operator (arch.costing.gemm_kernel, arch.roofline): by default the datasheet memory of the GPU the
preset models (dse.validation.gpu.DATASHEET_MEMORY: kind, stacks, per-pin data rate), else ``--memory KIND`` with
``--stacks N`` (HBM) or ``--channels N`` (DDR, LPDDR), at the memory's sustained bandwidth (memory.
effective_bandwidth_Bps, streaming) x the chiplet's ``mem_efficiency``, as dse.model's tables charge it,
back to back at the clock the chiplet's power limit leaves (arch.costing.gemm_at_limit, as the step model):
``energy_j`` is the board's whole energy over the kernel (leakage, active power, switching, DRAM), so
``power_w`` = ``energy_j`` / ``latency_s``, never above ``power_limit_w``. An SRAM-resident preset (arch.chiplet:
``sram_Bps`` > 0) reads the operands from its SRAM when they fit there (its fastest tier that holds them:
``peak_bandwidth_Bps`` is the SRAM's), else from the tier below (its datasheet memory); with none, it refuses.
"""
from __future__ import annotations

import json
import math

import click

import arch
import memory
from arch import systolic as S

from ..study.schema.limits import DDR_CHANNELS, HBM_STACKS
from ..validation.gpu import DATASHEET_MEMORY
from .common import FiniteFloat, WholeNumber, cli
from .output import compiles

#: a GEMM side: the array model counts folds, (M / rows) x (N / cols), in 64-bit integers (2^63 = 9.2e18)
DIM = WholeNumber(1, 10**9, "the array model counts M x N folds in 64-bit integers")
#: an array side, far above the largest arrays built (TPU v1: 256 x 256)
SIDE = WholeNumber(1, 1_000_000, "the largest arrays built are 256 x 256")
#: the clock, far above any logic clock built (about 6 GHz)
FREQ = FiniteFloat(0, open_min=True, maximum=100.0, why="no logic clock passes about 6 GHz")
#: a buffer, above the largest on-chip SRAM built (Cerebras WSE-3's 44 GB); leave --sram-kb out for no limit
SRAM_KB = FiniteFloat(0, open_min=True, maximum=1e8, why="100 GB; leave --sram-kb out for unlimited SRAM")
#: a port's words per cycle; leave --bandwidth out for no limit (an HBM3E stack moves about 1,200 B a 1-GHz cycle)
WORDS = FiniteFloat(0, open_min=True, maximum=1e6, why="leave --bandwidth out for no limit")

WORD_FIELDS = ("sram_ifmap_reads", "sram_filter_reads", "sram_ofmap_writes", "sram_ofmap_reads",
               "dram_ifmap_reads", "dram_filter_reads", "dram_ofmap_writes", "dram_ofmap_reads")


def _array_report(m, n, k, rows, cols, dataflow, sram_kb, bandwidth, freq_ghz, accumulate,
                  read_buffer="tile") -> dict:
    words = math.inf if sram_kb is None else sram_kb * 1024.0
    r = arch.simulate(m, n, k, rows, cols, dataflow, sram_ifmap_words=words, sram_filter_words=words,
                      sram_ofmap_words=words, bandwidth_words=bandwidth or math.inf, accumulate=accumulate,
                      read_buffer=read_buffer)[0, 0]
    out = {"M": m, "N": n, "K": k, "array": [rows, cols], "dataflow": dataflow,
           "sram_kb_per_buffer": sram_kb, "bandwidth_words_per_cycle": bandwidth, "read_buffer": read_buffer}
    out.update({f: float(r[S.F[f]]) for f in S.FIELDS})
    total = r[S.CYCLES] + r[S.STALL]
    out["total_cycles"] = float(total)
    out["latency_s"] = float(total / (freq_ghz * 1e9))
    out["achieved_flops"] = 2.0 * m * n * k / out["latency_s"]
    return out


def _memory(chiplet: str, kind: str | None, stacks: int | None, channels: int | None) -> dict:
    """The memory the chiplet's GEMM reads from (module docstring): kind, count, spec and source."""
    sheet = DATASHEET_MEMORY.get(chiplet)
    gpu = sheet["source"] if sheet else None
    kind = kind or (sheet["memory"] if sheet else None)
    if kind is None:
        raise arch.ArchError(f"--chiplet {chiplet}: no datasheet memory; give --memory KIND "
                             f"({', '.join(memory.memory_kinds())}) with --stacks N or --channels N")
    own = sheet is not None and kind == sheet["memory"]
    spec = memory.memory_preset(kind, {"data_rate_gbps": sheet["data_rate_gbps"]} if own else None)
    flag, count, other = ("--stacks", stacks, channels) if spec.is_hbm else ("--channels", channels, stacks)
    if other is not None:
        raise arch.ArchError(f"--memory {kind} is counted with {flag}, not {'--channels' if spec.is_hbm else '--stacks'}")
    if count is None and not own:
        raise arch.ArchError(f"--memory {kind}: give {flag} N")
    source = f"{gpu} datasheet" if own else "--memory"
    if own and count is not None and count != sheet["stacks"]:
        source += f", {flag} {count}"
    return {"kind": kind, "count": count or sheet["stacks"], "spec": spec, "source": source}


def _resident(ch, m, n, k, precision: str, memory_kind: str | None) -> bool:
    """Whether the GEMM reads from an SRAM-resident chiplet's SRAM (arch.chiplet): its three operands
    fit there and no ``--memory`` is asked for. An SRAM-only part (no tier below it) whose operands do not
    fit refuses the GEMM."""
    if not (isinstance(ch, arch.SystolicChiplet) and ch.sram_resident) or memory_kind is not None:
        return False
    operands = (m * k + k * n + m * n) * arch.precision_bytes(precision)
    if operands <= ch.sram_bytes:
        return True
    if ch.name not in DATASHEET_MEMORY:
        raise arch.ArchError(f"--chiplet {ch.name}: the GEMM's operands ({operands / 1e6:,.0f} MB) do not fit its "
                             f"{ch.sram_bytes / 1e6:,.0f} MB SRAM and it has no memory below it; a smaller --m/--n/--k, "
                             f"or --memory KIND")
    return False


def _chiplet_report(name: str, m, n, k, precision: str, memory_kind, stacks, channels) -> dict:
    """`arch.gemm_report` of the GEMM on preset ``name`` reading from its SRAM (`_resident`) or from memory
    (`_memory`), and the memory assumed."""
    ch = arch.preset(name)
    if _resident(ch, m, n, k, precision, memory_kind):
        if stacks is not None or channels is not None:
            raise arch.ArchError(f"--chiplet {name} reads this GEMM from its SRAM: drop --stacks/--channels")
        j_per_byte = ch.tech().sram_pj(ch.sram_bank_kb) * 1e-12
        report = arch.gemm_report(ch, m, n, k, precision, memory_Bps=ch.sram_Bps, dram_j_per_byte=j_per_byte)
        assumed = {"memory": f"on-die SRAM, {ch.sram_bytes / 1e6:,.0f} MB (resident: the operands fit)",
                   "peak_bandwidth_Bps": ch.sram_Bps, "sustained_bandwidth_Bps": ch.sram_Bps,
                   "mem_efficiency": ch.mem_efficiency}
    else:
        mem = _memory(name, memory_kind, stacks, channels)
        spec, count = mem["spec"], mem["count"]
        sustained = memory.effective_bandwidth_Bps(spec, count)
        report = arch.gemm_report(ch, m, n, k, precision, memory_Bps=sustained,
                                  dram_j_per_byte=spec.energy_j_per_byte)
        assumed = {"memory": f"{mem['kind']} x {count} {spec.unit}{'s' if count > 1 else ''} at "
                             f"{spec.data_rate_bps / 1e9:.4g} Gb/s/pin ({mem['source']})",
                   "peak_bandwidth_Bps": spec.peak_bandwidth_Bps * count, "sustained_bandwidth_Bps": sustained,
                   "mem_efficiency": ch.mem_efficiency}
    head = list(report)[:list(report).index("latency_s")]
    return {**{key: report[key] for key in head}, **assumed, **report}


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
@click.option("--m", "m", type=DIM, required=True, help="Rows of A and C.")
@click.option("--n", "n", type=DIM, required=True, help="Columns of B and C.")
@click.option("--k", "k", type=DIM, required=True, help="Reduction dimension.")
@click.option("--rows", type=SIDE, help="Systolic array rows.")
@click.option("--cols", type=SIDE, help="Systolic array columns.")
@click.option("--dataflow", type=click.Choice(arch.DATAFLOWS), default="ws", show_default=True)
@click.option("--sram-kb", type=SRAM_KB, default=None,
              help="Size of each of the ifmap, filter and ofmap buffers in KB of words (default: unlimited).")
@click.option("--bandwidth", type=WORDS, default=None,
              help="DRAM words per cycle per buffer port (default: unlimited, no stalls).")
@click.option("--freq-ghz", type=FREQ, default=1.0, show_default=True,
              help="Clock, for the latency of an array.")
@click.option("--no-accumulate", is_flag=True,
              help="Write every partial sum to DRAM instead of accumulating on chip (SCALE-Sim's accounting).")
@click.option("--read-buffer", type=click.Choice(["tile", "scalesim"]), default="tile", show_default=True,
              help="Input buffers: tile (a tile-aware double buffer) or scalesim (SCALE-Sim v3's read "
                   "window, which re-fetches far more; docs/arch.md).")
@click.option("--chiplet", default=None, help=f"A preset chiplet instead of an array: {', '.join(arch.preset_names())}.")
@click.option("--precision", type=click.Choice(arch.precisions()), default="bf16", show_default=True,
              help="Operand precision (with --chiplet).")
@click.option("--memory", "memory_kind", type=click.Choice(memory.memory_kinds()), default=None,
              help="Memory the chiplet reads from (with --chiplet; default: the preset GPU's datasheet memory).")
@click.option("--stacks", type=click.IntRange(1, HBM_STACKS.limit), default=None, help="HBM stacks (with --chiplet).")
@click.option("--channels", type=click.IntRange(1, DDR_CHANNELS.limit), default=None,
              help="DDR / LPDDR channels (with --chiplet).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@compiles("gemm")
def gemm(m, n, k, rows, cols, dataflow, sram_kb, bandwidth, freq_ghz, no_accumulate, read_buffer, chiplet,
         precision, memory_kind, stacks, channels, as_json):
    """Cost one GEMM (M x K) @ (K x N): on an R x C systolic array (--rows, --cols) or a preset chiplet
    reading from memory (the preset GPU's datasheet memory, or --memory with --stacks / --channels)."""
    if chiplet is not None:
        if rows is not None or cols is not None or sram_kb is not None or bandwidth is not None:
            raise arch.ArchError("--chiplet takes the array, SRAM and clock from the preset; "
                                 "drop --rows/--cols/--sram-kb/--bandwidth")
        if chiplet not in arch.preset_names():
            arch.preset(chiplet)                      # the ArchError naming the presets
        report = _chiplet_report(chiplet, m, n, k, precision, memory_kind, stacks, channels)
    else:
        if memory_kind is not None or stacks is not None or channels is not None:
            raise arch.ArchError("--memory/--stacks/--channels go with --chiplet; an array takes --bandwidth")
        if rows is None or cols is None:
            raise arch.ArchError("give --rows and --cols for a systolic array, or --chiplet NAME "
                                 f"(presets: {', '.join(arch.preset_names())})")
        report = _array_report(m, n, k, rows, cols, dataflow, sram_kb, bandwidth, freq_ghz, not no_accumulate,
                               read_buffer)
    if as_json:
        click.echo(json.dumps(report))
    else:
        _print(report)
