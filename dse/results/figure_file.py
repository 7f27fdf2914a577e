"""A figure of the results folder written to its files: PNG (150 dpi, within `MAX_PNG_PIXELS`) and, on
request, SVG, with the same bytes for the same study.

PNGs are drawn by matplotlib's Agg renderer with one change in how it draws text (`GlyphRenderer`), every
pixel the same. Agg draws a text line glyph by glyph (matplotlib 3.11,
``RendererAgg._draw_text_glyphs_and_boxes``): before each glyph it sets the font's size again and builds its
2 x 2 transform with NumPy. Setting a TrueType font's size makes FreeType run the font's hinting program
(``prep``) again at the next hinted glyph, about 50 us a glyph, the most of drawing it; an 8 x 8 floorplan
holds about 4,000 glyphs (docs/performance.md, issue 52's seventh round). `GlyphRenderer` sets the size
only when the font or size changes and builds the transform once a line: the same FreeType calls with the
same arguments otherwise, so the same bitmaps. It replaces matplotlib's method only where that method is
the one it was written against (`STOCK_SOURCE_SHA256` of its source); with any other matplotlib the stock
renderer draws (tests/test_results_figure_file.py compares the PNG bytes of both).
"""
from __future__ import annotations

import hashlib
import inspect
import math
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg, get_hinting_flag
from matplotlib.ft2font import RenderMode

MAX_PNG_PIXELS = 4_000_000     # a larger figure (an 8 x 8 floorplan) is written at a lower dpi; its SVG stays exact
#: SHA-256 of the source of matplotlib 3.11's ``RendererAgg._draw_text_glyphs_and_boxes``, which
#: `GlyphRenderer` redoes with fewer calls
STOCK_SOURCE_SHA256 = "ccc4749c9809539465c335a8e206cf42043d8e98199a2909cde208f6b463cab8"


def _stock_source_sha256() -> str:
    try:
        source = inspect.getsource(RendererAgg._draw_text_glyphs_and_boxes)
    except (AttributeError, OSError, TypeError):
        return ""
    return hashlib.sha256(source.encode()).hexdigest()


#: whether this matplotlib draws text as `GlyphRenderer` was written against
FAST_TEXT = _stock_source_sha256() == STOCK_SOURCE_SHA256


class GlyphRenderer(RendererAgg):
    """matplotlib's Agg renderer drawing a text line's glyphs with the font's size set once per font and
    size and the glyph transform's matrix built once per line (module docstring): the same pixels."""

    def _draw_text_glyphs_and_boxes(self, gc, x, y, angle, glyphs, boxes):
        # matplotlib 3.11's method (y is downwards, dy upwards, FreeType's y upwards) with `set_size` and
        # the matrix hoisted: each glyph still gets `_set_transform` with its own offset before rendering
        cos = math.cos(math.radians(angle))
        sin = math.sin(math.radians(angle))
        load_flags = get_hinting_flag()
        antialiased = gc.get_antialiased()
        mode = RenderMode.NORMAL if antialiased else RenderMode.MONO
        height = self.height
        draw = self._renderer.draw_text_image
        matrices: dict[tuple, np.ndarray] = {}
        sized = None
        for font, size, glyph_index, slant, extend, dx, dy in glyphs:
            if sized is None or sized[0] is not font or sized[1] != size:
                font.set_size(size, self.dpi)
                sized = (font, size)
            matrix = matrices.get((slant, extend))
            if matrix is None:
                matrix = matrices[slant, extend] = (0x10000 * np.array([[cos, -sin], [sin, cos]])
                                                    @ [[extend, extend * slant], [0, 1]]).round().astype(int)
            font._set_transform(matrix, [round(0x40 * (x + dx * cos - dy * sin)),
                                         round(0x40 * (height - y + dx * sin + dy * cos))])
            bitmap = font._render_glyph(glyph_index, load_flags, mode)
            buffer = bitmap.buffer
            if not antialiased:
                buffer *= 0xff
            draw(buffer, bitmap.left, int(height) - bitmap.top + buffer.shape[0], 0, gc)
        if boxes:                               # mathtext's rules: matplotlib's own code, no glyphs left
            super()._draw_text_glyphs_and_boxes(gc, x, y, angle, (), boxes)


class GlyphCanvas(FigureCanvasAgg):
    """An Agg canvas drawing with `GlyphRenderer` (a new renderer whenever the size or dpi changes, as
    matplotlib's own canvas does)."""

    _glyph_key: tuple | None = None

    def get_renderer(self):
        w, h = self.get_width_height(physical=True)
        key = w, h, self.figure.dpi
        if self._glyph_key != key:
            self.renderer = GlyphRenderer(w, h, self.figure.dpi)
            self._glyph_key = key
        return self.renderer


def png_dpi(fig) -> float:
    """150 dpi, or less where the figure would exceed `MAX_PNG_PIXELS`."""
    width, height = fig.get_size_inches()
    return min(150.0, (MAX_PNG_PIXELS / max(width * height, 1e-9)) ** 0.5)


def save_png(fig, path, dpi: float, fast_text: bool | None = None) -> None:
    """``fig`` as a PNG at ``dpi``; ``fast_text`` (default `FAST_TEXT`): drawn by `GlyphCanvas`."""
    if FAST_TEXT if fast_text is None else fast_text:
        GlyphCanvas(fig)                        # becomes the figure's canvas: savefig draws with it
    fig.savefig(path, dpi=dpi)


def save(fig, folder: Path, name: str, svg: bool = False) -> list[Path]:
    """Write ``name.png`` (150 dpi, within `MAX_PNG_PIXELS`) and, with ``svg`` (`dse run --svg`; docs/performance.md),
    ``name.svg``, with no date and ids salted by ``name``: the same study writes the same bytes. PNG path first."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.png"] + ([folder / f"{name}.svg"] if svg else [])
    save_png(fig, paths[0], png_dpi(fig))
    if svg:
        fig.set_layout_engine("none")          # the layout is in inches: keep the PNG's, don't solve it again
        with matplotlib.rc_context({"svg.hashsalt": name}):
            fig.savefig(paths[1], metadata={"Date": None})
    return paths
