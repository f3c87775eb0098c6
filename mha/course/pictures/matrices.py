"""One head as matrices: Q_i (L x d_k) . K_i^T / sqrt(d_k) -> scores (L x S) -> softmax -> A_i . V_i -> head_i."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import FancyArrowPatch
from matplotlib.path import Path

from .style import CMAP, to_numpy

__all__ = ["plot_head_matrices"]

_CELL = 0.2  # inches per row/column, up to _MAX cells; wider matrices are squeezed into _MAX cells
_MAX = 8
_NAME_PT = 12  # matrix names, in mathtext so that the sub- and superscripts (K₁ᵀ) stay readable on a phone
_NAME_H = 0.3  # room a name takes above its matrix (data units), its top included


def _size(n: int) -> float:
    return _CELL * min(n, _MAX)


def _matrix(ax, m, x, y_top, name, cmap=CMAP, vmin=None, vmax=None, prefix=""):
    """Draw matrix ``m`` with its top-left corner at (x, y_top), named ``name`` (mathtext) above it, ``prefix``
    (Chinese, which mathtext cannot draw) left of the name on its baseline; return its width."""
    rows, cols = m.shape
    w, h = _size(cols), _size(rows)
    ax.imshow(m, extent=(x, x + w, y_top - h, y_top), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto",
              interpolation="nearest")
    ax.add_patch(plt.Rectangle((x, y_top - h), w, h, fill=False, edgecolor="#333333", linewidth=1))
    label = ax.text(x + w / 2, y_top + 0.12, name, ha="center", va="baseline", fontsize=_NAME_PT)
    if prefix:
        ax.annotate(prefix + " ", xy=(0, y_top + 0.12), xycoords=(label, "data"), ha="right", va="baseline",
                    fontsize=_NAME_PT)
    ax.text(x + w / 2, y_top - h - 0.08, f"{rows}×{cols}", ha="center", va="top", fontsize=10, color="#444444")
    return w


def _symbol(ax, x, y, text, fontsize=14):
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def plot_head_matrices(q_i, k_i, v_i, head: int = 1):
    """The three matrix steps of one head with the real numbers as colours (one sentence).

    Top row: Q_i · K_i^T ÷ √d_k = scores; an arrow labelled softmax leads from the scores to the weights A_i,
    which start the bottom row: A_i · V_i = head_i.

    Args:
        q_i: (L, d_k) the head's queries; k_i, v_i: (S, d_k) its keys and values.
        head: the head's number, counted from 1, for the labels.

    Returns:
        The matplotlib ``Figure``.
    """
    q, k, v = (np.asarray(to_numpy(t), dtype=float) for t in (q_i, k_i, v_i))
    if q.ndim != 2 or k.ndim != 2 or v.ndim != 2 or q.shape[1] != k.shape[1] or k.shape[0] != v.shape[0]:
        raise ValueError(f"need q (L, d_k), k (S, d_k), v (S, d_v) with matching sizes, got {q.shape}, {k.shape}, "
                         f"{v.shape}")
    L, d_k = q.shape
    scores = q @ k.T / np.sqrt(d_k)                      # (L, S)
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights = e / e.sum(axis=1, keepdims=True)          # (L, S), rows sum to 1
    out = weights @ v                                    # (L, d_v)
    i = f"{{{head}}}"                                    # mathtext subscript group: Q_{1}, Q_{12}
    fig, ax = plt.subplots(figsize=(5.4, 4.6))
    top1, gap = 4.1, 0.32
    lower1 = min(top1 - 0.3 - _size(L), top1 - _size(d_k))    # the lowest matrix of the top row
    y_from = top1 - 0.3 - _size(L) - 0.35                # the arrow starts below the scores' shape label
    lane = min(lower1 - 0.55, y_from - 0.6)              # and runs left here, below the top row, beside its label
    top2 = lane - 0.2 - _NAME_H                          # the bottom row's names end below the lane
    x = 0.1
    x += _matrix(ax, q, x, top1 - 0.3, f"$Q_{i}$") + gap
    _symbol(ax, x - gap / 2, top1 - 0.3 - _size(L) / 2, "·")
    x += _matrix(ax, k.T, x, top1, f"$K_{i}^{{\\top}}$") + 3 * gap  # room for "÷√dₖ ="
    _symbol(ax, x - 1.5 * gap, top1 - 0.3 - _size(L) / 2, r"$\div\sqrt{d_k}=$", fontsize=12)
    x_scores = x
    w_s = _matrix(ax, scores, x, top1 - 0.3, "分数")
    x = max(x_scores - 2 * gap - _size(v.shape[0]) - _size(v.shape[1]) - gap, 0.1)
    x_weights = x
    w_a = _matrix(ax, weights, x, top2, f"$A_{i}$", vmin=0, vmax=1, prefix="权重")
    x += w_a + gap
    _symbol(ax, x - gap / 2, top2 - _size(L) / 2, "·")
    x += _matrix(ax, v, x, top2, f"$V_{i}$") + gap
    _symbol(ax, x - gap / 2, top2 - _size(L) / 2, "=")
    x += _matrix(ax, out, x, top2, f"$\\mathrm{{head}}_{i}$")
    # scores -> softmax -> A_i: down from the scores' shape label, left along the lane, down onto A_i's name
    x_from, x_to = x_scores + w_s / 2, x_weights + w_a / 2
    y_to = top2 + _NAME_H + 0.03
    path = Path([(x_from, y_from), (x_from, lane), (x_to, lane), (x_to, y_to)],
                [Path.MOVETO, Path.LINETO, Path.LINETO, Path.LINETO])
    ax.add_patch(FancyArrowPatch(path=path, arrowstyle="-|>", mutation_scale=12, color="#555555", linewidth=1.2,
                                 joinstyle="miter"))
    ax.text(x_from + 0.1, (y_from + lane) / 2, "softmax\n（按行）", ha="left", va="center", fontsize=10)
    ax.set_xlim(0, max(5.3, x + 0.1, x_scores + w_s + 0.1))   # wider sentences: no matrix cut off at the edge
    ax.set_ylim(top2 - max(_size(L), _size(k.shape[0])) - 0.45, top1 + 0.35)   # V_i has S rows
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"$\\mathrm{{head}}_{i} = \\mathrm{{softmax}}(Q_{i}K_{i}^{{\\top}}/\\sqrt{{d_k}})\\,V_{i}$,   "
                 f"$L = {L},\\ S = {k.shape[0]},\\ d_k = {d_k}$", fontsize=10.5)
    return fig
