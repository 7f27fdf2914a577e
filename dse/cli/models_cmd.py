"""``dse models``: the bundled workload presets."""
from __future__ import annotations

import click

import workloads

from .common import cli


@cli.command("models")
def models() -> None:
    """List the bundled model presets a study's workload.model may name."""
    for name in workloads.list_presets():
        cfg = workloads.load_model(name)
        kind = f"MoE {cfg.experts} experts, top-{cfg.top_k}" if cfg.is_moe else "dense"
        click.echo(f"{name:<22} {cfg.model_type:<12} {cfg.layers:>3} layers  hidden {cfg.hidden:<6} {kind}")
