"""Heatmaps of scores and attention weights, with token labels."""
from __future__ import annotations

import matplotlib.pyplot as plt

from ._style import CMAP, label_grid, to_numpy


def plot_heatmap(matrix, row_labels=None, col_labels=None, title=None, ax=None, annotate=True,
                 vmin=None, vmax=None, cmap=CMAP, fmt="{:.2f}"):
    """Draw one (L, S) matrix as a heatmap.

    Args:
        matrix: (L, S) tensor or array (e.g. one head's weights).
        row_labels: L query token labels (y axis).
        col_labels: S key token labels (x axis).
        annotate: write each value in its cell (useful for small L, S).

    Returns:
        The matplotlib ``Axes``.
    """
    m = to_numpy(matrix)
    if m.ndim != 2:
        raise ValueError(f"plot_heatmap needs a 2-D (L, S) matrix, got shape {tuple(m.shape)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.6 * m.shape[1] + 1.8, 0.6 * m.shape[0] + 1.2))
    im = ax.imshow(m, cmap=cmap, vmin=vmin, vmax=vmax)
    label_grid(ax, m.shape, row_labels, col_labels)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    if annotate and m.size <= 144:
        lo, hi = (m.min(), m.max()) if vmin is None or vmax is None else (vmin, vmax)
        mid = (lo + hi) / 2
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                ax.text(j, i, fmt.format(m[i, j]), ha="center", va="center", fontsize=8,
                        color="black" if m[i, j] > mid else "white")
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return ax


def plot_heads(weights, tokens=None, query_tokens=None, title=None, include_mean=False, annotate=True):
    """Draw every head's (L, S) weights side by side.

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
    h = w.shape[0]
    panels = h + (1 if include_mean else 0)
    fig, axes = plt.subplots(1, panels, figsize=(3.2 * panels, 3.2), squeeze=False)
    for i in range(h):
        plot_heatmap(w[i], query_tokens or tokens, tokens, title=f"head {i + 1}", ax=axes[0, i],
                     annotate=annotate, vmin=0.0, vmax=1.0)
    if include_mean:
        plot_heatmap(w.mean(axis=0), query_tokens or tokens, tokens, title="mean over heads",
                     ax=axes[0, h], annotate=annotate, vmin=0.0, vmax=1.0)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
