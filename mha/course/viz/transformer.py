"""The whole encoder-decoder Transformer of the numeral task, with its three attention blocks highlighted.

Labels are Chinese, drawn with the shipped font subset (:func:`mha.viz.cjk.cjk_font`).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from .cjk import cjk_font

__all__ = ["plot_transformer", "BLOCK_COLORS", "CHINESE_TEXT"]

BLOCK_COLORS = {"encoder": "#f4a261", "decoder": "#2a9d8f", "cross": "#8e7cc3"}  # one colour per attention kind
_PLAIN = "#eef2f7"

_TEXT = {
    "encoder": "① 编码器自注意力\nQ = K = V = 编码器的 x，padding 掩码",
    "decoder": "② 解码器带掩码的自注意力\nQ = K = V = 解码器的 y，因果掩码",
    "cross": "③ 交叉注意力\nQ 来自解码器，K = V 来自编码器",
    "ffn": "前馈网络 FFN  d_model → d_ff → d_model",
    "src_embed": "字的词嵌入 × √d_model + 位置编码",
    "tgt_embed": "数字的词嵌入 × √d_model + 位置编码",
    "enc_norm": "LayerNorm → 编码器输出 memory",
    "readout": "LayerNorm → Linear → softmax",
    "enc_title": "编码器",
    "dec_title": "解码器",
    "residual": "每个子层：x + 子层(LayerNorm(x))",
    "src": "输入：两千零二十六",
    "tgt_in": "解码器输入：<bos> 2 0 2 6",
    "tgt_out": "输出：2 0 2 6 <eos>",
    "kv": "K、V",
}
CHINESE_TEXT = tuple(_TEXT.values())


def _box(ax, x, y, w, h, text, color, size=9.5, edge="#555555", lw=1.0):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.05",
                                facecolor=color, edgecolor=edge, linewidth=lw))
    ax.text(x, y, text, ha="center", va="center", fontproperties=cjk_font(size), linespacing=1.4)


def _arrow(ax, start, end, color="#555555", style="-|>", **kw):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=12, color=color, linewidth=1.2, **kw))


def plot_transformer(n_encoder_layers: int = 2, n_decoder_layers: int = 2, d_model: int = 64, n_heads: int = 4,
                     d_ff: int = 128, ax=None):
    """Draw the encoder (left) and decoder (right); the three attention blocks get their own colours.

    Returns:
        The matplotlib ``Axes``.
    """
    for name, value in (("n_encoder_layers", n_encoder_layers), ("n_decoder_layers", n_decoder_layers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if ax is None:
        _, ax = plt.subplots(figsize=(11, 9.2))
    w, h = 4.2, 0.8
    xe, xd = 2.6, 8.4
    # encoder column, bottom to top
    ax.text(xe, 0.0, _TEXT["src"], ha="center", va="center", fontproperties=cjk_font(11))
    _box(ax, xe, 1.2, w, h, _TEXT["src_embed"], _PLAIN)
    _box(ax, xe, 3.4, w, 1.0, _TEXT["encoder"], BLOCK_COLORS["encoder"], lw=2.0)
    _box(ax, xe, 4.9, w, h, _TEXT["ffn"], _PLAIN)
    _box(ax, xe, 7.6, w, h, _TEXT["enc_norm"], _PLAIN)
    ax.add_patch(Rectangle((xe - w / 2 - 0.35, 2.55), w + 0.7, 3.05, fill=False, linestyle="--", edgecolor="#888888"))
    ax.text(xe - w / 2 - 0.5, 4.1, f"× {n_encoder_layers}", ha="right", va="center", fontproperties=cjk_font(12))
    for y0, y1 in ((0.3, 0.75), (1.65, 2.85), (3.95, 4.45), (5.35, 7.15)):
        _arrow(ax, (xe, y0), (xe, y1))
    ax.text(xe, 8.5, _TEXT["enc_title"], ha="center", va="center", fontproperties=cjk_font(13, "bold"))
    # decoder column
    ax.text(xd, 0.0, _TEXT["tgt_in"], ha="center", va="center", fontproperties=cjk_font(11))
    _box(ax, xd, 1.2, w, h, _TEXT["tgt_embed"], _PLAIN)
    _box(ax, xd, 3.0, w, 1.0, _TEXT["decoder"], BLOCK_COLORS["decoder"], lw=2.0)
    _box(ax, xd, 4.6, w, 1.0, _TEXT["cross"], BLOCK_COLORS["cross"], lw=2.0)
    _box(ax, xd, 6.0, w, h, _TEXT["ffn"], _PLAIN)
    _box(ax, xd, 7.6, w, h, _TEXT["readout"], _PLAIN)
    ax.add_patch(Rectangle((xd - w / 2 - 0.35, 2.2), w + 0.7, 4.4, fill=False, linestyle="--", edgecolor="#888888"))
    ax.text(xd + w / 2 + 0.5, 4.4, f"× {n_decoder_layers}", ha="left", va="center", fontproperties=cjk_font(12))
    for y0, y1 in ((0.3, 0.75), (1.65, 2.45), (3.55, 4.05), (5.15, 5.55), (6.45, 7.15)):
        _arrow(ax, (xd, y0), (xd, y1))
    _arrow(ax, (xd, 8.05), (xd, 8.45))
    ax.text(xd, 8.75, _TEXT["tgt_out"], ha="center", va="center", fontproperties=cjk_font(11))
    ax.text(xd, 9.35, _TEXT["dec_title"], ha="center", va="center", fontproperties=cjk_font(13, "bold"))
    # memory -> K, V of the cross-attention
    _arrow(ax, (xe + w / 2 + 0.05, 7.6), (xd - w / 2 - 0.05, 4.6), color=BLOCK_COLORS["cross"],
           connectionstyle="arc3,rad=-0.25")
    ax.text(5.5, 6.55, _TEXT["kv"], ha="center", va="center", color="#5b4a99", fontproperties=cjk_font(11))
    ax.text(5.5, -0.75, _TEXT["residual"] + f"   (d_model = {d_model}, h = {n_heads}, d_ff = {d_ff})",
            ha="center", va="center", color="#444444", fontproperties=cjk_font(10))
    ax.set_xlim(-0.2, 11.2)
    ax.set_ylim(-1.1, 9.7)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax
