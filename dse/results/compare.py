"""Several runs' fronts side by side (``dse compare``): one reference point, hypervolumes, dominance.

Each run is a results folder (``study.yaml`` and ``pareto.csv``); every run must have the same set of
objectives (their order is the first run's). Objectives are read as costs, lower better with 0 ideal
(dse.search.hypervolume.costs: throughput and other rates as their inverse, fault tolerance as the
fraction lost), then normalised per objective over the union of all runs' fronts: 0 is the best cost any
run reached, 1 the worst (a flat objective: 0 everywhere). The common reference point is 1.1 in every
normalised objective, the worst value over all runs plus a tenth of the range, so every front design
counts and the fronts are measured in one box whatever their run's own reference point was. Each
run's ``hypervolume`` is the fraction of that box, [0, 1.1]^m, its front dominates (Zitzler & Thiele
1998, computed exactly by pymoo's HV indicator): 1 would be one design at the best of every objective.

Dominance is Pareto dominance on the costs: a design dominates another when it is no worse in every
objective and better in one (equal designs dominate neither). For each ordered pair of runs the
comparison counts the other run's designs that some design of the run dominates, names them, and counts
the designs of the combined front (not dominated by any design of any run) each run holds.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
from pymoo.indicators.hv import HV

from ..errors import StudyError
from ..model.objectives import OBJECTIVES
from ..search.hypervolume import costs, from_cost
from ..system.metrics import reported_metrics
from .folder import read_baseline, read_study_file
from .interactive import MAX_POINTS, block, group, metric_entries, objective_entries, spread
from .plots import Figure, PARETO_COLOUR, label, shown

MARGIN = 1.1
INTRO = ("Hover a design for its run, id and every metric; click one for its design file; choose the objectives "
         "on the axes.")
REFERENCE_RULE = ("objectives as costs (dse.search.hypervolume), each normalised to [0, 1] between the best "
                  "and worst value over all runs' fronts; reference point 1.1 in each; hypervolume as the "
                  "fraction of the box [0, 1.1]^m the front dominates")
COLOURS = [PARETO_COLOUR, "#2c7fb8", "#31a354", "#756bb1", "#e6550d", "#636363", "#d6616b", "#8c6d31"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
PLOTLY_SYMBOLS = ["circle", "square", "triangle-up", "diamond", "triangle-down", "cross", "x", "star"]


@dataclass
class Run:
    """One results folder: its label, path, study and front (``pareto.csv``)."""

    label: str
    path: Path
    study: object
    front: pd.DataFrame
    baseline: dict | None = None      # the EPLB-style seed of a seeded run (baseline.json; `baseline_entry`)


@dataclass
class Comparison:
    """Runs compared in one normalised box (module docstring)."""

    runs: list[Run]
    objectives: list[str]
    ideal: np.ndarray                 # best cost per objective over all fronts
    nadir: np.ndarray                 # worst cost per objective over all fronts
    hypervolume: list[float]
    on_combined_front: list[int]
    dominance: list[dict] = field(default_factory=list)

    def reference_point(self) -> dict[str, float]:
        """The reference point in each objective's own metric unit."""
        span = np.where(self.nadir > self.ideal, self.nadir - self.ideal, 1.0)
        ref = self.ideal + MARGIN * span
        return {o: float(from_cost(o, ref[j])) for j, o in enumerate(self.objectives)}

    def as_dict(self) -> dict:
        """The stable JSON object of ``dse compare --json`` (keys documented in docs/results.md)."""
        return {
            "objectives": list(self.objectives),
            "reference_rule": REFERENCE_RULE,
            "reference_point": self.reference_point(),
            "ideal": {o: float(from_cost(o, self.ideal[j])) for j, o in enumerate(self.objectives)},
            "nadir": {o: float(from_cost(o, self.nadir[j])) for j, o in enumerate(self.objectives)},
            "runs": [{"label": r.label, "path": str(r.path), "study": r.study.name, "front_size": len(r.front),
                      "hypervolume": hv, "on_combined_front": n, "baseline": r.baseline}
                     for r, hv, n in zip(self.runs, self.hypervolume, self.on_combined_front)],
            "dominance": self.dominance}


def load_run(path: str | Path) -> tuple[object, pd.DataFrame]:
    """(study, front) of results folder ``path``; a `StudyError` naming it when it is not one."""
    folder = Path(path)
    if not folder.is_dir():
        raise StudyError(f"{folder} is not a results folder (no such folder)")
    if not (folder / "pareto.csv").is_file():
        raise StudyError(f"{folder} is not a results folder (no pareto.csv); run `dse run STUDY.yaml` first")
    study = read_study_file(folder)
    try:
        front = pd.read_csv(folder / "pareto.csv").rename(columns={"power_w": "peak_power_w"})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise StudyError(f"{folder} is not a results folder (pareto.csv unreadable: {exc})") from None
    if "design_id" not in front.columns:
        raise StudyError(f"{folder} is not a results folder (pareto.csv has no design_id column)")
    return study, check_front(front, study, folder / "pareto.csv")


