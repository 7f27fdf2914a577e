"""``dse timeline``: one design through a scenario of popularity drift and failures under a runtime
policy (dse.runtime, docs/runtime.md): per window latency, throughput, imbalance, migrations; totals."""
from __future__ import annotations

import json
from pathlib import Path

import click

from ..results.folder import read_design
from ..runtime import POLICIES, load_scenario, run_timeline
from ..runtime.report import table_rows, totals_rows, write_folder
from ..study.spec import load_study
from ..system.prepare import prepare
from .common import FiniteFloat, cli, fail
from .safe_write import check_replace, replacing_in_folder

#: the policies that read --every (periodic: the period; threshold: the least gap between rebalances)
EVERY_POLICIES = ("periodic", "threshold")
#: the files --out writes (dse.runtime.report.write_folder); others in the folder are left alone
OUT_FILES = ("timeline.png", "timeline.svg", "timeline.md", "timeline.json")


def check_out(out: Path) -> None:
    """Refuse (one line, exit 2) an --out that is a file, or that holds one of `OUT_FILES` dse did not
    write (dse.cli.safe_write's rule, as every command that writes): checked before the timeline runs."""
    if out.exists() and not out.is_dir():
        fail(f"--out: {out} is a file; give a folder")
    if out.is_dir():
        for name in OUT_FILES:
            check_replace(out / name, "--out", None)         # timeline has no --force, as compare


@cli.command("timeline")
@click.argument("study_file", type=click.Path(dir_okay=False))
@click.option("--design", "design_file", required=True, type=click.Path(dir_okay=False),
              help="Design YAML (the form of results/<study>/designs/<id>.yaml).")
@click.option("--scenario", "scenario_file", required=True, type=click.Path(dir_okay=False),
              help="Scenario YAML: horizon, windows, popularity drift, load, failures (docs/runtime.md).")
@click.option("--policy", type=click.Choice(list(POLICIES)), default="static", show_default=True,
              help="How the runtime re-maps experts.")
@click.option("--every", "every_s", type=FiniteFloat(0.0, open_min=True), default=None,
              help="Seconds between rebalances (periodic: default 600; threshold: the least gap).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: windows and totals.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Folder for the plots over time (PNG, SVG), a page and the JSON; files there dse did not "
                   "write are never replaced.")
def timeline(study_file: str, design_file: str, scenario_file: str, policy: str, every_s: float | None,
             as_json: bool, out_dir: str | None) -> None:
    """DESIGN under STUDY_FILE through SCENARIO: each window's step costed by the study's evaluator."""
    if every_s is not None and policy not in EVERY_POLICIES:
        fail(f"--every goes with --policy {' or '.join(EVERY_POLICIES)}, not {policy}")
    if out_dir is not None:
        check_out(Path(out_dir))
    study = load_study(study_file)
    design = read_design(design_file, strict=True)
    scenario = load_scenario(scenario_file)
    if every_s is not None and every_s > scenario.horizon_s:
        fail(f"--every: {every_s:g} s is longer than the scenario's horizon_s ({scenario.horizon_s:g} s); "
             f"give at most {scenario.horizon_s:g}")
    prepared = prepare(study)
    prepared.check_design(design, source=design_file)
    result = run_timeline(prepared, design, scenario, policy, every_s)
    if out_dir is not None:
        try:
            with replacing_in_folder(out_dir, list(OUT_FILES), "--out", None) as tmp:
                write_folder(result, tmp, study.name, design_file)
        except OSError as exc:
            fail(f"--out: cannot write {out_dir}: {exc}")
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=1))
        return
    title = f"{Path(design_file).name}: '{scenario.name}', {policy}, {len(result.windows)} windows"
    click.echo(title if len(title) <= 80 else title[:77] + "...")
    rows = table_rows(result)
    for line in rows:
        click.echo(line)
    if len(rows) - 1 < len(result.windows):
        click.echo(f"{len(rows) - 1} of {len(result.windows)} windows shown, evenly spread; --json and --out hold "
                   "every window")
    click.echo("")
    for line in totals_rows(result):
        click.echo(line)
