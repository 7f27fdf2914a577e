"""``dse validate``: check a study without running it."""
from __future__ import annotations

import click

from ..study.spec import load_study
from ..system.prepare import prepare
from .common import cli
from .output import compiles


@cli.command("validate")
@click.argument("study_file", type=click.Path(dir_okay=False))
@compiles("validate")
def validate(study_file: str) -> None:
    """Check STUDY_FILE: schema, names, the model, and that its workload extracts."""
    study = load_study(study_file)
    p = prepare(study)
    click.echo(f"ok: study '{study.name}': {study.workload.label} {study.workload.phase}, "
               f"{p.tables.n_units} placement units, {len(p.tables.kind_names)} chiplet kinds, "
               f"{p.space.n_var} decision variables"
               + (f", {len(p.variants)} package variants ({'; '.join(p.package_evaluator.labels)})" if p.variants else "")
               + (_system_text(study, p) if study.system is not None else ""))


def _system_text(study, p) -> str:
    layouts = study.system.parallel.layouts()
    hw = p.system_evaluator.hardware
    packages = [a * b * c for a, b, c in layouts]
    return (f"; a system of {min(packages)} to {max(packages)} packages in {len(layouts)} layouts, "
            f"{hw.packages_per_node} per node on {hw.fabric}" + (f", nodes on {hw.network}" if hw.network else ""))
