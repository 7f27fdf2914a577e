"""The study report: ``report.md`` and a self-contained ``report.html`` beside the results tables.

It tells a reader who has not seen the study file what was explored (inputs), what was found (the
front as a table and as plots), and which designs to look at first: the best design for each objective
and the balanced knee design (dse.results.knee), each with a per-chiplet breakdown (dse.model.breakdown) and a
floorplan. Every figure in it is read from the results tables or computed by the study's models.
"""
from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import markdown
import pandas as pd

import noc

from ..model.objectives import OBJECTIVE_COLUMNS, OBJECTIVES
from .breakdowns import Breakdowns
from .expert_kinds import expert_kind_lines
from .interactive import block as interactive_block, report_data
from .knee import knee_index
from ..serving.load_curve import load_curve
from .load_curve_plot import load_curve_section, plot_load_curve
from .number_format import column_format
from .plots import DISPLAY, better, column, save, write_plots
from .system_plot import plot_system
from .timeline_section import timeline_section
from .verdict import design_verdict

MAX_FRONT_ROWS = 50

#: requests the report's load curve simulates at each of its rates
LOAD_CURVE_REQUESTS = 2000


def picks(result) -> dict[str, str]:
    """Designs to look at first: {design id: why} — the balanced design, then the best per objective."""
    objectives = result.study.search.objectives
    if result.pareto.empty:
        return {}
    out: dict[str, list[str]] = {}
    k = knee_index(result.pareto, objectives)
    out.setdefault(result.pareto["design_id"].iloc[k], []).append("balanced design")
    for o in objectives:
        out.setdefault(result.best(o)["design_id"], []).append(f"best {o}")
    return {d: ", ".join(why) for d, why in out.items()}


def _fmt(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def table(df: pd.DataFrame) -> str:
    """A markdown table (pipes in cells escaped), one number format per float column (number_format)."""
    if df.empty:
        return "_none_"
    head = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "".join("---:|" if pd.api.types.is_numeric_dtype(df[c]) else ":---|" for c in df.columns)
    fmt = [column_format(df[c]) if pd.api.types.is_float_dtype(df[c]) else None for c in df.columns]
    body = ["| " + " | ".join((format(v, f) if f and isinstance(v, float) else str(v)).replace("|", "\\|")
                              for v, f in zip(row, fmt)) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, rule] + body)


def objective_columns(df: pd.DataFrame, objectives: list[str]) -> pd.DataFrame:
    """Objectives in display units with their unit in the header."""
    out = pd.DataFrame(index=df.index)
    for o in objectives:
        name, factor, unit = DISPLAY[column(o)]
        out[f"{o} [{unit}]"] = df[column(o)].astype(float) * factor
    return out


def _kinds_summary(row: pd.Series, kind_names: list[str]) -> str:
    return ", ".join(f"{int(row[f'n_{k}'])} {k}" for k in kind_names if f"n_{k}" in row and row[f"n_{k}"])


def package_line(package) -> str:
    """The package the study explores: topology (or topologies), shape range, link technologies, routing."""
    links = " or ".join(f"`{name}` links ({tech.bandwidth_Bps / 1e9:.4g} GB/s per direction, "
                        f"{tech.hop_latency_s * 1e9:.3g} ns per hop)"
                        for name, tech in ((n, noc.link_tech(n)) for n in package.link_choices))
    mesh = package.mesh
    shape = (f"a graph of {mesh.rows[0] * mesh.cols[0]} chiplets and {len(package.links)} links"
             if package.topology == "graph" else f"a {' or '.join(package.topology_choices)} of "
             f"{mesh.rows[0]}-{mesh.rows[1]} rows by {mesh.cols[0]}-{mesh.cols[1]} columns of chiplets")
    return (f"- **Package**: {shape}, {links}, "
            f"{'XY' if package.routing_algorithm == 'xy' else 'shortest-path'} routing.")


