"""``dse run``: search a study (or resume one) and write its results folder.

The objects alive after the imports and after preparing the study (the workload graph and tables: millions
of objects for DeepSeek-V3 per layer) live until the command ends, so they are moved out of the garbage
collector's sight (``gc.freeze``): each full collection later walks only what the search and the writing
allocate (walking them all took 1.1 s of CPU in DeepSeek-V3 fault tolerance's run, 0.4 s now; docs/performance.md)."""
from __future__ import annotations

import gc
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from ..model.objectives import OBJECTIVE_COLUMNS
from ..results.folder import prepare_results_target, write_results
from ..results.report import baseline_lines
from ..results.run import resume_study, run_study
from ..search import checkpoint
from ..search.loop import GenerationReport
from ..study.spec import load_study
from ..system.prepare import prepare
from .common import cli
from .output import Col, compile_done, compiling, fit, print_table

HEADERS = {"design_id": ("design", "text"), "n_chiplets": ("chiplets", ""), "hbm_stacks": ("HBM", ""),
           "ddr_channels": ("DDR", ""), "latency_s": ("latency", "s"), "throughput_tok_s": ("throughput", "tok/s"),
           "energy_j_per_token": ("energy", "mJ/token"), "area_mm2": ("area", "mm²"), "cost_usd": ("cost", "$"),
           "fault_tolerance_frac": ("fault tol.", "frac"), "carbon_g_per_token": ("carbon", "g/token"),
           "quality_frac": ("quality", "frac"),
           "packages": ("packages", "")}
#: units of other metric columns, by the end of their names
SUFFIXES = (("_frac", "frac"), ("_s", "s"), ("_w", "W"), ("_j", "J"), ("_rps", "req/s"))


def _column(name: str) -> Col:
    """A summary column: its short header and unit (HEADERS, else read from the end of its name)."""
    if name in HEADERS:
        return Col(name, *HEADERS[name])
    for suffix, unit in SUFFIXES:
        if name.endswith(suffix):
            return Col(name, name[: -len(suffix)], unit)
    return Col(name, name)


