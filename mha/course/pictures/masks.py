"""Masks drawn as pictures: white = may attend, dark = masked."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.colors import ListedColormap

from .style import label_grid, to_numpy
from .heatmap import AXIS_KEY, AXIS_QUERY


def plot_mask(mask, row_labels=None, col_labels=None, title=None, ax=None):
    """Draw an (L, S) boolean mask (True = may attend) as a grid of squares.

    Returns:
        The matplotlib ``Axes``.
    """
    m = to_numpy(mask).astype(float)
    while m.ndim > 2:  # (B, 1, 1, S) or (1, 1, L, S): take the first of each leading axis
        m = m[0]
    if m.ndim == 1:
        m = m[None, :]
    if ax is None:
        _, ax = plt.subplots(figsize=(min(5.4, 0.5 * m.shape[1] + 1.6), min(5.4, 0.5 * m.shape[0] + 1.3)))
    ax.imshow(m, cmap=ListedColormap(["#333333", "#ffffff"]), vmin=0, vmax=1)
    label_grid(ax, m.shape, row_labels, col_labels)
    ax.set_xticks([x - 0.5 for x in range(1, m.shape[1])], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, m.shape[0])], minor=True)
    ax.grid(which="minor", color="#999999", linewidth=0.8)
    ax.tick_params(which="minor", length=0)
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            ax.text(j, i, "1" if m[i, j] else "0", ha="center", va="center", fontsize=10,
                    color="black" if m[i, j] else "white")
    ax.set_xlabel(AXIS_KEY)
    ax.set_ylabel(AXIS_QUERY)
    if title:
        ax.set_title(title)
    return ax