def system_lines(study, prepared) -> list[str]:
    """The system around the packages, when the study has one (dse.system)."""
    if study.system is None:
        return []
    hw = prepared.system_evaluator.hardware
    parallel = study.system.parallel
    fabric = hw.fabric_level()
    network = (f"nodes joined by `{hw.network}` ({hw.network_topology}, {hw.nics_per_node} NICs per node)"
               if hw.network else "a single node")
    return [f"- **System**: {hw.packages_per_node} packages per node on `{hw.fabric}` "
            f"({fabric.bandwidth_Bps / 1e9:.4g} GB/s per package per direction), {network}"
            + (f" (preset `{hw.preset}`)" if hw.preset else "") + "; the search chooses pipeline stages from "
            f"{parallel.pipeline}, expert-parallel ranks from {parallel.experts} and replicas from "
            f"{parallel.replicas}.",
            f"- **Carbon**: grid `{study.carbon.grid}`, dies made on `{study.carbon.fab_grid}` power, "
            f"{study.carbon.lifetime_years:g}-year lifetime at {100 * study.carbon.utilisation:g} % use (ACT)."]


#: the fields of each routing distribution that shape it (the others are ignored by it)
ROUTING_FIELDS = {"uniform": (), "zipf": ("s",), "dirichlet": ("alpha",), "trace": ("trace",)}


def routing_words(routing) -> str:
    """The expert routing in words: ``routing: zipf (s: 0.5, seed: 0)``, only the fields its distribution
    reads (the seed where it draws, the inter-layer affinity when set)."""
    r = routing.model_dump() if hasattr(routing, "model_dump") else dict(routing)
    kind = r.get("distribution", "uniform")
    fields = list(ROUTING_FIELDS.get(kind, ())) + (["seed"] if kind != "trace" else []) + \
        (["affinity"] if r.get("affinity") else [])
    shown = [f"{k}: {Path(r[k]).name if k == 'trace' else _fmt(r[k])}" for k in fields if r.get(k) is not None]
    return f"routing: {kind}" + (f" ({', '.join(shown)})" if shown else "")


def memory_text(stored_gib: float, hbm_gib: float) -> str:
    """What a chiplet stores against its HBM, ``10.5 / 16`` GiB, or ``10.5 / no HBM`` without stacks."""
    return f"{stored_gib:.3g} / {hbm_gib:.3g}" if hbm_gib > 0 else f"{stored_gib:.3g} / no HBM"


def inputs_section(result, prepared) -> list[str]:
    s = result.study
    w, hw = s.workload, s.hardware
    t = prepared.tables
    graph = t.workload.graph
    kinds: dict[str, int] = {}
    for u in t.unit_names:
        kinds[graph.nodes[u]["kind"]] = kinds.get(graph.nodes[u]["kind"], 0) + 1
    routing = getattr(w, "routing", None)
    routing_text = f", {routing_words(routing)}" if routing is not None else ""
    lines = ["## What was explored", "",
             f"- **Workload**: `{w.model}`, {w.phase}, batch {w.batch}, context {w.context} tokens, "
             f"{w.precision}{routing_text}; {t.tokens_per_step} tokens per step. It is cut into "
             f"{len(t.unit_names)} placement units ({', '.join(f'{n} {k}' for k, n in kinds.items())}): "
             "the search decides which chiplet(s) hold each unit.",
             package_line(hw.package), *system_lines(s, prepared),
             "- **Memory**: " + "; ".join(
                 f"{' or '.join(m.kinds)} {m.count_range[0]}-{m.count_range[1]} {'stacks' if m.is_hbm else 'channels'}"
                 for m in hw.memory) + " (HBM stacks are spread over the chiplets, DDR is shared).",
             f"- **Mapping**: {s.mapping.kind}, up to {s.mapping.max_replicas} copies of a unit.",
             f"- **Constraints**: " + (", ".join(f"{k} <= {v}" for k, v in s.constraints.model_dump().items()
                                                if v is not None) or "none") + ".",
             f"- **Search**: {s.search.algorithm}, population {s.search.population}, {s.search.generations} "
             f"generations, seed {s.search.seed}; objectives: " +
             ", ".join(f"{o} ({better(o)} is better)" for o in s.search.objectives) + ".",
             "", "Chiplet library (area and cost per die from the study's technology models):", ""]
    lib = pd.DataFrame([{                 # the library as built (presets and options resolved), one row per kind
        "chiplet": c.name, "kind": c.kind, "array": f"{c.rows}x{c.cols}" if hasattr(c, "rows") else "-",
        "dataflow": getattr(c, "dataflow", "-"),
        "SRAM [MB]": getattr(c, "sram_bytes", getattr(c, "l2_bytes", 0.0)) / 2**20, "clock [GHz]": c.freq_hz / 1e9,
        "node": c.node, "die area [mm²]": float(t.kind_area_mm2[i]), "die cost [$]": float(t.kind_cost_usd[i])}
        for i, c in enumerate(hw.library())])
    return lines + [table(lib), ""]


