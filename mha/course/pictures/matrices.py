"""One head as matrices: Q_i (L x d_k) . K_i^T / sqrt(d_k) -> scores (L x S) -> softmax -> . V_i -> head_i (L x d_k)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .style import CMAP, to_numpy

__all__ = ["plot_head_matrices"]

_CELL = 0.2  # inches per row/column, up to _MAX cells; wider matrices are squeezed into _MAX cells
_MAX = 8


def _size(n: int) -> float:
    return _CELL * min(n, _MAX)


def _matrix(ax, m, x, y_top, name, cmap=CMAP, vmin=None, vmax=None):
    """Draw matrix ``m`` with its top-left corner at (x, y_top); return its width."""
    rows, cols = m.shape
    w, h = _size(cols), _size(rows)
    ax.imshow(m, extent=(x, x + w, y_top - h, y_top), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto",
              interpolation="nearest")
    ax.add_patch(plt.Rectangle((x, y_top - h), w, h, fill=False, edgecolor="#333333", linewidth=1))
    ax.text(x + w / 2, y_top + 0.12, name, ha="center", va="bottom", fontsize=10.5)
    ax.text(x + w / 2, y_top - h - 0.08, f"{rows}×{cols}", ha="center", va="top", fontsize=10, color="#444444")
    return w


def _symbol(ax, x, y, text, fontsize=14):
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)


def plot_head_matrices(q_i, k_i, v_i, head: int = 1):
    """The three matrix steps of one head with the real numbers as colours (one sentence).

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
    i = str(head).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))
    fig, ax = plt.subplots(figsize=(5.4, 4.6))
    top1, top2, gap = 4.1, 1.75, 0.32
    x = 0.1
    x += _matrix(ax, q, x, top1 - 0.3, f"Q{i}") + gap
    _symbol(ax, x - gap / 2, top1 - 0.3 - _size(L) / 2, "·")
    x += _matrix(ax, k.T, x, top1, f"K{i}ᵀ") + 3 * gap  # room for "÷√dₖ ="
    _symbol(ax, x - 1.5 * gap, top1 - 0.3 - _size(L) / 2, "÷√dₖ =", fontsize=12)
    x_scores = x
    w_s = _matrix(ax, scores, x, top1 - 0.3, "分数")
    ax.annotate("", xy=(x_scores + w_s / 2, top2 + 0.45), xytext=(x_scores + w_s / 2, top1 - 0.3 - _size(L) - 0.35),
                arrowprops={"arrowstyle": "-|>", "color": "#555555"})
    ax.text(x_scores + w_s / 2 + 0.1, (top2 + top1 - _size(L)) / 2 + 0.05, "softmax\n（按行）", ha="left", va="center",
            fontsize=10)
    x = x_scores - 2 * gap - _size(v.shape[0]) - _size(v.shape[1]) - gap
    x = max(x, 0.1)
    x += _matrix(ax, weights, x, top2, f"权重 A{i}", vmin=0, vmax=1) + gap
    _symbol(ax, x - gap / 2, top2 - _size(L) / 2, "·")
    x += _matrix(ax, v, x, top2, f"V{i}") + gap
    _symbol(ax, x - gap / 2, top2 - _size(L) / 2, "=")
    _matrix(ax, out, x, top2, f"head{i}")
    ax.set_xlim(0, 5.3)
    ax.set_ylim(0.6, 4.45)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"第 {head} 个头：softmax(Q{i}K{i}ᵀ/√dₖ)·V{i}，L = {L}，S = {k.shape[0]}，dₖ = {d_k}", fontsize=10.5)
    return fig