def check_front(front: pd.DataFrame, study, path: Path) -> pd.DataFrame:
    """``front`` with each objective's metric column, and every other metric column it has, as numbers; a
    `StudyError` naming the folder, the file and the column when an objective's is missing or a metric
    cell is not a number (a hand-edited file)."""
    front = front.copy()
    objectives = list(study.search.objectives)
    wanted = [OBJECTIVES[o][0] for o in objectives]
    for objective, column in zip(objectives, wanted):
        if column not in front.columns:
            raise StudyError(f"{path}: no column {column!r} (objective {objective}); a pareto.csv of a study "
                             f"with objectives {', '.join(objectives)} holds {', '.join(wanted)}")
    for column in dict.fromkeys(wanted + [c for c in reported_metrics(study) if c in front.columns]):
        if pd.api.types.is_numeric_dtype(front[column]):
            continue
        values = pd.to_numeric(front[column], errors="coerce")
        bad = values.isna() & front[column].notna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise StudyError(f"{path}: column {column!r} holds {str(front[column].iloc[row])!r} in row {row + 1} "
                             "of the table; give a number")
        front[column] = values.astype(float)
    return front


def labels(paths: list[Path]) -> list[str]:
    """A short name per run: its folder's name, the path given when names repeat, ``#k`` when both do."""
    names = [p.name or str(p) for p in paths]
    if len(set(names)) < len(names):
        names = [str(p) for p in paths]
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}#{seen[n]}")
    return out


