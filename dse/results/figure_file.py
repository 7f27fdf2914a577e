"""A figure of the results folder written to its files: PNG (150 dpi, within `MAX_PNG_PIXELS`) and, on
request (`dse run --svg`; docs/performance.md), SVG, with the same bytes for the same study."""
from __future__ import annotations

from pathlib import Path

import matplotlib

MAX_PNG_PIXELS = 4_000_000     # a larger figure (an 8 x 8 floorplan) is written at a lower dpi; its SVG stays exact


def png_dpi(fig) -> float:
    """150 dpi, or less where the figure would exceed `MAX_PNG_PIXELS`."""
    width, height = fig.get_size_inches()
    return min(150.0, (MAX_PNG_PIXELS / max(width * height, 1e-9)) ** 0.5)


def save(fig, folder: Path, name: str, svg: bool = False) -> list[Path]:
    """Write ``name.png`` (150 dpi, within `MAX_PNG_PIXELS`) and, with ``svg``, ``name.svg``, with no date and
    ids salted by ``name``: the same study writes the same bytes. PNG path first."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.png"] + ([folder / f"{name}.svg"] if svg else [])
    fig.savefig(paths[0], dpi=png_dpi(fig))
    if svg:
        fig.set_layout_engine("none")          # the layout is in inches: keep the PNG's, don't solve it again
        with matplotlib.rc_context({"svg.hashsalt": name}):
            fig.savefig(paths[1], metadata={"Date": None})
    return paths


def axes_off(ax) -> None:
    """``ax.axis("off")`` (its axes neither drawn nor measured), and its x and y axes hidden too: placing the title
    still asks the y axis for its extent, which computes its ticks and measures their labels at each layout pass
    and at the draw (a floorplan's about 0.03 CPU-s, for nothing). The same PNG bytes (docs/performance.md,
    "Issue 52, tenth round (the floorplans)")."""
    ax.axis("off")
    ax.xaxis.set_visible(False)
    ax.yaxis.set_visible(False)
