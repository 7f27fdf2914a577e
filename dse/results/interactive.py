"""The interactive front of ``report.html`` (and of ``dse compare``'s page): Plotly, offline.

The page carries plotly.js once, inline (`plotly.offline.get_plotlyjs`, about 4.8 MB): it opens with no
network. The designs travel as one JSON block (``<script type="application/json">``) that a short script
draws: every objective selectable on either axis, hover showing a design's id and every metric of its
row, and a click on a front design drawing its floorplan (chiplets coloured by kind, directed links
coloured by utilisation, dse.model.traffic) and its per-chiplet breakdown (dse.model.breakdown), the
same figures as the report's floorplans and tables. To keep the page small it holds at most
`MAX_POINTS` front designs (evenly spread over the front sorted by its first objective), `MAX_BACKGROUND`
other feasible designs (grey) and the floorplan and breakdown of `MAX_DETAILS` front designs (the
designs to look at first, then evenly spread); the page states the caps it applied.
"""
from __future__ import annotations

import html
import json
import math
from importlib.resources import files

import numpy as np
import pandas as pd

from ..model.traffic import link_loads, link_utilisation
from ..system.metrics import reported_metrics
from .breakdowns import Breakdowns
from .plots import DISPLAY, KIND_COLOURS, PARETO_COLOUR, better, column

#: front designs drawn in the interactive plot
MAX_POINTS = 1000
#: other feasible designs drawn (grey) behind the front
MAX_BACKGROUND = 3000
#: front designs whose floorplan and per-chiplet breakdown the page embeds
MAX_DETAILS = 60
#: designs x placement units the page's breakdowns may cost: fewer designs' details for studies of many units
#: (each breakdown walks every unit), so the section's time does not grow with the units
DETAIL_UNITS = 90_000
#: units named one by one on a chiplet; above this they are counted by kind
MAX_UNIT_NAMES = 12
DATA_ID = "dse-front-data"


def spread(n: int, cap: int) -> np.ndarray:
    """Row positions of at most ``cap`` of ``n`` rows, evenly spread, first and last included."""
    if n <= cap:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, cap)).astype(int))


def _number(v):
    """A JSON-safe number (NaN and infinities as None)."""
    v = float(v)
    return v if math.isfinite(v) else None


def objective_entries(objectives: list[str]) -> list[dict]:
    """Each objective: its name, metric column, axis label and display unit factor."""
    out = []
    for o in objectives:
        name, factor, unit = DISPLAY[column(o)]
        out.append({"name": o, "column": column(o), "label": f"{name} [{unit}] ({better(o)} is better)",
                    "factor": factor, "unit": unit})
    return out


def metric_entries(df: pd.DataFrame, names: list[str]) -> list[dict]:
    """The numeric metric columns of ``df`` among ``names``, each with its display unit where known
    (SI column names otherwise: the unit is in the name)."""
    out = []
    for c in names:
        if c in df.columns and pd.api.types.is_numeric_dtype(df[c]) and df[c].dtype != bool:
            label, factor, unit = DISPLAY.get(c, (c, 1.0, ""))
            out.append({"column": c, "label": f"{label} [{unit}]" if unit else c, "factor": factor})
    return out


def group(name: str, df: pd.DataFrame, columns: list[str], colour: str, symbol: str = "circle",
          size: int = 8, front: bool = True) -> dict:
    """One set of points: design ids and the values of ``columns`` (SI), in ``df``'s order."""
    return {"name": name, "colour": colour, "symbol": symbol, "size": size, "front": front,
            "ids": [str(i) for i in df["design_id"]],
            "values": {c: [_number(v) for v in df[c].to_numpy(float)] for c in columns if c in df.columns}}


def _units_text(units: str, n_units: int, counts: list[tuple[str, int]]) -> str:
    """A chiplet's units (its ``n_units`` names joined by spaces), or counted by kind when there are many
    (``counts``: dse.results.breakdowns.Breakdowns.kind_counts, kinds in the order first met)."""
    if n_units <= MAX_UNIT_NAMES:
        return units
    return ", ".join(f"{n} {k}" for k, n in counts)


def design_detail(design, prepared, latency_s: float, breakdowns: Breakdowns | None = None) -> dict:
    """A design's floorplan and per-chiplet breakdown as plain data (dse.model.breakdown, dse.model.traffic);
    ``latency_s``: the step the busy shares and link utilisations are taken over (a system's first
    package: that package's own step); ``breakdowns``: the report's (dse.results.breakdowns)."""
    breakdowns = breakdowns or Breakdowns(prepared)
    view = prepared.for_design(design)
    chips = breakdowns.chiplets(design, latency_s)
    counts = breakdowns.kind_counts(design)
    loads = link_loads(design, breakdowns.traffic(design), view.study.hardware.package)
    util = 100.0 * link_utilisation(loads, latency_s).to_numpy(float)
    return {
        "rows": design.rows, "cols": design.cols, "topology": view.study.hardware.package.topology,
        "link": design.link, "ddr_channels": design.ddr_channels, "step_ms": 1e3 * latency_s,
        "system": bool(design.system),
        "chiplets": [{"slot": int(c.slot), "row": int(c.row), "col": int(c.col), "kind": c.kind,
                      "hbm_stacks": int(c.hbm_stacks), "n_units": int(c.n_units),
                      "units": _units_text(c.units, c.n_units, counts[c.slot]) if c.units else "",
                      "stored_GiB": _number(c.stored_GiB), "hbm_GiB": _number(c.hbm_GiB),
                      "spill_GiB": _number(c.spill_GiB), "busy_pct": _number(100 * c.busy_share),
                      "compute_pct": _number(100 * c.compute_s / latency_s), "sent_MB": _number(c.sent_MB),
                      "received_MB": _number(c.received_MB)} for c in chips.itertuples(index=False)],
        "links": [[int(s), int(d), _number(u)] for s, d, u in zip(loads["src_slot"], loads["dst_slot"], util)]}


