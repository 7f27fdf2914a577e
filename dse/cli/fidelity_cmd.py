"""``dse fidelity``: the model against published measurements (dse.validation), suite by suite.

Per suite: every case (measured, modelled, ratio, calibration or validation set, source), one table per
figure with its unit in the header, the geometric-mean error of the calibration and the validation
figures apart (and per figure where a suite has several), and a one-line verdict on the validation error.
Offline: the measured data ship with the package.
"""
from __future__ import annotations

import json
import math
import textwrap
from itertools import groupby

import click

from ..validation import (common, energy, gemm, gpu, h200, network, serving, serving_runs, serving_vllm,
                          systolic, training)
from .common import cli
from .output import compiles

SUITES = {"gpu": gpu, "energy": energy, "serving": serving, "serving-runs": serving_runs,
          "serving-vllm": serving_vllm, "training": training, "h200": h200, "gemm": gemm, "noc": network,
          "systolic": systolic}
#: the suites whose module fits terms of its own, and the function listing them
FITTED_TERMS = {"serving-vllm": serving_vllm.fitted}
WIDTH = 80
#: the verdict on a suite's validation error: the first grade whose bound it is within
GRADES = ((0.10, "close"), (0.25, "fair"), (float("inf"), "far"))


@cli.command("fidelity")
@click.option("--suite", type=click.Choice([*SUITES, "all"]), default="all", show_default=True,
              help="which suite of published measurements to compare against")
@click.option("--json", "as_json", is_flag=True, help="print one JSON document instead of the tables")
@compiles("fidelity")
def fidelity_cmd(suite: str, as_json: bool) -> None:
    """Compare the model against the published measurements of dse.validation: GPU step latency, serving
    energy and power, serving latency (published benchmarks, vLLM 0.6.0 runs, vLLM 0.15.1 under Poisson
    load), training throughput and time, one measured H200, GEMM kernel times by shape, the package network
    against BookSim2, the systolic array against SCALE-Sim v3."""
    names = list(SUITES) if suite == "all" else [suite]
    report = {name: suite_report(SUITES[name].TITLE, SUITES[name].cases()) for name in names}
    for name in names:       # a suite's fitted terms: name, value, unit, range, meaning
        if name in FITTED_TERMS:
            report[name]["fitted"] = FITTED_TERMS[name]()
    if as_json:
        click.echo(json.dumps(report, indent=1))
        return
    for name in names:
        click.echo("\n".join(suite_lines(name, report[name])) + "\n")


def suite_report(title: str, cases: list[common.Case]) -> dict:
    """A suite's figures: its cases, geometric-mean error per set (and per metric and set), cases within
    25 % per set, and the verdict."""
    metrics = list(dict.fromkeys(c.metric for c in cases))
    sets = {name: [c for c in cases if c.set == name] for name in common.SETS}
    return {"title": title,
            "cases": [c.as_dict() for c in cases],
            "geomean_error": common.errors_by_set(cases),
            "geomean_error_by_metric": {m: common.errors_by_set([c for c in cases if c.metric == m]) for m in metrics},
            "figures": {name: len(part) for name, part in sets.items() if part},
            "within_25_percent": {name: common.within(c.ratio for c in part) for name, part in sets.items() if part},
            "verdict": verdict(cases)}


def verdict(cases: list[common.Case]) -> str:
    validation = [c for c in cases if c.set == "validation"]
    if not validation:          # a suite whose validation half is held back (serving-vllm)
        return (f"calibration only: geometric-mean error {common.geomean_error(c.ratio for c in cases):.1%}, "
                f"{common.within(c.ratio for c in cases)} of {len(cases)} within 25 %")
    error = common.geomean_error(c.ratio for c in validation)
    grade = next(g for bound, g in GRADES if error <= bound)
    return (f"{grade}: validation geometric-mean error {error:.1%}, "
            f"{common.within(c.ratio for c in validation)} of {len(validation)} within 25 %")


def decimals(values) -> int:
    """One format for a table's figures: enough decimals for three significant digits of the smallest."""
    smallest = min((abs(v) for v in values if v), default=1.0)
    return min(3, max(0, 2 - math.floor(math.log10(smallest))))


def suite_lines(name: str, report: dict) -> list[str]:
    """The suite's tables (one per figure, units in the header) and its errors, each line within 80 columns."""
    lines = [f"{name}: {report['title']}"]
    cases = report["cases"]
    ids = max(len("case"), *(len(c["id"]) for c in cases))
    source = max(WIDTH - (ids + 11 + 10 + 10 + 6 + 5), 4)
    row = f"{{:<{ids}}} {{:<11}} {{:>10}} {{:>10}} {{:>6}} {{:<{source}.{source}}}"
    order = {m: i for i, m in enumerate(report["geomean_error_by_metric"])}
    by_metric = sorted(cases, key=lambda c: order[c["metric"]])
    for metric, group in groupby(by_metric, key=lambda c: (c["metric"], c["unit"])):
        lines += ["", f"{metric[0]}:", row.format("case", "set", "measured", "modelled", "ratio", "source").rstrip(),
                  row.format("", "", metric[1], metric[1], "", "").rstrip()]
        group = list(group)
        places = decimals([c[k] for c in group for k in ("measured", "modelled")])
        lines += [row.format(c["id"], c["set"], f"{c['measured']:,.{places}f}", f"{c['modelled']:,.{places}f}",
                             f"{c['ratio']:.2f}", c["source"]).rstrip() for c in group]
    lines.append("")
    for set_name, error in report["geomean_error"].items():
        lines.append(f"{set_name}: {report['figures'][set_name]} figures, geometric-mean error {error:.1%}, "
                     f"{report['within_25_percent'][set_name]} within 25 %")
    if len(report["geomean_error_by_metric"]) > 1:
        for metric, errors in report["geomean_error_by_metric"].items():
            lines.append(f"  {metric}: " + ", ".join(f"{s} {e:.1%}" for s, e in errors.items()))
    lines.append(f"verdict: {report['verdict']}")
    for term in report.get("fitted", []):
        lines += textwrap.wrap(f"fitted: {term}", WIDTH, subsequent_indent="  ")
    return lines
