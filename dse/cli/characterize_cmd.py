"""``dse characterize``: every unit of a study alone on every chiplet kind (dse.model.characterize)."""
from __future__ import annotations

from pathlib import Path

import click
from ..errors import StudyError
from ..model.characterize import characterize
from ..model.prepare import prepare
from ..results.plots import plot_roofline
from ..study.spec import load_study
from .common import cli
from .output import Col, compiling, print_table
from .safe_write import check_replace, replacing

OUT_FORMATS = (".csv", ".parquet")
SHOWN = (Col("unit", "unit", "text", left=True), Col("chiplet", "chiplet", "text", left=True),
         Col("hbm_stacks", "HBM"), Col("time_s", "time", "s"), Col("bound", "bound", "text", left=True),
         Col("compute_utilisation", "compute", "frac"), Col("memory_utilisation", "memory", "frac"),
         Col("energy_j", "energy", "J"), Col("mean_power_w", "mean power", "W"),
         Col("visit_prob", "visits", "frac"), Col("quality_frac", "quality", "frac"),
         Col("best_by_latency", "fastest", "text", left=True),
         Col("best_by_energy", "least energy", "text", left=True))


@cli.command("characterize")
@click.argument("study_file", metavar="STUDY.yaml")
@click.option("--out", help="write the table to this .csv or .parquet file")
@click.option("--format", "fmt", default="table", show_default=True, help="table | csv | json (printed)")
@click.option("--plot", "plot_path", help="write the roofline plot (PNG) to this file")
@click.option("--force", is_flag=True, help="replace --out / --plot even if dse did not write them")
def characterize_cmd(study_file, out, fmt, plot_path, force):
    """The expert execution attribute table: every placement unit alone on every chiplet kind of the
    study (time, compute-, memory- or overhead-bound by its roofline, utilisation, energy, mean power,
    HBM needed, visit probability, best kind by latency and by energy)."""
    if fmt not in ("table", "csv", "json"):
        raise StudyError(f"unknown format {fmt!r}; allowed: table, csv, json", key="--format")
    for flag, path, suffixes in (("--out", out, OUT_FORMATS), ("--plot", plot_path, (".png",))):
        if path is None:
            continue
        if Path(path).suffix not in suffixes:
            raise StudyError(f"{path}: the file name must end in {' or '.join(suffixes)}", key=flag)
        check_replace(path, flag, force)
    with compiling("characterize"):
        table = characterize(prepare(load_study(study_file)))
    if out:
        with replacing(out, "--out", force) as tmp:
            if out.endswith(".csv"):
                table.to_csv(tmp, index=False)
            else:
                table.to_parquet(tmp, index=False)
    if plot_path:
        with replacing(plot_path, "--plot", force) as tmp:
            plot_roofline(table).savefig(tmp, dpi=100)
    if fmt == "csv":
        click.echo(table.to_csv(index=False), nl=False)
    elif fmt == "json":
        click.echo(table.to_json(orient="records"))
    else:
        print_table(table, [c for c in SHOWN if c.key in table.columns], keep=2,
                    title=f"{len(table)} rows: units x chiplet kinds",
                    caption="compute, memory: utilisation; visits: share of steps that run the unit; "
                            "quality: the score kept with the unit alone at its precision")
