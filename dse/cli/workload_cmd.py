"""``dse workload``: extract and print one model's (or a study's) operator trace, or export it."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import numpy as np
from rich.console import Console
from rich.table import Table

import workloads

from ..errors import StudyError
from ..model.tables import build_workload
from ..study.schema.limits import BATCH, CONTEXT, COPIES, SEED
from ..study.spec import load_study
from .common import FiniteFloat, cli
from .output import compiles
from .safe_write import check_replace, marker, replacing, replacing_in_folder

#: file names --ops-out writes (workloads.write_ops)
OPS_SUFFIXES = (".csv", ".parquet", ".pq")

SUMMARY_ROWS = [("total_params", "parameters", 1e9, "B"), ("active_params_per_token", "active per token", 1e9, "B"),
                ("kv_cache_bytes_per_token", "KV cache per token", 1024, "KiB"),
                ("flops_per_step", "FLOPs per step", 1e12, "T"), ("weight_bytes_per_step", "weights read", 2**30, "GiB"),
                ("kv_bytes_per_step", "KV read + written", 2**30, "GiB"),
                ("expected_distinct_experts_per_layer", "distinct experts per layer", 1, "")]


def _plain(value):
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


@cli.command("workload")
@click.argument("model")
@click.option("--phase", type=click.Choice(workloads.PHASES), default="decode", show_default=True)
@click.option("--batch", type=click.IntRange(1, BATCH.limit), default=1, show_default=True)
@click.option("--context", type=click.IntRange(1, CONTEXT.limit), default=2048, show_default=True,
              help="Prompt length (prefill) or context attended to (decode).")
@click.option("--precision", type=click.Choice(list(workloads.BYTES_PER_ELEMENT)), default="bf16", show_default=True)
@click.option("--tp", type=click.IntRange(1, COPIES.limit), default=1, show_default=True,
              help="Tensor-parallel shards.")
@click.option("--per-layer", is_flag=True, help="One unit per layer instead of per group of identical layers.")
@click.option("--routing", "distribution", type=click.Choice(["uniform", "zipf", "dirichlet"]), default="uniform",
              show_default=True, help="Synthetic expert routing.")
@click.option("--s", "zipf_s", type=FiniteFloat(0), default=1.0, show_default=True, help="Zipf exponent.")
@click.option("--alpha", type=FiniteFloat(0, open_min=True), default=1.0, show_default=True,
              help="Dirichlet concentration.")
@click.option("--trace", type=click.Path(dir_okay=False), default=None, help="JSONL routing trace (overrides --routing).")
@click.option("--seed", type=click.IntRange(0, SEED.limit), default=0, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@click.option("--ops-out", type=click.Path(dir_okay=False), default=None, help="Write the operators (.csv/.parquet).")
@click.option("--scalesim", type=click.Path(dir_okay=False), default=None, help="Write a SCALE-Sim GEMM topology CSV.")
@click.option("--chakra", type=click.Path(file_okay=False), default=None,
              help="Write Chakra execution traces (ASTRA-sim) to this folder.")
@click.option("--npus", type=click.IntRange(1, COPIES.limit), default=1, show_default=True,
              help="NPUs of the Chakra traces.")
@click.option("--force", is_flag=True, help="Replace files dse did not write (--ops-out, --scalesim, --chakra's).")
@compiles("workload")
def workload(model, phase, batch, context, precision, tp, per_layer, distribution, zipf_s, alpha, trace, seed, fmt,
             ops_out, scalesim, chakra, npus, force) -> None:
    """Operator trace of one step of MODEL: a preset (dse models), a HuggingFace config.json, or a
    study YAML (its workload section, e.g. an ensemble; the other options are then ignored)."""
    if ops_out and Path(ops_out).suffix not in OPS_SUFFIXES:
        raise StudyError(f"{ops_out}: the file name must end in {', '.join(OPS_SUFFIXES)}", key="--ops-out")
    for flag, path in (("--ops-out", ops_out), ("--scalesim", scalesim)):
        if path:
            check_replace(path, flag, force)
    if model.endswith((".yaml", ".yml")):
        wl = build_workload(load_study(model))
    else:
        routing = dict(distribution="trace", trace=trace) if trace else dict(distribution=distribution, s=zipf_s,
                                                                             alpha=alpha)
        wl = workloads.extract(model, phase=phase, batch=batch, context=context, precision=precision,
                               routing=routing, per_layer=per_layer, seed=seed, tp=tp)
    if ops_out:
        with replacing(ops_out, "--ops-out", force) as tmp:
            workloads.write_ops(wl, tmp)
    if scalesim:
        with replacing(scalesim, "--scalesim", force) as tmp:      # a CSV: recorded in the manifest
            workloads.to_scalesim_topology(wl, tmp)
    if chakra:
        prefix = Path(model).stem
        with replacing_in_folder(chakra, [f"{prefix}.{i}.et" for i in range(npus)], "--chakra", force) as tmp:
            workloads.to_chakra(wl, tmp, npus=npus, prefix=prefix, metadata={"written_by": marker()})
    if fmt == "json":
        click.echo(json.dumps(_plain(wl.to_dict())))
    elif fmt == "csv":
        wl.ops.to_csv(sys.stdout, index=False)
    else:
        _print_table(wl)


def _print_table(wl: workloads.Workload) -> None:
    console = Console()
    s = wl.summary
    head = Table(title=f"{s.get('model')} {wl.phase}, batch {wl.batch}, context {wl.context}, {wl.precision}",
                 show_header=False)
    head.add_column("figure")
    head.add_column("value", justify="right")
    for key, label, scale, unit in SUMMARY_ROWS:
        if key in s and (key != "expected_distinct_experts_per_layer" or s.get("experts")):
            head.add_row(label, f"{s[key] / scale:,.4g} {unit}".strip())
    head.add_row("placement units", str(wl.graph.number_of_nodes()))
    head.add_row("stages / scenarios", f"{len(wl.stages)} / {len(wl.scenarios)}")
    console.print(head)
    ops = wl.ops.copy()
    stage_prob = wl.stages.set_index("stage")["prob"]
    kind = {u: d["kind"] for u, d in wl.graph.nodes(data=True)}
    ops["kind"] = ops["unit"].map(kind)
    w = ops["layers"] * ops["prob"] * ops["unit"].map(lambda u: stage_prob[wl.graph.nodes[u]["stage"]])
    ops["flops_step"] = ops["flops"] * w
    ops["weights_step"] = ops["weight_bytes"] * w
    ops["kv_step"] = (ops["kv_read_bytes"] + ops["kv_write_bytes"]) * w
    agg = ops.groupby(["kind", "name"], sort=False)[["flops_step", "weights_step", "kv_step"]].sum()
    table = Table(title="operators per step (all units and layers, expected)")
    for col in ("unit kind", "operator", "GFLOPs", "weights MiB", "KV MiB"):
        table.add_column(col, justify="left" if col in ("unit kind", "operator") else "right")
    for (k, name), row in agg.iterrows():
        table.add_row(k, name, f"{row.flops_step / 1e9:,.3f}", f"{row.weights_step / 2**20:,.2f}",
                      f"{row.kv_step / 2**20:,.2f}")
    console.print(table)
