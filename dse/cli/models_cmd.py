"""``dse models``: the bundled workload presets."""
from __future__ import annotations

import click

import workloads

from .common import cli


@cli.command("models")
def models() -> None:
    """List the bundled model presets a study's workload.model may name."""
    rows = []
    for name in workloads.list_presets():
        cfg = workloads.load_model(name)
        kind = f"MoE {cfg.experts} experts, top-{cfg.top_k}" if cfg.is_moe else "dense"
        rows.append((name, cfg.model_type, f"{cfg.layers} layers", f"hidden {cfg.hidden}", kind))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]       # columns as wide as their longest cell
    for row in rows:
        click.echo(" ".join(cell.rjust(w) if i == 2 else cell.ljust(w)
                            for i, (cell, w) in enumerate(zip(row, widths + [0]))).rstrip())