def dominates(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``D[i, j]``: row i of costs A dominates row j of costs B (no worse everywhere, better somewhere)."""
    if len(A) == 0 or len(B) == 0:
        return np.zeros((len(A), len(B)), bool)
    le = (A[:, None, :] <= B[None, :, :]).all(axis=2)
    lt = (A[:, None, :] < B[None, :, :]).any(axis=2)
    return le & lt


def hypervolume(C: np.ndarray, ideal: np.ndarray, nadir: np.ndarray) -> float:
    """Fraction of [0, 1.1]^m that costs ``C``, normalised between ``ideal`` and ``nadir``, dominate."""
    m = len(ideal)
    if len(C) == 0:
        return 0.0
    span = np.where(nadir > ideal, nadir - ideal, 1.0)
    nC = (C - ideal) / span
    return float(HV(ref_point=np.full(m, MARGIN))(nC)) / MARGIN ** m


def baseline_entry(record: dict | None, objectives: list[str], C: np.ndarray, front: pd.DataFrame) -> dict | None:
    """A run's EPLB-style seed in ``dse compare --json``: its design id, its objectives' metric values, and the
    designs of the run's own front that dominate it (None: the run was not seeded)."""
    if record is None:
        return None
    metrics = record.get("metrics", {})
    values = {o: metrics.get(OBJECTIVES[o][0]) for o in objectives}
    out = {"design_id": record["design_id"], "objectives": values, "dominated_by": []}
    if all(isinstance(v, (int, float)) for v in values.values()):
        seed = costs(pd.DataFrame([{OBJECTIVES[o][0]: values[o] for o in objectives}]), objectives)
        out["dominated_by"] = [str(front["design_id"].iloc[k]) for k in np.flatnonzero(dominates(C, seed)[:, 0])]
    return out


def compare_runs(paths: list[str | Path]) -> Comparison:
    """Load the runs at ``paths`` and compare their fronts (module docstring)."""
    if len(paths) < 2:
        raise StudyError("give at least two results folders to compare", key="RESULTS_DIR")
    paths = [Path(p) for p in paths]
    loaded = [load_run(p) for p in paths]
    objectives = list(loaded[0][0].search.objectives)
    for p, (study, _) in zip(paths[1:], loaded[1:]):
        if set(study.search.objectives) != set(objectives):
            raise StudyError(f"{p} has objectives {', '.join(study.search.objectives)}, {paths[0]} has "
                             f"{', '.join(objectives)}: runs compared must share their objectives",
                             key="RESULTS_DIR")
    runs = [Run(name, p, study, front) for name, p, (study, front) in zip(labels(paths), paths, loaded)]
    C = []
    for r in runs:
        c = costs(r.front, objectives)
        keep = np.isfinite(c).all(axis=1)
        r.front = r.front[keep].reset_index(drop=True)
        C.append(c[keep])
        r.baseline = baseline_entry(read_baseline(r.path), objectives, C[-1], r.front)
    union = np.vstack(C)
    if len(union):
        ideal, nadir = union.min(axis=0), union.max(axis=0)
    else:
        ideal, nadir = np.zeros(len(objectives)), np.ones(len(objectives))
    hv = [hypervolume(c, ideal, nadir) for c in C]
    on_front = [int((~np.any([dominates(other, c).any(axis=0) for other in C], axis=0)).sum()) if len(c) else 0
                for c in C]
    pairs = []
    for i, a in enumerate(runs):
        for j, b in enumerate(runs):
            if i == j:
                continue
            D = dominates(C[i], C[j])
            beaten = {str(a.front["design_id"].iloc[k]): [str(b.front["design_id"].iloc[m]) for m in np.flatnonzero(D[k])]
                      for k in np.flatnonzero(D.any(axis=1))}
            pairs.append({"run": a.label, "other": b.label, "dominated": int(D.any(axis=0).sum()),
                          "other_front_size": len(b.front), "dominating": int(D.any(axis=1).sum()),
                          "pairs": beaten})
    return Comparison(runs, objectives, ideal, nadir, hv, on_front, pairs)


def plot_compare(comparison: Comparison, x: str, y: str) -> Figure:
    """Every run's front in two objectives, one colour and marker per run, and its front in these two as
    a step line."""
    fig = Figure(figsize=(6.4, 4.8), layout="constrained")
    ax = fig.add_subplot()
    for k, r in enumerate(comparison.runs):
        colour, marker = COLOURS[k % len(COLOURS)], MARKERS[k % len(MARKERS)]
        px, py = shown(r.front, x), shown(r.front, y)
        ax.scatter(px, py, s=22, c=colour, marker=marker, edgecolors="white", linewidths=0.4, zorder=3,
                   label=f"{r.label} ({len(r.front)}, HV {comparison.hypervolume[k]:.3f})")
        if len(px):
            F = costs(r.front, [x, y])
            line = np.flatnonzero(~dominates(F, F).any(axis=0))
            line = line[np.argsort(px[line])]
            ax.step(px[line], py[line], where="post", c=colour, lw=1.0, alpha=0.8)
    ax.set_xlabel(label(x))
    ax.set_ylabel(label(y))
    ax.grid(alpha=0.3)
    ax.set_title(f"fronts compared: {x} vs {y}")
    ax.legend(fontsize=8, loc="best", title="run (front size, hypervolume)", title_fontsize=8)
    return fig


def figures(comparison: Comparison) -> dict[str, Figure]:
    """One figure per pair of objectives, by file stem ``front_<a>_<b>``."""
    return {f"front_{x}_{y}": plot_compare(comparison, x, y) for x, y in combinations(comparison.objectives, 2)}


def page(comparison: Comparison, first_line: str = "<!DOCTYPE html>") -> str:
    """A self-contained HTML page: the fronts in one interactive plot (dse.results.interactive) and the
    table of hypervolumes."""
    objectives = comparison.objectives
    common = set.intersection(*(set(r.front.columns) for r in comparison.runs))
    names = [c for c in reported_metrics(comparison.runs[0].study, comparison.runs[0].front.columns) if c in common]
    metrics = metric_entries(comparison.runs[0].front, names)
    groups, notes = [], [f"reference point: {REFERENCE_RULE}"]
    for k, r in enumerate(comparison.runs):
        drawn = r.front.iloc[spread(len(r.front), MAX_POINTS)]
        if len(drawn) < len(r.front):
            notes.append(f"{r.label}: {len(drawn)} of its {len(r.front)} front designs drawn, evenly spread")
        g = group(r.label, drawn, [m["column"] for m in metrics], COLOURS[k % len(COLOURS)],
                  PLOTLY_SYMBOLS[k % len(PLOTLY_SYMBOLS)])
        g["folder"] = str(r.path)
        groups.append(g)
    data = {"title": "fronts compared", "objectives": objective_entries(objectives), "metrics": metrics,
            "details": {}, "groups": groups, "notes": notes}
    rows = "".join(f"<tr><td>{_esc(r.label)}</td><td>{_esc(str(r.path))}</td><td>{len(r.front)}</td>"
                   f"<td>{n}</td><td>{hv:.4f}</td></tr>"
                   for r, hv, n in zip(comparison.runs, comparison.hypervolume, comparison.on_combined_front))
    table = ("<table><tr><th>run</th><th>folder</th><th>front designs</th><th>on the combined front</th>"
             f"<th>hypervolume</th></tr>{rows}</table>")
    return (f"{first_line}\n<html><head><meta charset=\"utf-8\"><title>dse compare</title><style>"
            "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
            "table{border-collapse:collapse;font-size:0.85em}th,td{border:1px solid #ccc;padding:3px 6px}"
            f"</style></head><body>\n<h1>Fronts compared</h1>\n{table}\n{block(data, 'The fronts', INTRO)}</body></html>\n")


def _esc(text: str) -> str:
    return html.escape(text)
