"""The Transformer's three attention blocks (lecture 003's orange blocks), drawn small enough for a phone.

Chapter 2's picture: where each block sits, what it gets as Q, K, V and which mask it uses. The full
numeral Transformer of chapter 13 is :func:`mha.course.pictures.plot_transformer`; the colours are the same.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from .transformer import BLOCK_COLORS

__all__ = ["plot_attention_blocks"]

_PLAIN = "#eef2f7"
_W, _H = 2.5, 0.55  # box size, inches (the axes is drawn 1:1)


def _box(ax, x, y, text, color, h=_H, lw=1.0):
    ax.add_patch(FancyBboxPatch((x - _W / 2, y - h / 2), _W, h, boxstyle="round,pad=0.03", facecolor=color,
                                edgecolor="#555555", linewidth=lw))
    ax.text(x, y, text, ha="center", va="center", fontsize=10.5, linespacing=1.3)


def _arrow(ax, start, end, color="#555555", **kw):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=11, color=color, linewidth=1.2, **kw))


def plot_attention_blocks(ax=None):
    """Encoder (left) and decoder (right) of one layer; the three attention blocks in their colours.

    Returns:
        The matplotlib ``Axes``.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(5.4, 6.3))
    xe, xd = 1.3, 4.05
    left = [(0.4, _H, "源句 Embedding + PE", _PLAIN),
            (1.75, 1.0, "① 编码器自注意力\nQ = K = V = 源句的 x\npadding 掩码", BLOCK_COLORS["encoder"]),
            (3.0, _H, "前馈网络 FFN", _PLAIN),
            (4.9, _H, "编码器输出 enc_out", _PLAIN)]
    right = [(0.4, _H, "目标句 Embedding + PE", _PLAIN),
             (1.75, 1.0, "② 解码器掩码自注意力\nQ = K = V = 解码器输入\npadding + 因果掩码", BLOCK_COLORS["decoder"]),
             (3.35, 1.25, "③ 解码器交叉注意力\nQ 来自解码器\nK = V = 编码器输出\n源句的 padding 掩码", BLOCK_COLORS["cross"]),
             (4.65, _H, "前馈网络 FFN", _PLAIN),
             (5.6, _H, "Linear + softmax", _PLAIN)]
    for x, boxes in ((xe, left), (xd, right)):
        for y, h, text, color in boxes:
            _box(ax, x, y, text, color, h=h, lw=1.0 if color == _PLAIN else 2.0)
        for (y0, h0, *_), (y1, h1, *_) in zip(boxes, boxes[1:]):
            _arrow(ax, (x, y0 + h0 / 2 + 0.03), (x, y1 - h1 / 2 - 0.03))
    _arrow(ax, (xe + 0.9, 4.9 - _H / 2 - 0.02), (xd - _W / 2 - 0.02, 3.35), color="#5b4a99",
           connectionstyle="arc3,rad=0.25")
    ax.text(1.75, 4.15, "K、V", ha="center", va="center", fontsize=10.5, color="#5b4a99")
    for x, bottom, top, label in ((xe, 1.1, 3.42, "编码器 × N"), (xd, 1.1, 5.05, "解码器 × N")):
        ax.add_patch(Rectangle((x - _W / 2 - 0.06, bottom), _W + 0.12, top - bottom, fill=False, linestyle="--",
                               edgecolor="#888888"))
    ax.text(xe, 3.6, "编码器 × N", ha="center", va="center", fontsize=11)
    ax.text(xd + _W / 2, 1.0 - 0.02, "解码器 × N", ha="right", va="top", fontsize=11)
    ax.text(2.65, -0.15, "每个子层后都有残差连接和 LayerNorm（图中省略）", ha="center", va="center", fontsize=10,
            color="#444444")
    ax.set_xlim(-0.05, 5.35)
    ax.set_ylim(-0.4, 5.95)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax
