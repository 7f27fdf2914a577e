"""PNGs drawn with `GlyphRenderer` (the font's size set once per font and size, not per glyph) are the bytes
matplotlib's own Agg renderer writes (dse.results.figure_file)."""
import io

import pytest

from dse.results import figure_file
from dse.results.plots import Figure


def _text_figure() -> Figure:
    """Many lines of text as the floorplans write them: sizes, bold, rotated, mathtext, two alignments."""
    fig = Figure(figsize=(6.0, 4.0), layout="constrained")
    ax = fig.add_subplot()
    for i in range(12):
        ax.text(0.02 + 0.08 * i, 0.95, f"{i}: sys-{i} [hbm]\n{3 * i} x e{i}\nHBM x{i % 3}: 1.{i}/96 GiB\nbusy {7 * i}%",
                ha="left", va="top", fontsize=6 + i % 3, weight="bold" if i % 2 else "normal")
    ax.text(0.5, 0.3, "rotated 30°", rotation=30, fontsize=9)
    ax.text(0.5, 0.1, r"$\sqrt{x^2}$ and $\frac{a}{b}$", fontsize=10, ha="center")
    ax.set_title("fault tolerance: 8 x 8 mesh, 12.3 ms per step")
    ax.set_xlabel("latency per step [ms] (lower is better)")
    return fig


def _png(fig: Figure, fast: bool, dpi: float = 100.0) -> bytes:
    buf = io.BytesIO()
    figure_file.save_png(fig, buf, dpi, fast_text=fast)
    return buf.getvalue()


@pytest.mark.skipif(not figure_file.FAST_TEXT, reason="another matplotlib: the stock renderer draws")
def test_glyph_renderer_writes_the_stock_renderers_bytes():
    fast, stock = _png(_text_figure(), True), _png(_text_figure(), False)
    assert fast[:8] == b"\x89PNG\r\n\x1a\n"
    assert fast == stock


def test_save_draws_with_the_glyph_canvas_where_matplotlib_is_the_one_it_was_written_against(tmp_path):
    fig = _text_figure()
    paths = figure_file.save(fig, tmp_path, "text")
    assert paths == [tmp_path / "text.png"]
    assert isinstance(fig.canvas, figure_file.GlyphCanvas) == figure_file.FAST_TEXT
    assert paths[0].read_bytes() == _png(_text_figure(), False, figure_file.png_dpi(fig))
