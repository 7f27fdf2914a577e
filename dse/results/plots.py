"""Figures of a study: Pareto fronts, a scatter matrix, parallel coordinates, hypervolume convergence
and the floorplan of one design.

Every function returns a matplotlib `Figure` built without pyplot (no global backend state: works headless,
and a notebook shows it); `write_plots` saves them as PNG and SVG. Figures only draw numbers from the
results tables and from the study's own models (dse.model.traffic for link utilisation).
"""
from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps, rc_context
from matplotlib.colors import Normalize
from matplotlib.figure import Figure as MatplotlibFigure
from matplotlib.patches import FancyArrow, FancyArrowPatch, Rectangle
from pymoo.indicators.hv import HV
from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

from ..model.objectives import OBJECTIVES
from ..model.traffic import link_loads, link_utilisation
from ..study.space import Design
from .breakdowns import Breakdowns
from .figure_file import axes_off, save
from .knee import knee_index, minimised

#: metric column -> (axis label, factor from SI, display unit)
DISPLAY = {
    "latency_s": ("latency per step", 1e3, "ms"),
    "throughput_tok_s": ("throughput", 1.0, "tokens/s"),
    "energy_j_per_token": ("energy", 1e3, "mJ/token"),      # as `dse run` prints it
    "area_mm2": ("silicon area", 1.0, "mm²"),
    "cost_usd": ("cost", 1.0, "$"),
    "fault_tolerance_frac": ("fault tolerance", 100.0, "% throughput kept"),
    "quality_frac": ("quality", 100.0, "% of the 16-bit score kept"),
    "peak_power_w": ("peak power", 1.0, "W"),
    "carbon_g_per_token": ("carbon", 1e3, "mg CO2e/token"),
    "ttft_p99_s": ("p99 time to first token", 1e3, "ms"),
    "tpot_p99_s": ("p99 time per output token", 1e3, "ms"),
    "goodput_req_s": ("goodput", 1.0, "requests/s within SLO"),
    "max_rate_at_slo_req_s": ("highest rate within SLO", 1.0, "requests/s"),
    "tokens_over_horizon": ("tokens over the scenario", 1e-6, "million tokens"),
    "availability_frac": ("availability", 100.0, "% of demand served"),
    "migration_energy_j": ("migration energy", 1.0, "J"),
    "time_to_train_s": ("time to train", 1.0 / 86_400, "days"),
}
KIND_COLOURS = ["#8fb8de", "#f2b880", "#a7d3a6", "#d9a5c9", "#e9e29c", "#b9b0e8", "#f29e9e", "#9ed9d4"]
PARETO_COLOUR = "#c0392b"
#: points a scatter draws as vectors in an SVG; more are drawn as one raster image (size and time bounded)
MAX_VECTOR_POINTS = 2000


def better(objective: str) -> str:
    """"lower" or "higher": which way ``objective`` improves."""
    return "lower" if OBJECTIVES[objective][1] > 0 else "higher"


class Figure(MatplotlibFigure):
    """A matplotlib Figure that shows itself in Jupyter even when pyplot was never imported."""

    def _repr_png_(self) -> bytes:
        import io
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=100)
        return buf.getvalue()


def column(objective: str) -> str:
    return OBJECTIVES[objective][0]


def label(objective: str) -> str:
    name, _, unit = DISPLAY[column(objective)]
    return f"{name} [{unit}] ({better(objective)} is better)"


def shown(df: pd.DataFrame, objective: str) -> np.ndarray:
    """An objective's values in display units."""
    return df[column(objective)].to_numpy(float) * DISPLAY[column(objective)][1]


def _front_2d(x: np.ndarray, y: np.ndarray, sx: float, sy: float) -> np.ndarray:
    """Indices of the points non-dominated in these two objectives, sorted along x."""
    F = np.column_stack([sx * x, sy * y])
    idx = NonDominatedSorting().do(F, only_non_dominated_front=True)
    return idx[np.argsort(x[idx])]