def glance_section(result, chosen: dict[str, str]) -> list[str]:
    ev = result.evaluations
    s = result.study
    lines = ["## Results at a glance", "",
             f"{len(ev)} designs evaluated, {int(ev['feasible'].sum())} feasible (within memory and budgets), "
             f"**{len(result.pareto)} on the Pareto front**: no other feasible design is at least as good in "
             "every objective and better in one.", ""]
    if not chosen:
        return lines + ["_No feasible design was found: loosen the constraints or widen the ranges._", ""]
    rows = result.pareto.set_index("design_id").loc[list(chosen)]
    view = pd.concat([pd.DataFrame({"design": list(chosen), "why": list(chosen.values()),
                                    "mesh": [f"{r.rows}x{r.cols}" for r in rows.itertuples()]}, index=rows.index),
                      objective_columns(rows, s.search.objectives)], axis=1)
    return lines + ["Designs to look at first (details below):", "", table(view), ""]


PLOT_TEXT = {
    "front": "Each dot is a design; red dots are the Pareto set (best trade-offs over all objectives), "
             "the black line the trade-off in just these two, the star the balanced design.",
    "scatter_matrix": "All pairs of objectives at once, and how the Pareto set spreads in each.",
    "parallel_coordinates": "One line per Pareto design across every objective, best at the bottom of "
                            "each axis: lines that stay low are good all-rounders.",
    "roofline": "Each unit of the workload alone on each chiplet kind (the study's attribute table, "
                "`dse characterize`): FLOPs per DRAM byte against attained FLOP/s, under the kind's peak and "
                "memory-bandwidth ceilings. Points far under both lines lose time to something else "
                "(fill and drain, kernel overheads, weight loading).",
    "convergence": "How the quality of the front grew with generations of the search; a curve still "
                   "rising at the end means more generations could find better designs.",
}


def plots_section(figures: dict[str, str]) -> list[str]:
    lines = ["## Plots", ""]
    fronts = [n for n in figures if n.startswith("front_")]
    if fronts:
        lines += ["### Trade-offs between pairs of objectives", "", PLOT_TEXT["front"], ""]
        lines += [f"![{n}]({figures[n]})" for n in fronts] + [""]
    for name, heading in (("scatter_matrix", "All objectives"), ("parallel_coordinates", "Parallel coordinates"),
                          ("convergence", "Search convergence"), ("roofline", "Units on each chiplet's roofline")):
        if name in figures:
            lines += [f"### {heading}", "", PLOT_TEXT[name], "", f"![{name}]({figures[name]})", ""]
    return lines


def system_text(design, row: pd.Series, package_step_s: float) -> str:
    """What a system design is, in words: its packages, nodes, layout and carbon."""
    s = design.system
    share = 100 * row["carbon_embodied_g_per_token"] / row["carbon_g_per_token"] if row["carbon_g_per_token"] else 0
    return (f"**A system of {int(row['packages'])} such packages in {int(row['nodes'])} node(s)**: {s['pipeline']} "
            f"pipeline stage(s) x {s['experts']} expert-parallel rank(s) x {s['replicas']} replica(s). The step "
            f"spends {row['comm_fabric_s'] * 1e3:.3g} ms on the fabric and {row['comm_network_s'] * 1e3:.3g} ms on "
            f"the network. Carbon {row['carbon_g_per_token'] * 1e3:.3g} mg CO2e per token, {share:.0f} % of it "
            f"embodied ({row['embodied_kg']:.4g} kg CO2e in the packages). The floorplan and the table below are "
            f"package 0 (pipeline stage 0, expert rank 0), whose own step takes {package_step_s * 1e3:.3g} ms.")


#: units a report's per-chiplet table names; a chiplet holding more has them counted by kind
MAX_UNITS_NAMED = 12


def held_text(units: str, n_units: int, counts: list[tuple[str, int]]) -> str:
    """The units a chiplet holds (its ``n_units`` names joined by spaces) for a table cell: the names when few,
    else how many of each kind (``250 expert, 1 attention``; ``counts``: the chiplet's
    dse.results.breakdowns.Breakdowns.kind_counts, kinds in the order first met): as long for 15,000 units as for 15."""
    if not n_units:
        return "-"
    return units if n_units <= MAX_UNITS_NAMED else ", ".join(f"{n} {kind}" for kind, n in counts)


