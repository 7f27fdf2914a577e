"""``dse compare``: several runs' fronts on shared plots, hypervolumes against one reference point, and which
designs of one run dominate which of another's (dse.results.compare)."""
from __future__ import annotations

import io
import json
from pathlib import Path

import click

from ..model.objectives import OBJECTIVE_COLUMNS
from ..results.compare import REFERENCE_RULE, compare_runs, figures, page
from .common import cli
from .output import Col, console, print_table
from .safe_write import check_replace, marker, replacing

#: the page of --out
PAGE = "compare.html"
#: ids of dominated designs named per pair in the table (all are in --json)
NAMED = 4


def _svg(fig) -> bytes:
    """An SVG whose first line carries dse's marker (an XML comment after the declaration)."""
    import matplotlib
    buf = io.BytesIO()
    fig.set_layout_engine("none")
    with matplotlib.rc_context({"svg.hashsalt": "dse-compare"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    first, sep, rest = buf.getvalue().partition(b"\n")
    return first + f"<!-- # {marker()} -->".encode() + sep + rest


def write_out(comparison, out: Path) -> list[Path]:
    """The plots (PNG and SVG, one per pair of objectives) and the interactive page into ``out``; a file
    there that dse did not write is refused before anything is written (dse.cli.safe_write)."""
    if out.exists() and not out.is_dir():
        raise click.UsageError(f"--out: {out} is a file; give a folder")
    figs = figures(comparison)
    names = [f"{stem}.{ext}" for stem in figs for ext in ("png", "svg")] + [PAGE]
    if out.is_dir():
        for name in names:
            check_replace(out / name, "--out", None)      # compare has no --force
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, fig in figs.items():
        with replacing(out / f"{stem}.png", "--out", None) as tmp:      # marked: a tEXt chunk
            fig.savefig(tmp, dpi=150, format="png")
        svg = _svg(fig)
        with replacing(out / f"{stem}.svg", "--out", None, style="none") as tmp:
            tmp.write_bytes(svg)
        written += [out / f"{stem}.png", out / f"{stem}.svg"]
    with replacing(out / PAGE, "--out", None, style="none") as tmp:
        tmp.write_text(page(comparison, f"<!DOCTYPE html><!-- # {marker()} -->"))
    return written + [out / PAGE]


def _dominance_rows(comparison) -> list[dict]:
    rows = []
    for d in comparison.dominance:
        ids = sorted({b for beaten in d["pairs"].values() for b in beaten})
        named = ", ".join(ids[:NAMED]) + (f" +{len(ids) - NAMED}" if len(ids) > NAMED else "")
        rows.append({"run": d["run"], "other": d["other"], "dominated": f"{d['dominated']}/{d['other_front_size']}",
                     "by": d["dominating"], "ids": named or "-"})
    return rows


@cli.command("compare")
@click.argument("results_dirs", nargs=-1, required=True, metavar="RESULTS_DIR RESULTS_DIR [...]",
                type=click.Path(file_okay=False))
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Folder for the shared plots (PNG, SVG) and compare.html; files dse did not write are "
                   "never replaced.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (keys in docs/results.md).")
def compare(results_dirs: tuple[str, ...], out_dir: str | None, as_json: bool) -> None:
    """Compare the fronts of two or more results folders of studies with the same objectives."""
    if len(results_dirs) < 2:
        raise click.UsageError("give at least two RESULTS_DIRs to compare")
    comparison = compare_runs(list(results_dirs))
    written = write_out(comparison, Path(out_dir)) if out_dir is not None else []
    if as_json:
        data = comparison.as_dict()
        data["written"] = [str(p) for p in written]
        click.echo(json.dumps(data, indent=1))
        return
    out = console()
    runs = [{"run": r.label, "front": len(r.front), "combined": n, "hv": hv}
            for r, hv, n in zip(comparison.runs, comparison.hypervolume, comparison.on_combined_front)]
    print_table(runs, [Col("run", "run", "text", left=True), Col("front", "front designs"),
                       Col("combined", "on combined front"), Col("hv", "hypervolume (norm.)")],
                title="Fronts compared", out=out)
    ref = ", ".join(f"{OBJECTIVE_COLUMNS[o]} {v:.4g}" for o, v in comparison.reference_point().items())
    out.print(f"hypervolume: {REFERENCE_RULE}. Reference point in metric units: {ref}.", soft_wrap=False)
    for r in comparison.runs:
        if r.baseline is not None:
            out.print(f"{r.label}: the EPLB-style seed {r.baseline['design_id']} is dominated by "
                      f"{len(r.baseline['dominated_by'])} of its front's {len(r.front)} designs")
    print_table(_dominance_rows(comparison),
                [Col("run", "run", "text", left=True), Col("other", "other", "text", left=True),
                 Col("dominated", "other's designs dominated", "text"), Col("by", "by designs"),
                 Col("ids", "dominated ids", "text", left=True)],
                title="Designs of one run dominating another's", keep=2, out=out)
    if written:
        out.print(f"{len(written)} files in {out_dir}/: the plots (PNG and SVG) and {PAGE}")
