"""Shared colours, the phone-size rule and helpers for the figures."""
from __future__ import annotations

import matplotlib
from matplotlib.text import Text

from .cjk import use_cjk_fallback

use_cjk_fallback()  # every figure: Latin from DejaVu Sans, Chinese from the shipped subset
matplotlib.rcParams["font.size"] = 11  # one step above matplotlib's 10: figures are read on phones too

HEAD_COLORS = [matplotlib.colormaps["tab10"](i) for i in range(10)]
CMAP = "viridis"

PHONE_COLUMN_PX = 358  # the text column of a 390 px wide phone (CSS px)
MIN_TEXT_PX = 9  # the smallest readable text there
PHONE_WIDTH_IN = 5.4  # a figure this wide keeps 10.5 pt text at >= 9 CSS px on that column
SCREEN_DPI = 100  # matplotlib's figure.dpi: CSS px per inch of a stored figure (its PNG has 2x the pixels, png_text)


def head_color(i: int):
    """Colour of head i, reused by every figure so a head keeps its colour."""
    return HEAD_COLORS[i % len(HEAD_COLORS)]


def to_numpy(t):
    """Detach a tensor (or pass through an array) as a float numpy array."""
    if hasattr(t, "detach"):
        t = t.detach().cpu().float().numpy()
    return t


def label_grid(ax, shape, row_labels=None, col_labels=None) -> None:
    """One tick per row and column of an (L, S) grid, labelled with the tokens when given."""
    ax.set_xticks(range(shape[1]))
    ax.set_yticks(range(shape[0]))
    if col_labels is not None:
        long = max((len(str(c)) for c in col_labels), default=0) > 3
        ax.set_xticklabels(col_labels, rotation=45 if long else 0, ha="right" if long else "center")
    if row_labels is not None:
        ax.set_yticklabels(row_labels)


def smallest_text_pt(fig) -> float:
    """Font size (pt) of the smallest visible text ``fig`` draws (the measure behind ``smallest_text_px``)."""
    if not hasattr(fig, "canvas"):
        raise TypeError(f"smallest_text_px needs a matplotlib Figure, got {type(fig).__name__}")
    renderer = fig.canvas.get_renderer()
    sizes = [t.get_fontsize() for t in fig.findobj(Text)
             if t.get_visible() and t.get_text().strip() and _drawn(t, renderer)]
    if not sizes:
        raise ValueError("the figure has no visible text to measure")
    return min(sizes)


def smallest_text_px(fig, column_px: float = PHONE_COLUMN_PX) -> float:
    """CSS px of the smallest text of ``fig`` when its saved image (tight box) fills at most ``column_px``.

    The notebooks store PNGs cropped to the tight bounding box, drawn at 2 x ``SCREEN_DPI`` and shown
    ``SCREEN_DPI`` CSS px per inch (mha.course.pictures.png_text: the output's width metadata), or, when wider,
    scaled down to the column. Text of ``s`` pt is then
    ``s * dpi / 72 * min(1, column / width_px)`` CSS px. (Each PNG a chapter stores carries its
    smallest text in image px, ``s * dpi / 72``: mha.course.pictures.png_text; the browser tests scale it.)
    """
    smallest = smallest_text_pt(fig)
    renderer = fig.canvas.get_renderer()
    width_px = fig.get_tightbbox(renderer).width * SCREEN_DPI + 2 * 0.1 * SCREEN_DPI  # savefig pads 0.1 in
    scale = min(1.0, column_px / width_px)
    return smallest * SCREEN_DPI / 72 * scale


def _drawn(text, renderer) -> bool:
    """A tick label matplotlib keeps but does not draw (outside the axis limits) does not count."""
    axes = text.axes
    if axes is None or text not in axes.get_xticklabels() + axes.get_yticklabels():
        return True
    box = text.get_window_extent(renderer)
    return box.width > 0 and box.height > 0
