"""The timeline of a runtime study's balanced design in the report (docs/runtime.md): when a study has a
``runtime`` section, `dse run`'s report follows its balanced (knee) design through the study's scenario
under its policy (dse.runtime.timeline, the numbers its runtime objectives were ranked by) and draws the
windows over time with dse.runtime.report's figure."""
from __future__ import annotations

from pathlib import Path

from ..runtime.report import plot, totals_rows
from ..runtime.scenario import load_scenario
from ..runtime.timeline import run_timeline
from .knee import knee_index

TEXT = ("The balanced design through the study's scenario '{scenario}' under the `{policy}` policy "
        "(dse timeline, docs/runtime.md): served tokens per second, step latency, max / mean chiplet load, "
        "bytes migrated and the share served, window by window (red: a component down). These are the "
        "windows the search's runtime objectives sum.")


def timeline_section(result, prepared, folder: Path) -> tuple[dict[str, Path], list[str]]:
    """(figures written, report lines) of the balanced design's timeline; nothing without ``runtime``."""
    spec = result.study.runtime
    if spec is None or result.pareto.empty:
        return {}, []
    design_id = result.pareto["design_id"].iloc[knee_index(result.pareto, result.study.search.objectives)]
    scenario = load_scenario(spec.scenario)
    line = run_timeline(prepared, result.designs[design_id], scenario, spec.policy, spec.every_s, spec.bound)
    (folder / "plots").mkdir(parents=True, exist_ok=True)
    png, svg = plot(line, folder / "plots" / f"timeline_{design_id}")
    lines = [f"## Timeline of {design_id} (balanced design)", "",
             TEXT.format(scenario=scenario.name, policy=spec.policy), "",
             f"![timeline]({png.relative_to(folder)})", "", "| total | value |", "|---|---|"]
    lines += [f"| {row.split()[0]} | {row.split(maxsplit=1)[1]} |" for row in totals_rows(line)]
    return {"timeline": png, "timeline_svg": svg}, lines + [""]
