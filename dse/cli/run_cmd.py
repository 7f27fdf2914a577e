"""``dse run``: search a study and write its results folder."""
from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..results import OBJECTIVE_COLUMNS, write_results
from ..runner import prepare, run_study
from ..study import load_study
from .common import cli


HEADERS = {"design_id": "design", "n_chiplets": "chiplets", "hbm_stacks": "HBM", "ddr_channels": "DDR",
           "latency_s": "latency s", "throughput_tok_s": "tok/s", "energy_j_per_token": "J/token",
           "area_mm2": "area mm²", "cost_usd": "cost $", "fault_tolerance_frac": "fault tol."}


@cli.command("run")
@click.argument("study_file", type=click.Path(dir_okay=False))
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Results folder (default: results/<study name>).")
@click.option("--seed", type=int, default=None, help="Override the study's search seed.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def run(study_file: str, out_dir: str | None, seed: int | None, quiet: bool) -> None:
    """Search the design space of STUDY_FILE and write its results folder."""
    console = Console(stderr=True, quiet=quiet)
    study = load_study(study_file)
    console.print(f"study [bold]{study.name}[/]: extracting {study.workload.model} ({study.workload.phase})")
    prepared = prepare(study)
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True) as progress:
        task = progress.add_task("searching (first run compiles the models)", total=study.search.generations)
        result = run_study(study, seed=seed, prepared=prepared,
                           on_generation=lambda done, total: progress.update(task, completed=done,
                                                                             description="searching"))
    out = write_results(result, Path(out_dir) if out_dir else Path("results") / study.name)
    _print_summary(result, out)


def _print_summary(result, out: Path) -> None:
    console = Console()
    ev = result.evaluations
    table = Table(title=f"Pareto front of '{result.study.name}' ({len(result.pareto)} designs)")
    columns = ["design_id", "n_chiplets", "hbm_stacks", "ddr_channels"] + \
        [OBJECTIVE_COLUMNS[o] for o in result.study.search.objectives]
    for c in columns:
        table.add_column(HEADERS.get(c, c), justify="right")
    for _, row in result.pareto.head(12).iterrows():
        table.add_row(*[f"{row[c]:.4g}" if isinstance(row[c], float) else str(row[c]) for c in columns])
    console.print(table)
    if len(result.pareto) > 12:
        console.print(f"... {len(result.pareto) - 12} more in pareto.csv")
    console.print(f"{len(ev)} designs evaluated, {int(ev['feasible'].sum())} feasible; results in {out}/")
    if (out / "report.html").exists():
        console.print(f"start with {out}/report.html (or report.md); figures in {out}/plots/", soft_wrap=True)