def design_section(result, prepared, design_id: str, why: str, figures: dict[str, str],
                   breakdowns: Breakdowns | None = None) -> list[str]:
    row = result.pareto.set_index("design_id").loc[design_id]
    design = result.designs[design_id]
    objectives = result.study.search.objectives
    kinds = _kinds_summary(row, prepared.tables.kind_names)
    metric_text = ", ".join(f"{o} {v:.4g} {DISPLAY[column(o)][2]}"
                            for o, v in zip(objectives, objective_columns(row.to_frame().T, objectives).iloc[0]))
    lines = [f"### `{design_id}`: {why}", "",
             f"{design.rows} x {design.cols} mesh ({kinds}), {int(row['hbm_stacks'])} HBM stacks, "
             f"{design.ddr_channels} DDR channels, {design.mapping} mapping. {metric_text}; "
             f"cost ${row['cost_usd']:.4g}, peak power {row['peak_power_w']:.4g} W. "
             f"Design file: `designs/{design_id}.yaml`.", ""]
    latency = float(row["latency_s"])
    if design.system:
        latency = float(prepared.for_design(design).evaluator.evaluate_designs([design], with_faults=False)
                        ["latency_s"].iloc[0])
        lines += [system_text(design, row, latency), ""]
        if f"system_{design_id}" in figures:
            lines += [f"![system {design_id}]({figures[f'system_{design_id}']})", ""]
    if f"floorplan_{design_id}" in figures:
        lines += [f"![floorplan {design_id}]({figures[f'floorplan_{design_id}']})", ""]
    breakdowns = breakdowns or Breakdowns(prepared)
    chips, counts = breakdowns.chiplets(design, latency), breakdowns.kind_counts(design)
    view = pd.DataFrame({
        "slot (row, col)": [f"{c.slot} ({c.row}, {c.col})" for c in chips.itertuples()],
        "kind": chips["kind"], "units held": [held_text(*c) for c in zip(chips["units"], chips["n_units"], counts)],
        "stored / HBM [GiB]": [memory_text(a, b) for a, b in zip(chips["stored_GiB"], chips["hbm_GiB"])],
        "to DDR [GiB]": chips["spill_GiB"], "busy [% of step]": 100 * chips["busy_share"],
        "compute [% of step]": 100 * chips["compute_s"] / latency,
        "sent / received [MB per step]": [f"{a:.3g} / {b:.3g}" for a, b in zip(chips["sent_MB"],
                                                                               chips["received_MB"])]})
    return lines + ["Per chiplet (busy = compute or memory-bound time of the units it holds; the rest of the "
                    "step it waits for other chiplets, the network or DDR):", "", table(view), ""]


def front_section(result, prepared) -> list[str]:
    s = result.study
    p = result.pareto
    shown = p.head(MAX_FRONT_ROWS)
    view = pd.concat([pd.DataFrame({
        "design": shown["design_id"], "mesh": [f"{r}x{c}" for r, c in zip(shown["rows"], shown["cols"])],
        "chiplets": [_kinds_summary(r, prepared.tables.kind_names) for _, r in shown.iterrows()],
        "HBM stacks": shown["hbm_stacks"], "DDR ch.": shown["ddr_channels"]}),
        objective_columns(shown, s.search.objectives)], axis=1)
    more = f" (the first {MAX_FRONT_ROWS} of {len(p)}; all in `pareto.csv`)" if len(p) > MAX_FRONT_ROWS else ""
    return [f"## The Pareto front{more}", "", f"Sorted by {s.search.objectives[0]}.", "", table(view), ""]


FILES_TEXT = """## Files in this folder

| file | what it holds |
|---|---|
| `pareto.csv` | the Pareto designs: decisions and every metric (units in column names) |
| `evaluations.csv` | every evaluated design with its generation and `feasible` / `pareto` flags |
| `designs/<id>.yaml` | each Pareto design; `dse export <this folder> --design <id> --to rapidchiplet` \
(or booksim, gem5, scalesim, chakra) hands it to other tools |
| `plots/` | every figure as PNG and SVG |
| `study.yaml` | the study as run, defaults filled in |
"""