def plot_front(result, x: str, y: str, ax=None) -> Figure:
    """Two objectives: every feasible design (grey), the Pareto set (red), its 2-D front (line), and the
    balanced knee design (star)."""
    fig = None
    if ax is None:
        fig = Figure(figsize=(6.4, 4.8), layout="constrained")
        ax = fig.add_subplot()
    ev = result.evaluations[result.evaluations["feasible"]]
    pareto = result.pareto
    ax.scatter(shown(ev, x), shown(ev, y), s=8, c="#b0b0b0", alpha=0.5, label=f"feasible designs ({len(ev)})",
               linewidths=0, rasterized=True)
    px, py = shown(pareto, x), shown(pareto, y)
    ax.scatter(px, py, s=22, c=PARETO_COLOUR, label=f"Pareto set, all objectives ({len(pareto)})", zorder=3,
               edgecolors="white", linewidths=0.4)
    if len(pareto):
        line = _front_2d(px, py, OBJECTIVES[x][1], OBJECTIVES[y][1])
        ax.step(px[line], py[line], where="post", c="black", lw=1.2,
                label="front in these two objectives")
        k = knee_index(pareto, result.study.search.objectives)
        ax.scatter(px[k], py[k], marker="*", s=260, c="#f1c40f", edgecolors="black", zorder=4,
                   label=f"balanced design {pareto['design_id'].iloc[k]}")
    ax.set_xlabel(label(x))
    ax.set_ylabel(label(y))
    ax.grid(alpha=0.3)
    if fig is not None:
        ax.set_title(f"{result.study.name}: {x} vs {y}")
        ax.legend(fontsize=8, loc="best")
    return fig if fig is not None else ax.figure


def plot_scatter_matrix(result) -> Figure:
    """Every pair of objectives at once: fronts below the diagonal, histograms of the Pareto set on it."""
    objectives = result.study.search.objectives
    m = len(objectives)
    fig = Figure(figsize=(2.6 * m, 2.6 * m), layout="constrained")
    axes = fig.subplots(m, m, squeeze=False)
    ev = result.evaluations[result.evaluations["feasible"]]
    for i, yo in enumerate(objectives):
        for j, xo in enumerate(objectives):
            ax = axes[i, j]
            if i == j:
                values = shown(result.pareto, xo)
                ax.hist(values[np.isfinite(values)], bins=20, color=PARETO_COLOUR, alpha=0.7)
            elif i > j:
                ax.scatter(shown(ev, xo), shown(ev, yo), s=3, c="#b0b0b0", alpha=0.4, linewidths=0, rasterized=True)
                ax.scatter(shown(result.pareto, xo), shown(result.pareto, yo), s=6, c=PARETO_COLOUR, linewidths=0)
            else:
                ax.axis("off")
                continue
            name, _, unit = DISPLAY[column(xo)]
            if i == m - 1:
                ax.set_xlabel(f"{name} [{unit}]", fontsize=8)
            if j == 0 and i > 0:
                ax.set_ylabel(f"{DISPLAY[column(yo)][0]} [{DISPLAY[column(yo)][2]}]", fontsize=8)
            ax.tick_params(labelsize=7)
    fig.suptitle(f"{result.study.name}: grey = feasible designs, red = Pareto set; diagonal = Pareto set spread")
    return fig


