"""``dse quality``: what a model keeps of its 16-bit, all-experts benchmark score (dse.quality)."""
from __future__ import annotations

import json
import textwrap

import click

import workloads

from ..quality import KV_BITS, estimate
from .common import cli

PRECISIONS = ("bf16", "fp8", "int8", "int4")


@cli.command("quality")
@click.argument("model", metavar="MODEL")
@click.option("--precision", type=click.Choice(PRECISIONS), default="bf16", show_default=True,
              help="weights (int4: W4A16) or weights and activations (fp8, int8: W8A8)")
@click.option("--kv-precision", "kv_precision", type=click.Choice(tuple(k for k in KV_BITS if k in
              ("bf16", "fp8", "int8", "int4", "int2"))), default="bf16", show_default=True,
              help="the KV cache's element type")
@click.option("--experts-kept", "experts_kept", type=int, default=None,
              help="routed experts kept per MoE layer (the least selected pruned)")
@click.option("--skipping", is_flag=True, help="top-2 tokens skip their second expert when its weight is low")
@click.option("--json", "as_json", is_flag=True, help="print the estimate as JSON")
def quality_cmd(model, precision, kv_precision, experts_kept, skipping, as_json):
    """Quality of MODEL (a preset or a config.json) under the knobs: quality_frac, the fraction of the
    16-bit, all-experts model's benchmark score kept, the band of the published evidence
    (quality_low, quality_high) and the sources used (docs/quality.md)."""
    est = estimate(workloads.load_model(model), precision=precision, kv_precision=kv_precision,
                   experts_kept=experts_kept, skipping=skipping)
    if as_json:
        click.echo(json.dumps(est.as_dict(), indent=1))
        return
    click.echo(f"{est.model}: precision {precision}, KV {kv_precision}"
               + (f", {experts_kept} experts kept" if experts_kept is not None else "")
               + (", skipping" if skipping else ""))
    click.echo(f"  quality_frac   {est.quality_frac:.4f}")
    click.echo(f"  quality_low    {est.quality_low:.4f}")
    click.echo(f"  quality_high   {est.quality_high:.4f}")
    if est.mmlu_base is not None:
        click.echo(f"  MMLU           {est.mmlu_base:.1f} -> {est.mmlu_base * est.quality_frac:.1f} (5-shot, %)")
    click.echo("sources:" if est.sources else "sources: none needed (16-bit, all experts)")
    for line in est.sources:
        click.echo(textwrap.fill(line, 78, initial_indent="  - ", subsequent_indent="    "))
