"""``dse evaluate``: every metric of one hand-written (or exported) design, with a per-chiplet breakdown."""
from __future__ import annotations

import json
import math

import click
import pandas as pd
from rich.console import Console
from rich.table import Table

from ..model.breakdown import chiplet_table
from ..results.folder import read_design
from ..results.verdict import design_verdict
from ..study.spec import load_study
from ..system.metrics import mean_power_w, reported_metrics
from ..system.prepare import prepare
from .common import cli


@cli.command("evaluate")
@click.argument("study_file", type=click.Path(dir_okay=False))
@click.option("--design", "design_file", required=True, type=click.Path(dir_okay=False),
              help="Design YAML (the form of results/<study>/designs/<id>.yaml).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object: feasible, reasons, metrics, chiplets, failures.")
def evaluate(study_file: str, design_file: str, as_json: bool) -> None:
    """Evaluate the design in DESIGN under STUDY_FILE: latency, energy, area, cost, fault tolerance, what
    each chiplet holds and does, and the verdict: feasible or not and why, judged as `dse run` judges it."""
    study = load_study(study_file)
    design = read_design(design_file, strict=True)
    prepared = prepare(study)
    prepared.check_design(design, source=design_file)
    ev = prepared.evaluator
    metrics = ev.evaluate_designs([design]).iloc[0]
    package = prepared.for_design(design).evaluator     # a system's chiplets: those of its first package
    verdict = design_verdict(metrics, study, package.memory_path_report(design))    # as `dse run` judges it
    metrics = metrics[reported_metrics(study, metrics.index)]
    # cost parts and mean power (issue 34, items 3 and 4): kept in blocks of their own
    metrics, cost = _with_mean_power(metrics), _cost_parts(prepared, design, metrics)
    step = float(metrics["latency_s"]) if not design.system else \
        float(package.evaluate_designs([design], with_faults=False)["latency_s"].iloc[0])
    chiplets = chiplet_table(design, prepared, step)
    failures = package.failure_report(design)
    # a package of one chiplet has no failure it survives (the evaluator counts none): it keeps nothing
    chiplets["retained_if_lost"] = failures["retained_frac"].to_numpy() if len(failures) == len(chiplets) else 0.0
    links = package.link_failure_report(design)
    packages = prepared.system_evaluator.package_failure_report(design) if design.system else None
    if as_json:
        extra = {"package_failures": _records(packages)} if packages is not None else {}
        click.echo(json.dumps({
            "study": study.name, "design": design.to_dict(),
            "feasible": verdict.feasible, "reasons": verdict.reasons,
            "metrics": {k: _plain(v) for k, v in metrics.items()},
            "chiplets": _records(chiplets), "link_failures": _records(links), "cost": cost, **extra}, indent=1))
        return
    console = Console(width=max(Console().width, 150))     # the per-chiplet table is wide
    table = Table(title=f"{design_file} under study '{study.name}'")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in metrics.items():
        table.add_row(name, f"{value:.5g}")
    console.print(table)
    console.print(_cost_table(cost))
    console.print(f"feasible: {'yes' if verdict.feasible else 'no'}", soft_wrap=True)
    for line in verdict.reasons:
        console.print(f"  - {line}", soft_wrap=True)
    if packages is not None:
        per_package = Table(title=f"per package failure (system of {int(metrics['packages'])} packages: the "
                                  "failed package's replica re-maps onto its survivors)")
        for c in packages.columns:
            per_package.add_column(c, justify="right")
        for _, row in packages.iterrows():
            per_package.add_row(*[_cell(v) for v in row])
        console.print(per_package)
    where = "package 0 of the system, its own step" if design.system else "the package"
    per_chip = Table(title=f"per chiplet of {where} (retained_if_lost: throughput kept when this chiplet fails)")
    columns = ["slot", "kind", "hbm_stacks", "n_units", "stored_GiB", "busy_share", "sent_MB", "received_MB",
               "retained_if_lost", "units"]
    for c in columns:
        per_chip.add_column(c, justify="left" if c in ("kind", "units") else "right")
    for _, row in chiplets.iterrows():
        per_chip.add_row(*[_cell(row[c]) for c in columns])
    console.print(per_chip)
    if len(links):
        per_link = Table(title="per link failure (faults.links: the link's traffic detours)")
        for c in ("failed_link", "latency_s", "retained_frac", "all_served"):
            per_link.add_column(c, justify="right")
        for _, row in links.iterrows():
            per_link.add_row(*[_cell(row[c]) for c in ("failed_link", "latency_s", "retained_frac", "all_served")])
        console.print(per_link)


COST_LABELS = {"cost_dies_usd": "known-good dies", "cost_memory_usd": "HBM stacks and DDR",
               "cost_substrate_usd": "interposer / substrate", "cost_bonding_usd": "bonding (bumps)",
               "cost_yield_loss_usd": "yield loss (failed assembly)", "cost_usd": "total"}


def _with_mean_power(metrics):
    """The metrics with ``mean_power_w`` (dse.system.metrics.mean_power_w) after ``peak_power_w``."""
    names = list(metrics.index)
    at = names.index("peak_power_w") + 1 if "peak_power_w" in names else len(names)
    return pd.concat([metrics.iloc[:at], pd.Series({"mean_power_w": float(mean_power_w(metrics))}),
                      metrics.iloc[at:]])


def _cost_parts(prepared, design, metrics) -> dict:
    """The parts of the design's cost (arch.packaging: Chiplet Actuary's model) over all its packages,
    with the packaging, the per-die bonding yield and the package count; the parts sum to ``cost_usd``."""
    package = prepared.for_design(design)
    link = package.tables.link
    packages = int(metrics["packages"]) if "packages" in metrics.index else 1
    parts = package.package_evaluator.cost_parts([design]).iloc[0] * packages
    return {"packaging": link.packaging, "bond_yield_per_die": link.bond_yield, "packages": packages,
            **{k: _plain(float(v)) for k, v in parts.items()}, "cost_usd": _plain(float(parts.sum()))}


def _cost_table(cost: dict) -> Table:
    table = Table(title=f"cost of {cost['packages']} package(s) on {cost['packaging']}, bonding yield "
                        f"{cost['bond_yield_per_die']:g} per die (Chiplet Actuary)")
    table.add_column("part")
    table.add_column("cost $", justify="right")
    table.add_column("share", justify="right")
    total = cost["cost_usd"]
    for key, label in COST_LABELS.items():
        value = cost[key]
        share = "" if value is None or not total else f"{value / total:.1%}"
        table.add_row(label, "inf" if value is None else f"{value:,.2f}", share)
    return table


def _records(frame) -> list[dict]:
    return [{k: _plain(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def _plain(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value.item() if hasattr(value, "item") else value


def _cell(value) -> str:
    if isinstance(value, str):
        return value if len(value) <= 60 else value[:57] + "..."
    return f"{value:.4g}" if isinstance(value, float) else str(value)
