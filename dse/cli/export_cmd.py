"""``dse export``: hand one design of a results folder to another tool."""
from __future__ import annotations

import click

from ..exports import FORMATS, export_design
from .common import cli
from .output import compiles


@cli.command("export")
@click.argument("results_dir", type=click.Path(file_okay=False))
@click.option("--design", "design_id", required=True, help="Design id, e.g. d00042 (see designs/ or pareto.csv).")
@click.option("--to", "fmt", required=True, type=click.Choice(sorted(FORMATS)), help="Tool to export to.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Output folder (default: RESULTS_DIR/exports/<design>/<format>).")
@compiles("export")
def export(results_dir: str, design_id: str, fmt: str, out_dir: str | None) -> None:
    """Write design DESIGN of RESULTS_DIR as input files of another tool (README says which version)."""
    files = export_design(results_dir, design_id, fmt, out_dir)
    folder = files[0].parent if files else out_dir
    click.echo(f"{len(files)} files for {fmt} in {folder}/:")
    for f in files:
        click.echo(f"  {f.name}")