def report_markdown(result, prepared, figures: dict[str, str], extra: list[str] = (),
                    breakdowns: Breakdowns | None = None) -> str:
    """The report as markdown; ``figures`` maps figure names to paths relative to the report; ``extra`` lines
    (a serving study's load curve, where the experts land) follow the chosen designs."""
    s = result.study
    chosen = picks(result)
    where = "systems of chiplet packages" if s.system is not None else "chiplet packages"
    lines = [f"# Study `{s.name}`: {s.workload.model} {s.workload.phase} on {where}", "",
             "Written by `dse run`. The search tried packages of compute chiplets, HBM and DDR, and which "
             "chiplet serves which part of the model, then kept the designs that no other design beats in "
             "every objective. Start with the table of designs to look at first, then the plots.", ""]
    lines += glance_section(result, chosen)
    lines += inputs_section(result, prepared)
    if chosen:
        lines += plots_section(figures)
        lines += ["## Designs to look at first", ""]
        for design_id, why in chosen.items():
            lines += design_section(result, prepared, design_id, why, figures, breakdowns)
        lines += list(extra)
    lines += front_section(result, prepared) if chosen else []
    lines += [FILES_TEXT]
    return "\n".join(lines)


CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:0.85em;margin:0.5em 0}th,td{border:1px solid #ccc;padding:3px 6px}
th{background:#f0f0f0}img{max-width:100%;border:1px solid #eee;margin:0.3em 0}
p>img:not(:only-child){max-width:49.5%}code{background:#f5f5f5;padding:0 3px}h1{font-size:1.6em}"""


def report_html(md_text: str, folder: Path, title: str, interactive: str = "") -> str:
    """The markdown report as one self-contained HTML page (figures embedded as PNG data); ``interactive``
    (dse.results.interactive's section) goes before the plots."""
    body = markdown.markdown(md_text, extensions=["tables"])
    if interactive:
        at = body.find("<h2>Plots</h2>")
        body = body[:at] + interactive + body[at:] if at >= 0 else body + interactive

    def embed(match: re.Match) -> str:
        src = match.group(1)
        path = folder / src
        if path.suffix == ".png" and path.exists():
            data = base64.b64encode(path.read_bytes()).decode()
            return f'src="data:image/png;base64,{data}"'
        return match.group(0)

    body = re.sub(r'src="([^"]+)"', embed, body)
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body>\n{body}\n</body></html>\n")


def write_report(result, folder: str | Path, prepared=None, svg: bool = False) -> dict[str, Path]:
    """Plots into ``folder/plots`` (PNG; SVG too with ``svg``), ``report.md`` / ``report.html`` into ``folder``."""
    folder = Path(folder)
    prepared = prepared or result.prepare()
    chosen = picks(result)
    breakdowns = Breakdowns(prepared)              # each shown design's breakdown, computed once
    pngs = write_plots(result, folder / "plots", prepared, floorplans=chosen, breakdowns=breakdowns, svg=svg)
    if result.study.system is not None:
        rows = result.pareto.set_index("design_id")
        for design_id, why in chosen.items():
            fig = plot_system(result.designs[design_id], prepared, rows.loc[design_id], title=f"{why} {design_id}")
            pngs[f"system_{design_id}"] = save(fig, folder / "plots", f"system_{design_id}", svg)[0]
    extra = []
    if result.study.serving is not None and chosen:
        design_id = next(iter(chosen))
        curve = load_curve(prepared.evaluator, result.designs[design_id], requests=LOAD_CURVE_REQUESTS)
        pngs["load_curve"] = save(plot_load_curve(curve, result.study, f"{chosen[design_id]} {design_id}"),
                                  folder / "plots", "load_curve", svg)[0]
        extra = load_curve_section(curve, str(pngs["load_curve"].relative_to(folder)), design_id,
                                   LOAD_CURVE_REQUESTS)
    timeline_pngs, timeline_lines = timeline_section(result, prepared, folder)     # a runtime study's
    pngs.update(timeline_pngs)
    extra += timeline_lines + (expert_kind_lines(result, prepared, *list(chosen.items())[0], breakdowns) if chosen else [])
    figures = {name: str(path.relative_to(folder)) for name, path in pngs.items()}
    md_text = report_markdown(result, prepared, figures, extra, breakdowns)
    (folder / "report.md").write_text(md_text)
    front = interactive_block(report_data(result, prepared, list(chosen), breakdowns)) if chosen else ""
    (folder / "report.html").write_text(report_html(md_text, folder, f"Study {result.study.name}", front))
    return {"report.md": folder / "report.md", "report.html": folder / "report.html", **pngs}


def summary_markdown(result) -> str:
    """The one-page summary.md of a `StudyResult`: inputs, the front, best per objective, convergence."""
    s = result.study
    ev = result.evaluations
    front = pd.concat([result.pareto[["design_id", "n_chiplets", "hbm_stacks", "ddr_channels"]],
                       objective_columns(result.pareto, s.search.objectives)], axis=1)
    lines = [f"# Study `{s.name}`", "",
             f"- workload: {s.workload.label}, {s.workload.phase}, batch {s.workload.batch}, "
             f"context {s.workload.context}, {s.workload.precision}",
             f"- search: {s.search.algorithm}, population {s.search.population}, "
             f"{s.search.generations} generations, seed {s.search.seed}",
             f"- designs evaluated: {len(ev)}, feasible: {int(ev['feasible'].sum())}, "
             f"on the Pareto front: {len(result.pareto)}"] + _screening_lines(result.screening) + \
        baseline_lines(result) + [
             "", "## Pareto front", "", _markdown_table(front), ""]
    if len(result.pareto):
        lines += ["## Best design per objective", ""]
        for objective in s.search.objectives:
            best = result.best(objective)
            column = OBJECTIVE_COLUMNS[objective]
            lines.append(f"- {objective}: `{best['design_id']}` ({column} = {best[column]:.4g})")
    if result.convergence is not None and len(result.convergence):
        last = result.convergence.iloc[-1]
        ref = ", ".join(f"{OBJECTIVE_COLUMNS[o]} {v:.4g}" for o, v in result.reference_point.items())
        lines += ["", "## Convergence", "",
                  f"- normalised hypervolume of the front: {last['hypervolume']:.4f} after "
                  f"{int(last['generation']) + 1} generations (convergence.csv has every generation)",
                  f"- reference point: {ref}"]
    return "\n".join(lines) + "\n"


def baseline_lines(result) -> list[str]:
    """The EPLB-style seed (dse.search.baseline) against the best evaluated design, per objective."""
    if getattr(result, "baseline", None) is None:
        return []
    ev = result.evaluations
    seed = ev.loc[ev["design_id"] == result.baseline].iloc[0]
    if not bool(seed["feasible"]):        # its workload metrics are penalties, not figures (evaluations.csv)
        why = "; ".join(design_verdict(seed, result.study).reasons) or "not feasible"
        return [f"- baseline to beat: the EPLB-style seed `{result.baseline}` is infeasible ({why})"]
    found = ev[ev["feasible"]]          # the seed among them
    parts = [f"{c} {seed[c]:.4g} (best {found[c].min() if sign > 0 else found[c].max():.4g})"
             for c, sign in (OBJECTIVES[o] for o in result.study.search.objectives)]
    return [f"- baseline to beat, the EPLB-style seed `{result.baseline}`: " + ", ".join(parts)]


def _screening_lines(screening: dict | None) -> list[str]:
    """What a screened search's exact re-evaluation changed (dse.search.screening), for the summary."""
    if not screening:
        return []
    worst = max(screening["max_abs_error"].items(), key=lambda kv: kv[1], default=None)
    change = f"; largest change of a metric: {worst[0]} by {worst[1]:.3g}" if worst else "; no metric changed"
    return [f"- screened search (search.screening): the front and the final population ({screening['reevaluated']} "
            f"designs) evaluated again exactly; the front kept {screening['front_kept']} of its "
            f"{screening['front_screened']} screened designs, {screening['front_exact']} on the exact front{change} "
            "(screening.json)"]


def _markdown_table(df: pd.DataFrame) -> str:
    """``df`` as a markdown table, each column of numbers in one format (dse.results.number_format)."""
    if df.empty:
        return "_no feasible design found_"
    cells = [[format(v, column_format(df[c])) if isinstance(v, float) else str(v) for v in df[c]] for c in df.columns]
    return "\n".join(["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)] +
                     ["| " + " | ".join(row) + " |" for row in zip(*cells)])
