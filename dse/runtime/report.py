"""A timeline's figures: plots over time (PNG and SVG) and a page (Markdown) in the report's style,
written into a folder of `dse timeline --out` (docs/runtime.md)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import NamedTuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .timeline import Timeline  # noqa: E402

#: the file that marks a folder as written by `dse timeline` (others' folders are not written into)
MARKER = ".dse-timeline"
PANELS = (("tokens_per_s", "served tokens/s"), ("latency_s", "step latency (s)"),
          ("imbalance", "max/mean chiplet load"), ("migration_bytes", "migrated (GB)"),
          ("served_frac", "served fraction"))


def short(component: str) -> str:
    """A failed component in the table's few characters: chiplet 4 -> 4, link 0-1 -> L0-1, hbm 0 x1 -> H0."""
    kind, what = component.split()[:2]
    return {"chiplet": "", "link": "L", "hbm": "H"}.get(kind, "") + what


def table_rows(timeline: Timeline, limit: int = 24) -> list[str]:
    """The windows as a text table of at most 80 columns (every window, or ``limit`` evenly spread)."""
    head = f"{'t (s)':>9} {'latency (s)':>12} {'tokens/s':>11} {'imbal.':>7} {'moves':>6} " \
           f"{'moved (GB)':>10} {'served %':>8} {'failed':>8}"
    windows = timeline.windows
    step = max(1, -(-len(windows) // limit))
    rows = [head]
    lat, tps = (decimals([w[k] for w in windows[::step]]) for k in ("latency_s", "tokens_per_s"))
    for w in windows[::step]:
        failed = ",".join(short(c) for c in w["failed_components"]) or "-"
        rows.append(f"{w['t_s']:>9.0f} {w['latency_s']:>12.{lat}f} {w['tokens_per_s']:>11,.{tps}f} {w['imbalance']:>7.3f} "
                    f"{w['migrations']:>6d} {w['migration_bytes'] / 1e9:>10.2f} {100 * w['served_frac']:>8.1f} "
                    f"{failed[:8]:>8}")
    return rows


def decimals(values, significant: int = 4) -> int:
    """Decimals that show the largest of ``values`` to ``significant`` digits: one format per column."""
    top = max((abs(v) for v in values if math.isfinite(v) and v != 0), default=1.0)
    return max(0, significant - 1 - math.floor(math.log10(top)))


class Shown(NamedTuple):
    """How a total is printed: ``label`` (no unit in it: the key's SI unit is not the one shown), the
    ``factor`` to ``unit``, one ``fmt`` whatever the value."""
    label: str
    factor: float
    fmt: str
    unit: str


TOTALS = {"tokens_served": Shown("tokens_served", 1.0, ",.0f", "tokens"),
          "mean_latency_s": Shown("mean_latency", 1e3, ",.3f", "ms"),
          "p99_latency_s": Shown("p99_latency", 1e3, ",.3f", "ms"),
          "availability": Shown("availability", 100.0, ".2f", "%"),
          "migration_bytes": Shown("migrated", 1e-9, ",.2f", "GB"),
          "migration_energy_j": Shown("migration_energy", 1.0, ",.1f", "J"),
          "energy_j_per_token": Shown("energy_per_token", 1e3, ",.3f", "mJ/token")}


def totals_rows(timeline: Timeline) -> list[str]:
    """The totals, one per line: label, value and unit (`TOTALS`)."""
    rows = []
    for k, v in timeline.totals.items():
        t = TOTALS.get(k, Shown(k, 1.0, ".4g", ""))
        rows.append(f"{t.label:<22} {format(v * t.factor, t.fmt)} {t.unit}".rstrip())
    return rows


def plot(timeline: Timeline, path_stem: Path) -> list[Path]:
    """The windows' figures over time in one column of panels, as ``<stem>.png`` and ``<stem>.svg``."""
    t = [w["t_s"] / 60 for w in timeline.windows]
    with plt.rc_context({"axes.grid": True, "grid.alpha": 0.3}):       # a light grid on every panel
        fig, axes = plt.subplots(len(PANELS), 1, figsize=(7, 1.7 * len(PANELS)), sharex=True)
    for ax, (key, label) in zip(axes, PANELS):
        values = [w[key] / 1e9 if key == "migration_bytes" else w[key] for w in timeline.windows]
        if key == "migration_bytes":
            ax.bar(t, values, width=0.8 * (t[1] - t[0]) if len(t) > 1 else 0.8)
        else:
            ax.step(t, values, where="post")
        for i, w in enumerate(timeline.windows):
            if w["failed_components"]:
                ax.axvspan(t[i], t[i] + (t[1] - t[0] if len(t) > 1 else 1), color="tab:red", alpha=0.08, lw=0)
        ax.set_ylabel(label, fontsize=8)
    axes[-1].set_xlabel("time (min)")
    axes[0].set_title(f"scenario '{timeline.scenario}', policy {timeline.policy} (red: a component down)", fontsize=9)
    fig.tight_layout()
    out = [path_stem.with_suffix(".png"), path_stem.with_suffix(".svg")]
    for p in out:
        fig.savefig(p, dpi=110)
    plt.close(fig)
    return out


def page(timeline: Timeline, study: str, design: str) -> str:
    """The timeline's page (Markdown): what was run, the totals, the figure, the windows."""
    lines = [f"# Timeline of {design} under study '{study}'", "",
             f"Scenario '{timeline.scenario}', policy `{timeline.policy}` (docs/runtime.md).", "",
             "| total | value |", "|---|---|"]
    lines += [f"| {row.split()[0]} | {row.split(maxsplit=1)[1]} |" for row in totals_rows(timeline)]
    lines += ["", "![timeline](timeline.svg)", "", "```", *table_rows(timeline, limit=10_000), "```", ""]
    return "\n".join(lines)


def check_folder(out: str | Path) -> Path:
    """``out`` as a Path if `write_folder` may write into it (missing, empty, or marked as written by
    `dse timeline`), else a `FileExistsError` naming it: checked before a timeline is run too."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).exists())):
        raise FileExistsError(f"--out: {out} exists and was not written by dse timeline; choose another folder")
    return out


def write_folder(timeline: Timeline, out: str | Path, study: str, design: str) -> list[Path]:
    """Write the plots, the page and the JSON into ``out`` (created; a folder holding files that
    `dse timeline` did not write is refused: a `FileExistsError`)."""
    out = check_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("written by dse timeline\n")
    written = plot(timeline, out / "timeline")
    for name, text in (("timeline.md", page(timeline, study, design)),
                       ("timeline.json", json.dumps(timeline.to_dict(), indent=1))):
        (out / name).write_text(text)
        written.append(out / name)
    return written
