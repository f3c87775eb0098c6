"""Heatmaps of scores and attention weights, with token labels."""
from __future__ import annotations

import matplotlib.pyplot as plt

from mha.validate import require_int

from .style import CMAP, label_grid, to_numpy

AXIS_KEY, AXIS_QUERY = "Key 位置", "Query 位置"


def head_title(i: int) -> str:
    """The label of head ``i`` (a code index, from 0): heads are counted from 1 in every figure."""
    return f"第 {i + 1} 个头"


def plot_heatmap(matrix, row_labels=None, col_labels=None, title=None, ax=None, annotate=True,
                 vmin=None, vmax=None, cmap=CMAP, fmt="{:.2f}", colorbar=True, fontsize=10):
    """Draw one (L, S) matrix as a heatmap.

    Args:
        matrix: (L, S) tensor or array (e.g. one head's weights).
        row_labels: L query token labels (y axis).
        col_labels: S key token labels (x axis).
        annotate: write each value in its cell (only when a cell is wide enough for ``fontsize``).

    Returns:
        The matplotlib ``Axes``.
    """
    m = to_numpy(matrix)
    if m.ndim != 2:
        raise ValueError(f"plot_heatmap needs a 2-D (L, S) matrix, got shape {tuple(m.shape)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(min(5.4, 0.55 * m.shape[1] + 1.8), min(5.4, 0.55 * m.shape[0] + 1.3)))
    im = ax.imshow(m, cmap=cmap, vmin=vmin, vmax=vmax)
    label_grid(ax, m.shape, row_labels, col_labels)
    ax.set_xlabel(AXIS_KEY)
    ax.set_ylabel(AXIS_QUERY)
    if title:
        ax.set_title(title)
    cell_pt = ax.get_window_extent().width / m.shape[1] * 72 / ax.figure.dpi
    if annotate and cell_pt >= 2.3 * fontsize:  # room for "0.45" in each cell
        lo, hi = (m.min(), m.max()) if vmin is None or vmax is None else (vmin, vmax)
        mid = (lo + hi) / 2
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                ax.text(j, i, fmt.format(m[i, j]), ha="center", va="center", fontsize=fontsize,
                        color="black" if m[i, j] > mid else "white")
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return ax


def plot_heads(weights, tokens=None, query_tokens=None, title=None, include_mean=False, annotate=True,
               ncols: int = 2):
    """Draw every head's (L, S) weights, ``ncols`` panels a row (two fit a phone), one shared colour bar.

    Args:
        weights: (h, L, S) weights of one sequence, e.g. ``w[0]`` from a layer
            called with ``need_weights=True``.
        tokens: S key labels (also used for queries unless ``query_tokens``).
        include_mean: add a last panel with the average over heads.

    Returns:
        The matplotlib ``Figure``.
    """
    w = to_numpy(weights)
    if w.ndim != 3:
        raise ValueError(f"plot_heads needs (h, L, S) weights of one sequence, got shape {tuple(w.shape)}")
    ncols = require_int(ncols, "ncols", minimum=1)
    h = w.shape[0]
    panels = h + (1 if include_mean else 0)
    cols = min(ncols, panels)
    rows = -(-panels // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.35 * cols + 0.5, 2.45 * rows + (0.4 if title else 0)),
                             squeeze=False)
    mats = [w[i] for i in range(h)] + ([w.mean(axis=0)] if include_mean else [])
    names = [head_title(i) for i in range(h)] + (["各头平均"] if include_mean else [])
    for k, ax in enumerate(axes.flat):
        if k >= panels:
            ax.axis("off")
            continue
        plot_heatmap(mats[k], query_tokens or tokens, tokens, title=names[k], ax=ax, annotate=annotate,
                     vmin=0.0, vmax=1.0, colorbar=False)
        if k % cols:
            ax.set_ylabel("")
        if k < panels - cols:
            ax.set_xlabel("")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.colorbar(axes.flat[0].images[0], ax=axes.ravel().tolist(), fraction=0.04, pad=0.03)
    return fig
