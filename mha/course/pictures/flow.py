"""The lecture's flow of six steps, each box annotated with its shape; a chapter can mark its own step."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from mha.validate import require_int

__all__ = ["STEP_NAMES", "flow_shapes", "plot_flow"]

STEP_NAMES = ("输入 Q、K、V", "Linear 投影", "分头", "每头注意力", "Concat 拼接", "最终 Linear")
_MATH = ("", "$W^Q, W^K, W^V$", "", "", "", "$W^O$")
COLORS = ["#e8f1fb", "#fde9d9", "#fff2cc", "#e2f0d9", "#ede2f6", "#fde9d9"]
HIGHLIGHT = "#c0392b"


def flow_shapes(B: int = 2, L: int = 4, d_model: int = 512, n_heads: int = 8):
    """The six steps with the shape after each, as (label, shape string) pairs."""
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
    d_k = d_model // n_heads
    shapes = [f"({B}, {L}, {d_model})", f"({B}, {L}, {d_model})", f"({B}, {n_heads}, {L}, {d_k})",
              f"({B}, {n_heads}, {L}, {d_k})", f"({B}, {L}, {n_heads}×{d_k}={d_model})", f"({B}, {L}, {d_model})"]
    return [(f"{i + 1}. {name}", shape) for i, (name, shape) in enumerate(zip(STEP_NAMES, shapes))]


def plot_flow(B: int = 2, L: int = 4, d_model: int = 512, n_heads: int = 8, highlight=None, ncols: int = 3,
              ax=None):
    """Draw Q, K, V -> Linear -> split -> attention -> Concat -> Linear in rows of ``ncols`` boxes, with shapes.

    Args:
        highlight: a step number 1-6 (or several) drawn with a red frame, the others faded: the
            chapter's own step.
        ncols: boxes per row; 3 keeps the text readable on a phone.

    Returns:
        The matplotlib ``Axes``.
    """
    steps = flow_shapes(B, L, d_model, n_heads)
    ncols = require_int(ncols, "ncols", minimum=1)
    marked = set() if highlight is None else {highlight} if isinstance(highlight, int) else set(highlight)
    if not marked <= set(range(1, 7)):
        raise ValueError(f"highlight must be step numbers 1-6, got {highlight!r}")
    nrows = -(-len(steps) // ncols)
    w, h, gap_x, gap_y = 1.68, 1.05, 0.22, 0.42  # inches: the axes is drawn 1:1
    if ax is None:
        width, height = ncols * w + (ncols - 1) * gap_x + 0.2, nrows * h + (nrows - 1) * gap_y + 0.65
        _, ax = plt.subplots(figsize=(width, height))
    centers = []
    for i, ((label, shape), color) in enumerate(zip(steps, COLORS)):
        row, col = divmod(i, ncols)
        x, y = col * (w + gap_x), -row * (h + gap_y)
        mine = i + 1 in marked
        faded = bool(marked) and not mine
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.03", facecolor=color,
                                    edgecolor=HIGHLIGHT if mine else "#555555", linewidth=3 if mine else 1,
                                    alpha=0.45 if faded else 1.0))
        tone = "#777777" if faded else "black"
        has_math = bool(_MATH[i])
        ax.text(x + w / 2, y + (0.76 if has_math else 0.64) * h, label, ha="center", va="center", fontsize=11.5,
                color=tone)
        if has_math:
            ax.text(x + w / 2, y + 0.48 * h, _MATH[i], ha="center", va="center", fontsize=11, color=tone)
        ax.text(x + w / 2, y + 0.2 * h, shape, ha="center", va="center", fontsize=10.5, family="monospace",
                color=tone)
        centers.append((x, y))
    for (x0, y0), (x1, y1) in zip(centers, centers[1:]):
        if y0 == y1:  # same row: left to right
            start, end = (x0 + w + 0.03, y0 + h / 2), (x1 - 0.03, y1 + h / 2)
        else:  # next row: down from the last box, across, down into the first box of the row
            mid_y = y0 - gap_y / 2
            ax.plot([x0 + w / 2, x0 + w / 2, x1 + w / 2], [y0 - 0.03, mid_y, mid_y], color="#555555", linewidth=1.2)
            start, end = (x1 + w / 2, mid_y), (x1 + w / 2, y1 + h + 0.03)
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color="#555555", linewidth=1.2))
    ax.set_xlim(-0.08, ncols * (w + gap_x) - gap_x + 0.08)
    ax.set_ylim(-(nrows - 1) * (h + gap_y) - 0.08, h + 0.08)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"多头注意力：B={B}, L={L}, d_model={d_model}, h={n_heads}, d_k={d_model // n_heads}", fontsize=11)
    return ax
