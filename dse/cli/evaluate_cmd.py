"""``dse evaluate``: every metric of one hand-written (or exported) design, with a per-chiplet breakdown."""
from __future__ import annotations

import json
import math

import click
import pandas as pd

from ..model.breakdown import chiplet_table
from ..results.folder import read_design
from ..results.verdict import design_verdict
from ..study.spec import load_study
from ..system.metrics import mean_power_w, reported_metrics
from ..system.prepare import prepare
from .common import cli
from .output import Col, compiles, console, print_pairs, print_table

CHIPLET_COLUMNS = [Col("slot", "slot"), Col("kind", "kind", "text", left=True), Col("hbm_stacks", "HBM"),
                   Col("n_units", "units"), Col("stored_GiB", "stored", "GiB"), Col("busy_share", "busy", "frac"),
                   Col("sent_MB", "sent", "MB"), Col("received_MB", "received", "MB"),
                   Col("retained_if_lost", "kept if lost", "frac"), Col("units", "units held", "text", left=True)]


@cli.command("evaluate")
@click.argument("study_file", type=click.Path(dir_okay=False))
@click.option("--design", "design_file", required=True, type=click.Path(dir_okay=False),
              help="Design YAML (the form of results/<study>/designs/<id>.yaml).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object: feasible, reasons, metrics, chiplets, cost, failures.")
@compiles("evaluate")
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
    metrics, cost = _with_mean_power(metrics, study), _cost_parts(prepared, design, metrics)
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
    out = console()
    print_pairs(metrics.items(), title=f"{design_file} under study '{study.name}'", out=out)
    print_table(_cost_rows(cost), COST_COLUMNS, out=out,
                title=f"cost of {cost['packages']} package(s) on {cost['packaging']}, bonding yield "
                      f"{cost['bond_yield_per_die']:g} per die (Chiplet Actuary)")
    out.print(f"feasible: {'yes' if verdict.feasible else 'no'}", soft_wrap=True)
    for line in verdict.reasons:
        out.print(f"  - {line}", soft_wrap=True)
    if packages is not None:
        print_table(packages, [Col(c, c, "text" if packages[c].dtype == object else "") for c in packages.columns],
                    title=f"per package failure (system of {int(metrics['packages'])} packages: the failed "
                          "package's replica re-maps onto its survivors)", out=out)
    where = "package 0 of the system, its own step" if design.system else "the package"
    shown = chiplets.assign(units=[_cell(u) for u in chiplets["units"]])
    print_table(shown, CHIPLET_COLUMNS, keep=2, out=out, title=f"per chiplet of {where}",
                caption="kept if lost: throughput kept when this chiplet fails")
    if len(links):
        print_table(links, [Col("failed_link", "failed link", "text", left=True), Col("latency_s", "latency", "s"),
                            Col("retained_frac", "kept", "frac"), Col("all_served", "all served", "text")],
                    title="per link failure (faults.links: the link's traffic detours)", out=out)


COST_LABELS = {"cost_dies_usd": "known-good dies", "cost_memory_usd": "HBM stacks and DDR",
               "cost_substrate_usd": "interposer / substrate", "cost_bonding_usd": "bonding (bumps)",
               "cost_yield_loss_usd": "yield loss (failed assembly)", "cost_usd": "total"}


def _with_mean_power(metrics, study):
    """The metrics with ``mean_power_w`` (dse.system.metrics.mean_power_w) after ``peak_power_w``."""
    names = list(metrics.index)
    at = names.index("peak_power_w") + 1 if "peak_power_w" in names else len(names)
    return pd.concat([metrics.iloc[:at], pd.Series({"mean_power_w": float(mean_power_w(metrics, study))}),
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


COST_COLUMNS = [Col("part", "part", "text", left=True), Col("cost_usd", "cost", "$"),
                Col("share", "share", "frac")]


def _cost_rows(cost: dict) -> list[dict]:
    """One row per part of the cost (None: infinite, a package that never assembles)."""
    total = cost["cost_usd"]
    return [{"part": label, "cost_usd": math.inf if cost[key] is None else cost[key],
             "share": cost[key] / total if cost[key] is not None and total else math.nan}
            for key, label in COST_LABELS.items()]


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