def plot_parallel(result) -> Figure:
    """Parallel coordinates of the Pareto set: one line per design, each axis scaled so the best value of
    the front is at the bottom; the balanced design is drawn bold."""
    objectives = result.study.search.objectives
    pareto = result.pareto
    fig = Figure(figsize=(max(6.4, 2.0 * len(objectives)), 4.8), layout="constrained")
    ax = fig.add_subplot()
    F = minimised(pareto, objectives)
    lo, hi = F.min(axis=0), F.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    nF = (F - lo) / span
    xs = np.arange(len(objectives))
    colour_by = nF[:, 0]
    cmap = colormaps["viridis"]
    for row, c in zip(nF, colour_by):
        ax.plot(xs, row, c=cmap(c), alpha=0.45, lw=1)
    k = knee_index(pareto, objectives)
    if k is not None:
        ax.plot(xs, nF[k], c="black", lw=3, label=f"balanced design {pareto['design_id'].iloc[k]}")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=8, frameon=False)
    for i, o in enumerate(objectives):
        best, worst = shown(pareto, o).min(), shown(pareto, o).max()
        if OBJECTIVES[o][1] < 0:
            best, worst = worst, best
        ax.text(i, -0.06, f"{best:.4g}", ha="center", va="top", fontsize=8)
        ax.text(i, 1.04, f"{worst:.4g}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(xs, [f"{DISPLAY[column(o)][0]}\n[{DISPLAY[column(o)][2]}]" for o in objectives], fontsize=8)
    ax.set_yticks([0, 1], ["best", "worst"])
    ax.set_ylim(-0.15, 1.13)
    for x in xs:
        ax.axvline(x, c="black", lw=0.6)
    ax.set_title(f"{result.study.name}: {len(pareto)} Pareto designs (colour: {objectives[0]})")
    return fig


def hypervolume_by_generation(result) -> pd.DataFrame:
    """Hypervolume of the feasible front found up to each generation (pymoo HV).

    Objectives are oriented for minimisation and normalised by the ideal and nadir of every feasible
    design of the run, with the reference point at 1.1 in each; 1.1^m would be a single ideal design.
    """
    objectives = result.study.search.objectives
    ev = result.evaluations
    feasible = ev[ev["feasible"]]
    if feasible.empty:
        return pd.DataFrame({"generation": [], "hypervolume": []})
    F = minimised(feasible, objectives)
    lo, hi = F.min(axis=0), F.max(axis=0)
    nF = (F - lo) / np.where(hi > lo, hi - lo, 1.0)
    indicator = HV(ref_point=np.full(len(objectives), 1.1))
    gen = feasible["generation"].to_numpy()
    rows = []
    for g in sorted(ev["generation"].unique()):
        seen = nF[gen <= g]
        rows.append((int(g), float(indicator(seen)) if len(seen) else 0.0))
    return pd.DataFrame(rows, columns=["generation", "hypervolume"])


def convergence_table(result, results_dir: str | Path | None = None) -> tuple[pd.DataFrame, str]:
    """(generation, hypervolume) table and where it came from: a convergence table the search wrote
    (``result.convergence``, or ``convergence.csv`` in the results folder), else computed here."""
    for table in (getattr(result, "convergence", None), _read_convergence(results_dir),
                  _read_convergence(result.out_dir)):
        if isinstance(table, pd.DataFrame) and "generation" in table:
            hv = next((c for c in table.columns if "hypervolume" in c.lower() or c.lower() in ("hv", "hv_norm")),
                      None)
            if hv is not None:
                return table[["generation", hv]].rename(columns={hv: "hypervolume"}), "search"
    return hypervolume_by_generation(result), "computed"


def _read_convergence(folder) -> pd.DataFrame | None:
    if folder is None or not (Path(folder) / "convergence.csv").exists():
        return None
    try:
        return pd.read_csv(Path(folder) / "convergence.csv")
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return None


def plot_convergence(result, results_dir: str | Path | None = None) -> Figure:
    """Hypervolume of the front against generation: flat at the end means the search has settled."""
    table, origin = convergence_table(result, results_dir)
    fig = Figure(figsize=(6.4, 4.0), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(table["generation"], table["hypervolume"], marker="o", ms=3, c="#2c7fb8")
    ax.set_xlabel("generation")
    note = "" if origin == "search" else "\n(objectives scaled to the run's range, reference point 1.1)"
    ax.set_ylabel(f"hypervolume of the front, higher is better{note}", fontsize=9)
    ax.set_title(f"{result.study.name}: search convergence (flat at the end = settled)", fontsize=10)
    ax.grid(alpha=0.3)
    return fig


def _units_text(units: str, n_units: int, counts: list[tuple[str, int]], one_group: bool, width: int = 3) -> str:
    """Units a chiplet holds (``units``: its ``n_units`` names joined by spaces), by name (``L0-31.e3`` -> ``e3``
    when every layer shares one group), or counted by kind when there are many (``counts``: the chiplet's
    dse.results.breakdowns.Breakdowns.kind_counts, kinds in the order first met)."""
    if n_units > 9:             # an 8 x 8 floorplan counts 15,000
        return "\n".join(f"{n} x {k}" for k, n in counts)
    names = [u.split(".", 1)[1] if one_group and "." in u else u for u in units.split()]
    return "\n".join(" ".join(names[i:i + width]) for i in range(0, len(names), width))


def _one_group(names) -> bool:
    """Whether every unit name with a group (``L0-31.e3``: the part before the first dot) has the same one; stops
    at the second group (a model placed per layer has one a layer)."""
    first = None
    for name in names:
        group, dot, _ = name.partition(".")
        if dot and group != first:
            if first is not None:
                return False
            first = group
    return True


#: a floorplan's text through FreeType's auto-hinter, not the font's own hinting program (which FreeType runs again
#: each time matplotlib sets the size: before every glyph): an 8 x 8 floorplan's PNG in about a tenth less CPU,
#: 1-3 % smaller, the same texts and layout (docs/performance.md, "Issue 52, eighth round (the floorplans)")
FLOORPLAN_RC = {"text.hinting": "force_autohint"}
WRAP_BULGE = 0.2        # how far a torus wrap-around arc leaves the chiplet edge (chiplet side = 1)
#: chiplets above which a floorplan writes each chiplet's kind, units, memory and busy share as one text
MANY_CHIPLETS = 16


def plot_floorplan(design: Design, prepared, metrics: pd.Series | None = None, title: str = "",
                   breakdowns: Breakdowns | None = None) -> Figure:
    """The mesh of one design: chiplets coloured by kind, with the units (experts) each holds, its HBM
    (GiB stored / GiB of HBM) and busy share of the step (dse.model.breakdown); each directed link coloured by
    its utilisation, bytes per step / (link bandwidth x step time) (dse.model.traffic). ``breakdowns``: the
    report's (dse.results.breakdowns), so a design's breakdown is computed once."""
    breakdowns = breakdowns or Breakdowns(prepared)
    prepared = prepared.for_design(design)          # the design's package variant (dse.model.variants)
    tables = prepared.tables
    if metrics is None:
        metrics = prepared.evaluator.evaluate_designs([design]).iloc[0]
    latency = float(metrics["latency_s"])
    loads = link_loads(design, breakdowns.traffic(design), prepared.study.hardware.package)
    util = 100.0 * link_utilisation(loads, latency).to_numpy()
    chips = breakdowns.chiplets(design, latency)
    counts = breakdowns.kind_counts(design)
    one_group = _one_group(tables.unit_names)
    kind_names = list(dict.fromkeys(list(tables.kind_names) + list(design.chiplets)))
    colour = {k: KIND_COLOURS[i % len(KIND_COLOURS)] for i, k in enumerate(kind_names)}

    R, C = design.rows, design.cols
    width = max(2.4 * C + 2.4, 6.0)
    label_pt = 8 * 0.6 * max(len(k) for k in kind_names) + 30          # legend entry: text + swatch, in points
    legend_cols = max(1, min(len(kind_names), int(width * 72 / label_pt)))
    legend_rows = -(-len(kind_names) // legend_cols)
    fig = Figure(figsize=(width, 2.4 * R + 1.5 + 0.2 * legend_rows), layout="constrained")
    ax = fig.add_subplot()
    size, gap = 1.0, 0.45
    pitch = size + gap
    # add_artist, not add_patch: the limits are set below (add_patch's per-patch limit updates: a third of the build)
    for chip in chips.itertuples(index=False):
        s, r, c = chip.slot, chip.row, chip.col
        x0, y0 = c * pitch, -r * pitch
        ax.add_artist(Rectangle((x0, y0), size, size, fc=colour[chip.kind], ec="black", lw=1.2))
        kind_label = chip.kind.replace("[", "\n[", 1) if len(chip.kind) > 14 else chip.kind   # variants wrap
        memory = (f"HBM x{chip.hbm_stacks}: {chip.stored_GiB:.3g}/{chip.hbm_GiB:.3g} GiB" if chip.hbm_stacks else
                  f"no HBM: {chip.stored_GiB:.3g} GiB stored")
        state = f"{memory}\nbusy {100 * chip.busy_share:.0f}% of the step"
        units = _units_text(chip.units, chip.n_units, counts[s], one_group) or "(no units)"
        if R * C > MANY_CHIPLETS:       # one text a chiplet: drawing a text costs more than its glyphs
            ax.text(x0 + 0.05, y0 + size - 0.05, f"{s}: {kind_label}\n{units}\n{state}", ha="left", va="top",
                    fontsize=7)
            continue
        ax.text(x0 + 0.05, y0 + size - 0.05, f"{s}: {kind_label}", ha="left", va="top", fontsize=8, weight="bold")
        ax.text(x0 + 0.05, y0 + 0.05, state, ha="left", va="bottom", fontsize=7)
        ax.text(x0 + size / 2, y0 + size / 2 + 0.05, units, ha="center", va="center", fontsize=7)
    peak = float(util.max()) if len(util) else 0.0
    norm = Normalize(vmin=0.0, vmax=peak if peak > 0 else 1.0)
    cmap = colormaps["inferno_r"]
    colours = [tuple(c) for c in cmap(norm(util)).tolist()] if len(util) else []   # one lookup for every link
    for src, dst, rgba in zip(loads["src_slot"], loads["dst_slot"], colours):
        r1, c1 = divmod(int(src), C)
        r2, c2 = divmod(int(dst), C)
        x1, y1 = c1 * pitch + size / 2, -r1 * pitch + size / 2
        dx, dy = (c2 - c1) * pitch, -(r2 - r1) * pitch
        if abs(r2 - r1) + abs(c2 - c1) == 1:       # grid neighbours: straight, the two directions side by side
            off = 0.12 if (c2 - c1 + r2 - r1) > 0 else -0.12
            ox, oy = (0.0, off) if dy == 0 else (off, 0.0)
            start = 0.5 * size / pitch
            ax.add_artist(FancyArrow(x1 + ox + dx * start, y1 + oy + dy * start, dx * (1 - 2 * start) * 0.999,
                                     dy * (1 - 2 * start) * 0.999, width=0.05, head_width=0.14, head_length=0.1,
                                     length_includes_head=True, color=rgba, ec="black", lw=0.3))
        elif r1 == r2 or c1 == c2:                  # torus wrap-around: an arc along the gap beside the line
            ex, ey = (0.0, size / 2 if dx > 0 else -size / 2) if r1 == r2 else (size / 2 if dy < 0 else -size / 2, 0.0)
            rad = -2 * WRAP_BULGE / abs(dx + dy)    # arc3 bulges rad/2 x the chord: outwards for either direction
            ax.add_artist(FancyArrowPatch((x1 + ex, y1 + ey), (x1 + dx + ex, y1 + dy + ey), connectionstyle=f"arc3,rad={rad}",
                                          arrowstyle="-|>,head_width=4,head_length=6", lw=2.5, color=rgba, alpha=0.85, zorder=3))
        else:                                       # a long link of a graph package: an arc over the chiplets
            ax.add_artist(FancyArrowPatch((x1, y1), (x1 + dx, y1 + dy), connectionstyle="arc3,rad=0.25",
                                          arrowstyle="-|>,head_width=4,head_length=6", lw=2.5, color=rgba, alpha=0.85, zorder=3))
    for artist in ax.artists:       # clipped to the axes: the layout need not measure them (matplotlib's own
        artist.set_in_layout(False)     # test for that, clip box == axes box, fails on a rounding)
    if len(util):
        cbar = fig.colorbar(_mappable(cmap, norm), ax=ax, shrink=0.8)
        cbar.set_label("link utilisation [% of the step the link is busy]")
        cbar.formatter.set_useOffset(False)
    handles = [Rectangle((0, 0), 1, 1, fc=colour[k], ec="black") for k in kind_names]
    ax.legend(handles, kind_names, loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=legend_cols,
              fontsize=8, frameon=False, title="chiplet kind", title_fontsize=8)
    margin = WRAP_BULGE + 0.1
    ax.set_xlim(-margin, C * pitch - gap + margin)
    ax.set_ylim(-(R - 1) * pitch - margin, size + margin)
    ax.set_aspect("equal")
    axes_off(ax)
    ax.set_title(f"{title or 'design'}\n{R} x {C} {prepared.study.hardware.package.topology}, "
                 f"{latency * 1e3:.3g} ms per step, "
                 f"{design.ddr_channels} DDR channels, {design.link} links", fontsize=9)
    return fig


def _mappable(cmap, norm):
    from matplotlib.cm import ScalarMappable
    sm = ScalarMappable(norm=norm, cmap=cmap)
    sm.set_array([])
    return sm


def write_plots(result, folder: str | Path, prepared=None, floorplans: dict[str, str] | None = None,
                breakdowns: Breakdowns | None = None, svg: bool = False) -> dict:
    """Every figure of a study into ``folder`` (PNG, and SVG with ``svg``); returns {figure name: PNG path}.
    A ``convergence.csv`` in the folder above (the results folder) is plotted if the search wrote one.

    ``floorplans`` maps design ids to titles (default: the balanced design); ``prepared`` is the
    study's `dse.model.prepare.Prepared` (the result's own, `StudyResult.prepare`, if not given);
    ``breakdowns`` the report's per-design breakdowns (dse.results.breakdowns).
    """
    folder = Path(folder)
    objectives = result.study.search.objectives
    written: dict[str, Path] = {}
    if result.pareto.empty:
        return written
    for x, y in combinations(objectives, 2):
        written[f"front_{x}_{y}"] = save(plot_front(result, x, y), folder, f"front_{x}_{y}", svg)[0]
    if len(objectives) > 2:
        written["scatter_matrix"] = save(plot_scatter_matrix(result), folder, "scatter_matrix", svg)[0]
    written["parallel_coordinates"] = save(plot_parallel(result), folder, "parallel_coordinates", svg)[0]
    written["convergence"] = save(plot_convergence(result, folder.parent), folder, "convergence", svg)[0]
    if floorplans is None:
        k = knee_index(result.pareto, objectives)
        floorplans = {result.pareto["design_id"].iloc[k]: "balanced design"}
    if floorplans:
        prepared = prepared or result.prepare()
        breakdowns = breakdowns or Breakdowns(prepared)
        rows = result.pareto.set_index("design_id")
        for design_id, title in floorplans.items():
            design = result.designs[design_id]
            if design.system:          # one package of a system: its own step, not the system's
                fig = plot_floorplan(design, prepared, None, title=f"{title} {design_id}: package 0 (pipeline "
                                     "stage 0, expert rank 0)", breakdowns=breakdowns)
            else:
                fig = plot_floorplan(design, prepared, rows.loc[design_id] if design_id in rows.index else None,
                                     title=f"{title} {design_id}", breakdowns=breakdowns)
            with rc_context(FLOORPLAN_RC):
                written[f"floorplan_{design_id}"] = save(fig, folder, f"floorplan_{design_id}", svg)[0]
        written["roofline"] = save(plot_roofline(breakdowns.attributes(prepared)), folder, "roofline", svg)[0]
    return written


def first_met(column: pd.Series) -> list:
    """``column``'s distinct values in the order first met (``list(dict.fromkeys(column))``), found by `pd.unique`
    without a Python object per row: DeepSeek-V3 per layer's attribute table has 30,000 rows."""
    return pd.unique(column).tolist()


def plot_roofline(table: pd.DataFrame) -> Figure:
    """Units on each chiplet kind's roofline (dse.model.characterize): operational intensity (FLOPs per
    DRAM byte) against attained FLOP/s, under the kind's peak and its memory bandwidth ceilings."""
    kinds = first_met(table["chiplet"])
    fig = Figure(figsize=(5.0 * len(kinds), 4.2), layout="constrained")
    axes = fig.subplots(1, len(kinds), squeeze=False)[0]
    colours = dict(zip(first_met(table["unit_kind"]), colormaps["tab10"].colors))
    for ax, kind in zip(axes, kinds):
        rows = table[(table["chiplet"] == kind) & (table["flops"] > 0) & (table["dram_bytes"] > 0)]
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(kind)
        ax.set_xlabel("operational intensity [FLOP/byte]")
        ax.set_ylabel("attained [FLOP/s]")
        if rows.empty:
            continue
        x = rows["flops"] / rows["dram_bytes"]
        y = rows["flops"] / rows["time_s"]
        grid = np.logspace(np.log10(x.min() / 4), np.log10(x.max() * 4), 64)
        peak = float(rows["peak_flops"].iloc[0])
        styles = iter(["-", "-.", ":", (0, (5, 1))])
        for bw in sorted(set(rows["bandwidth_Bps"])):       # ceilings named in the legend, not over the lines
            ax.plot(grid, np.minimum(peak, bw * grid), color="0.4", lw=1.2, ls=next(styles, "-"),
                    label=f"memory {bw / 1e12:.3g} TB/s")
        ax.axhline(peak, color="0.2", ls="--", lw=1.0, label=f"peak {peak / 1e12:.3g} TFLOP/s")
        for unit_kind, part in rows.groupby("unit_kind", sort=False):       # many points: one raster in the SVG
            ax.scatter(x[part.index], y[part.index], s=18, color=colours[unit_kind], label=unit_kind,
                       rasterized=len(rows) > MAX_VECTOR_POINTS)
        ax.legend(fontsize=7, loc="lower right")
    return fig