def detail_cap(units: int, first: int) -> int:
    """How many designs' details the page embeds: `MAX_DETAILS`, fewer than `DETAIL_UNITS` / units but
    never fewer than the ``first`` designs to look at first."""
    return max(first, min(MAX_DETAILS, DETAIL_UNITS // max(units, 1)))


def detail_ids(pareto: pd.DataFrame, first: list[str], cap: int = MAX_DETAILS) -> list[str]:
    """The front designs whose details the page embeds: ``first`` (the designs to look at first), then
    evenly spread over the front, at most ``cap``."""
    ids = [d for d in first if d in set(pareto["design_id"])][:cap]
    for i in spread(len(pareto), cap):
        if len(ids) >= cap:
            break
        d = pareto["design_id"].iloc[i]
        if d not in ids:
            ids.append(d)
    return ids


def report_data(result, prepared, first: list[str], breakdowns: Breakdowns | None = None) -> dict:
    """The data of the report's interactive front: the feasible designs (grey), the front, and the
    floorplan and breakdown of the designs `detail_ids` picks (``breakdowns``: the report's, whose
    designs' breakdowns are reused)."""
    breakdowns = breakdowns or Breakdowns(prepared)
    objectives = result.study.search.objectives
    pareto = result.pareto
    names = reported_metrics(result.study, pareto.columns)
    metrics = metric_entries(pareto, names)
    shown = [m["column"] for m in metrics]
    ev = result.evaluations
    others = ev[ev["feasible"] & ~ev["pareto"]] if "pareto" in ev else ev[ev["feasible"]]
    front = pareto.iloc[spread(len(pareto), MAX_POINTS)]
    background = others.iloc[spread(len(others), MAX_BACKGROUND)]
    objective_cols = [column(o) for o in objectives]
    rows = pareto.set_index("design_id")
    details = {}
    cap = detail_cap(len(prepared.tables.unit_names), len(first))
    for design_id in detail_ids(pareto, first, cap):
        design = result.designs[design_id]
        latency = float(rows.loc[design_id, "latency_s"])
        if design.system:           # a system's floorplan is its first package's, over that package's step
            latency = float(prepared.for_design(design).evaluator.evaluate_designs(
                [design], with_faults=False)["latency_s"].iloc[0])
        details[design_id] = design_detail(design, prepared, latency, breakdowns)
    caps = []
    if len(front) < len(pareto):
        caps.append(f"{len(front)} of the {len(pareto)} front designs drawn, evenly spread (all in pareto.csv)")
    if len(background) < len(others):
        caps.append(f"{len(background)} of the {len(others)} other feasible designs drawn")
    caps.append(f"floorplans and breakdowns embedded for {len(details)} of the {len(pareto)} front designs "
                f"(the designs to look at first, then evenly spread; at most {cap}: {MAX_DETAILS}, fewer when "
                f"{DETAIL_UNITS:,} / units is less)")
    return {"title": f"{result.study.name}: the front", "objectives": objective_entries(objectives),
            "metrics": metrics, "details": details, "notes": caps,
            "kind_colours": {k: KIND_COLOURS[i % len(KIND_COLOURS)]
                             for i, k in enumerate(prepared.tables.kind_names)},
            "groups": [group("other feasible designs", background, objective_cols, "#b0b0b0", size=5, front=False),
                       group("Pareto front", front, shown, PARETO_COLOUR)]}


def plotly_script() -> str:
    """plotly.js, inline, once per page."""
    from plotly.offline import get_plotlyjs
    return f"<script type=\"text/javascript\">{get_plotlyjs()}</script>"


def data_script(data: dict) -> str:
    """The page's data as a JSON script block (``</`` escaped so no string ends the block)."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return f'<script type="application/json" id="{DATA_ID}">{text}</script>'


INTRO = ("Hover a design for its id and every metric; click a front design for its floorplan and per-chiplet "
         "breakdown; choose the objectives on the axes.")


def block(data: dict, heading: str = "Explore the front", intro: str = INTRO) -> str:
    """The interactive section: heading, the caps applied, the plot, the detail panes, plotly.js, the data
    and the script that draws them."""
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in data.get("notes", []))
    script = (files(__package__) / "interactive.js").read_text()
    return (f"<h2>{html.escape(heading)}</h2>\n<p>{html.escape(intro)}</p>\n"
            f"<ul class=\"dse-caps\">{notes}</ul>\n"
            "<div id=\"dse-axes\"></div><div id=\"dse-front\" style=\"height:520px\"></div>\n"
            "<div id=\"dse-detail\"><p><em>Click a front design.</em></p></div>"
            "<div id=\"dse-floorplan\"></div><div id=\"dse-breakdown\"></div>\n"
            f"{plotly_script()}\n{data_script(data)}\n<script type=\"text/javascript\">{script}</script>\n")
