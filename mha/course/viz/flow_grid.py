"""The six steps of multi-head attention in two rows of three: readable on a phone too.

Same content as :func:`mha.viz.plot_flow` (the labels and shapes come from
:func:`mha.viz.flow.flow_shapes`), laid out 3 x 2 so that the landing page's
figure keeps a legible text size on narrow screens.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from .flow import flow_shapes

COLORS = ["#e8f1fb", "#fde9d9", "#fff2cc", "#e2f0d9", "#ede2f6", "#fde9d9"]


def plot_flow_grid(B: int = 2, L: int = 4, d_model: int = 512, n_heads: int = 8, ncols: int = 3, ax=None):
    """Draw Q, K, V -> Linear -> split -> attention -> Concat -> Linear in rows of ``ncols`` boxes.

    Returns:
        The matplotlib ``Axes``.
    """
    steps = flow_shapes(B, L, d_model, n_heads)
    if ncols < 1:
        raise ValueError(f"ncols must be >= 1, got {ncols}")
    nrows = -(-len(steps) // ncols)
    w, h, gap_x, gap_y = 2.2, 1.1, 0.55, 0.6
    if ax is None:
        _, ax = plt.subplots(figsize=(0.95 * ncols * (w + gap_x), 0.95 * nrows * (h + gap_y) + 0.5))
    centers = []
    for i, ((label, shape), color) in enumerate(zip(steps, COLORS * 2)):
        row, col = divmod(i, ncols)
        x, y = col * (w + gap_x), -row * (h + gap_y)
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.04", facecolor=color, edgecolor="#555555"))
        ax.text(x + w / 2, y + 0.72 * h, label, ha="center", va="center", fontsize=11, weight="bold")
        ax.text(x + w / 2, y + 0.24 * h, shape, ha="center", va="center", fontsize=10, family="monospace")
        centers.append((x, y))
    for (x0, y0), (x1, y1) in zip(centers, centers[1:]):
        if y0 == y1:  # same row: left to right
            start, end = (x0 + w + 0.06, y0 + h / 2), (x1 - 0.06, y1 + h / 2)
        else:  # next row: down from the last box, across, down into the first box of the row
            mid_y = y0 - gap_y / 2
            ax.plot([x0 + w / 2, x0 + w / 2, x1 + w / 2], [y0 - 0.06, mid_y, mid_y], color="#555555", linewidth=1.2)
            start, end = (x1 + w / 2, mid_y), (x1 + w / 2, y1 + h + 0.06)
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14, color="#555555", linewidth=1.2))
    ax.set_xlim(-0.15, ncols * (w + gap_x) - gap_x + 0.15)
    ax.set_ylim(-(nrows - 1) * (h + gap_y) - 0.15, h + 0.15)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"multi-head attention: B={B}, L={L}, d_model={d_model}, h={n_heads}, d_k={d_model // n_heads}",
                 fontsize=11)
    return ax