@cli.command("run")
@click.argument("study_file", type=click.Path(dir_okay=False), required=False)
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Results folder (default: results/<study name>; with --resume, the resumed run's).")
@click.option("--seed", type=int, default=None, help="Override the study's search seed.")
@click.option("--resume", "resume_dir", type=click.Path(), default=None,
              help="Continue the interrupted run whose results folder (or DIR.checkpoint) this is. The checkpoint "
                   "is a pickle, which can run code: only your own runs' checkpoints load (signed with your key).")
@click.option("--trust-checkpoint", is_flag=True,
              help="With --resume: load a checkpoint not signed by your key (moved from another machine); only "
                   "for a checkpoint from a source you trust.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Evaluate on a local Dask cluster of this many worker processes.")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Evaluate on the running Dask cluster at ADDRESS (tcp://host:8786).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--svg", is_flag=True, help="Also write each plot as SVG beside its PNG (slower).")
def run(study_file: str | None, out_dir: str | None, seed: int | None, resume_dir: str | None,
        trust_checkpoint: bool, workers: int | None, scheduler: str | None, quiet: bool, svg: bool) -> None:
    """Search the design space of STUDY_FILE and write its results folder.

    The search state is saved every search.checkpoint_every generations beside the results folder
    (OUT.checkpoint/); after an interruption, `dse run --resume OUT` continues it and ends with the
    same results as an uninterrupted run.

    OUT must be missing, empty or a results folder dse wrote: it is replaced whole.
    """
    if (study_file is None) == (resume_dir is None):
        raise click.UsageError("give a STUDY_FILE to run, or --resume DIR to continue an interrupted run")
    if resume_dir is not None and seed is not None:
        raise click.UsageError("--seed cannot change a resumed run (its seed is in the checkpoint)")
    if trust_checkpoint and resume_dir is None:
        raise click.UsageError("--trust-checkpoint goes with --resume DIR")
    if workers and scheduler:
        raise click.UsageError("give --workers (a local cluster) or --scheduler (a running one), not both")
    with _frozen():
        _run(study_file, out_dir, seed, resume_dir, trust_checkpoint, workers, scheduler, quiet, svg)


@contextmanager
def _frozen():
    """What is alive now, and what `gc.freeze` moves later, out of the collector's sight while the command
    runs (module docstring); collectable again after it, for callers running ``dse run`` in their process."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _run(study_file, out_dir, seed, resume_dir, trust_checkpoint, workers, scheduler, quiet, svg) -> None:
    console = Console(stderr=True, quiet=quiet)
    if resume_dir is not None:
        state_dir = checkpoint.locate(resume_dir)
        search = checkpoint.load(state_dir, trust=trust_checkpoint)
        study, done, total = search.study, search.generation, search.total
        out = Path(out_dir) if out_dir else checkpoint.results_dir_of(state_dir)
        prepare_results_target(out)
        console.print(f"study [bold]{study.name}[/]: resuming after generation {done} of {search.total}")
    else:
        study, done = load_study(study_file), 0
        total = None if study.search.algorithm == "exhaustive" else study.search.generations
        out = Path(out_dir) if out_dir else Path("results") / study.name
        prepare_results_target(out)         # refused before the search, not after it
        state_dir = checkpoint.path_for(out)
        if (state_dir / checkpoint.STATE_FILE).exists():
            console.print(f"[yellow]note:[/] removing the unfinished run saved in {state_dir} (this run starts over;"
                          f" dse run --resume {out} would have continued it)")
            checkpoint.remove(state_dir)
    console.print(f"study [bold]{study.name}[/]: extracting {study.workload.label} ({study.workload.phase})")
    with compiling("run", console) as cold:
        prepared = prepare(study)
        gc.freeze()     # the prepared study's tables and graph too
        compile_done()              # the progress bar's spinner takes over until the first generation
        result = _search(study, prepared, console, total, done, seed, resume_dir, state_dir, out, workers, scheduler,
                         trust_checkpoint, "searching (the models compile first)" if cold else
                         "searching")
    out = write_results(result, out, svg=svg)
    checkpoint.remove(state_dir)
    _print_summary(result, out)


def _search(study, prepared, console, total, done, seed, resume_dir, state_dir, out, workers, scheduler, trust,
            description):
    """The search under a progress bar (the hypervolume of the front, the front's size)."""
    with Progress(SpinnerColumn(), TextColumn("[progress.description]{task.description}"), BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True) as progress:
        task = progress.add_task(description, total=total, completed=done)

        def show(report: GenerationReport) -> None:
            progress.update(task, completed=report.generation + 1, total=report.total,
                            description=f"searching  HV {report.hypervolume:.4f}  front {report.front_size}")

        try:
            if resume_dir is not None:
                return resume_study(state_dir, on_generation=show, prepared=prepared, workers=workers,
                                    scheduler=scheduler, trust=trust)
            else:
                return run_study(study, seed=seed, prepared=prepared, on_generation=show, checkpoint_dir=state_dir,
                                 workers=workers, scheduler=scheduler)
        except KeyboardInterrupt:
            if (state_dir / checkpoint.STATE_FILE).exists():
                click.echo(f"the search state is saved; continue with: dse run --resume {out}", err=True)
            raise


def _print_summary(result, out: Path) -> None:
    console = Console()
    ev = result.evaluations
    columns = ["design_id", "n_chiplets", "hbm_stacks", "ddr_channels"] + \
        (["packages"] if result.study.system is not None else []) + \
        [OBJECTIVE_COLUMNS[o] for o in result.study.search.objectives]
    shown = result.pareto.head(12).copy()
    if "energy_j_per_token" in shown:        # mJ/token always, as report.md and summary.md (results.plots.DISPLAY)
        shown["energy_j_per_token"] *= 1e3
    print_table(shown, [_column(c) for c in columns], out=console,
                title=f"Pareto front of '{result.study.name}' ({len(result.pareto)} designs)")
    if len(result.pareto) > 12:
        console.print(f"... {len(result.pareto) - 12} more in pareto.csv")
    if result.convergence is not None and len(result.convergence):
        console.print(f"normalised hypervolume {result.convergence['hypervolume'].iloc[-1]:.4f} "
                      f"(per generation in convergence.csv)")
    for line in baseline_lines(result):
        for part in _within_80(line[2:].replace("`", "")):
            console.print(part, soft_wrap=True, highlight=False)
    console.print(f"{len(ev)} designs evaluated, {int(ev['feasible'].sum())} feasible; results in {out}/")
    if not ev["feasible"].any():
        for k, part in enumerate(fit(f"no design was feasible: {_why_infeasible(result)}", 2)):
            console.print(part, soft_wrap=True, highlight=False, style="yellow" if k == 0 else None)
    if (out / "report.html").exists():
        console.print(f"start with {out}/report.html (or report.md); figures in {out}/plots/", soft_wrap=True)


def _within_80(line: str) -> list[str]:
    """A baseline line as it is when it fits 80 columns; else the feasible seed's ("baseline to beat, the
    EPLB-style seed ID: obj value (best b), ...") as its head then each objective on an indented line, and
    the infeasible seed's broken at spaces."""
    head, sep, rest = line.partition(": ")
    if len(line) <= 80 or not sep or ", " not in head:
        return fit(line, 2)
    return [head + ":"] + [part for item in rest.split(", ") for part in fit("  " + item, 4)]


WHY = {
    "capacity_short_gib": "weights and KV cache did not fit in HBM plus DDR (more memory: "
                          "hardware.memory ranges)",
    "unplaced_experts": "one-to-one needs a chiplet per expert (larger hardware.package.mesh, or another "
                        "mapping.kind)",
    "units_without_memory": "a chiplet holding units had no memory path: no HBM stack and no DDR channel "
                            "(more HBM stacks or DDR channels: hardware.memory ranges)",
    "reticle_over": "a die with its HBM PHYs exceeded the reticle limit (fewer HBM stacks per chiplet)",
    "area_mm2_over": "over constraints.area_mm2", "peak_power_w_over": "over constraints.peak_power_w",
    "cost_usd_over": "over constraints.cost_usd",
}


def _why_infeasible(result) -> str:
    """The constraints the evaluated designs broke most often, in words."""
    from ..model.objectives import constraint_matrix, constraint_names
    G = constraint_matrix(result.evaluations, result.study)
    broken = (G > 0).mean(axis=0)
    names = constraint_names(result.study)
    order = [i for i in broken.argsort()[::-1] if broken[i] > 0]
    return "; ".join(f"{100 * broken[i]:.0f}% of designs: {WHY.get(names[i], names[i])}" for i in order)
