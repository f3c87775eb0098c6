"""Shared colours and helpers for the figures."""
from __future__ import annotations

import matplotlib

from .cjk import use_cjk_fallback

use_cjk_fallback()  # every figure: Latin from DejaVu Sans, Chinese from the shipped subset

HEAD_COLORS = [matplotlib.colormaps["tab10"](i) for i in range(10)]
CMAP = "viridis"


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
        ax.set_xticklabels(col_labels, rotation=45, ha="right")
    if row_labels is not None:
        ax.set_yticklabels(row_labels)
