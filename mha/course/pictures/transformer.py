"""The whole encoder-decoder Transformer of the numeral task, with its three attention blocks highlighted.

Labels are Chinese, drawn with the shipped font subset (:func:`mha.course.pictures.cjk.cjk_font`).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from mha.validate import require_int

from .cjk import cjk_font

__all__ = ["plot_transformer", "BLOCK_COLORS", "CHINESE_TEXT"]

BLOCK_COLORS = {"encoder": "#f4a261", "decoder": "#2a9d8f", "cross": "#8e7cc3"}  # one colour per attention kind
_PLAIN = "#eef2f7"

_TEXT = {
    "encoder": "① 编码器自注意力\nQ = K = V = 编码器的 x\npadding 掩码",
    "decoder": "② 解码器带掩码的自注意力\nQ = K = V = 解码器的 y\n因果掩码",
    "cross": "③ 交叉注意力\nQ 来自解码器\nK = V 来自编码器\n编码器的 padding 掩码",
    "ffn": "前馈网络 FFN\nd_model → d_ff → d_model",
    "src_embed": "字的词嵌入 × √d_model\n+ 位置编码",
    "tgt_embed": "数字的词嵌入 × √d_model\n+ 位置编码",
    "enc_norm": "LayerNorm\n→ 编码器输出 memory",
    "readout": "LayerNorm → Linear\n→ softmax",
    "enc_title": "编码器",
    "dec_title": "解码器",
    "residual": "每个子层：x + 子层(LayerNorm(x))",
    "src": "输入：两千零二十六",
    "tgt_in": "解码器输入：<bos> 2 0 2 6",
    "tgt_out": "输出：2 0 2 6 <eos>",
    "kv": "K、V",
}
CHINESE_TEXT = tuple(_TEXT.values())


FONT_PT = 10  # 10 pt in a figure about 4.7 in wide (stored PNG) stays above 9 CSS px on a 390 px phone


def _box(ax, x, y, w, h, text, color, size=FONT_PT, edge="#555555", lw=1.0):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.04",
                                facecolor=color, edgecolor=edge, linewidth=lw))
    ax.text(x, y, text, ha="center", va="center", fontproperties=cjk_font(size), linespacing=1.3)


def _arrow(ax, start, end, color="#555555", style="-|>", **kw):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=11, color=color, linewidth=1.2, **kw))


def plot_transformer(n_encoder_layers: int = 2, n_decoder_layers: int = 2, d_model: int = 64, n_heads: int = 4,
                     d_ff: int = 128, ax=None):
    """Draw the encoder (left) and decoder (right); the three attention blocks get their own colours.

    Drawn for a phone: 1 data unit = 1 inch, every text at least 10 pt.

    Returns:
        The matplotlib ``Axes``.
    """
    for name, value in (("n_encoder_layers", n_encoder_layers), ("n_decoder_layers", n_decoder_layers)):
        require_int(value, name, minimum=1)
    if ax is None:
        _, ax = plt.subplots(figsize=(5.8, 8.6))
    w = 2.5
    xe, xd = 1.3, 4.35
    font = cjk_font(FONT_PT)
    # encoder column, bottom to top
    ax.text(xe, 0.0, _TEXT["src"], ha="center", va="center", fontproperties=font)
    _box(ax, xe, 0.8, w, 0.6, _TEXT["src_embed"], _PLAIN)
    _box(ax, xe, 2.1, w, 0.85, _TEXT["encoder"], BLOCK_COLORS["encoder"], lw=2.0)
    _box(ax, xe, 3.4, w, 0.6, _TEXT["ffn"], _PLAIN)
    ax.add_patch(Rectangle((xe - w / 2 - 0.1, 1.5), w + 0.2, 2.5, fill=False, linestyle="--", edgecolor="#888888"))
    ax.text(xe - w / 2 - 0.02, 3.85, f"× {n_encoder_layers}", ha="left", va="center", fontproperties=font)
    _box(ax, xe, 4.9, w, 0.6, _TEXT["enc_norm"], _PLAIN)
    for y0, y1 in ((0.17, 0.46), (1.14, 1.64), (2.56, 3.06), (3.74, 4.56)):
        _arrow(ax, (xe, y0), (xe, y1))
    ax.text(xe, 5.6, _TEXT["enc_title"], ha="center", va="center", fontproperties=cjk_font(FONT_PT + 2, "bold"))
    # decoder column
    ax.text(xd, 0.0, _TEXT["tgt_in"], ha="center", va="center", fontproperties=font)
    _box(ax, xd, 0.8, w, 0.6, _TEXT["tgt_embed"], _PLAIN)
    _box(ax, xd, 2.05, w, 0.85, _TEXT["decoder"], BLOCK_COLORS["decoder"], lw=2.0)
    _box(ax, xd, 3.45, w, 1.05, _TEXT["cross"], BLOCK_COLORS["cross"], lw=2.0)
    _box(ax, xd, 4.75, w, 0.6, _TEXT["ffn"], _PLAIN)
    ax.add_patch(Rectangle((xd - w / 2 - 0.1, 1.5), w + 0.2, 3.75, fill=False, linestyle="--", edgecolor="#888888"))
    ax.text(xd + w / 2 + 0.02, 5.12, f"× {n_decoder_layers}", ha="right", va="center", fontproperties=font)
    _box(ax, xd, 6.0, w, 0.6, _TEXT["readout"], _PLAIN)
    for y0, y1 in ((0.17, 0.46), (1.14, 1.59), (2.51, 2.89), (4.01, 4.41), (5.09, 5.66), (6.34, 6.58)):
        _arrow(ax, (xd, y0), (xd, y1))
    ax.text(xd, 6.75, _TEXT["tgt_out"], ha="center", va="center", fontproperties=font)
    ax.text(xd, 7.25, _TEXT["dec_title"], ha="center", va="center", fontproperties=cjk_font(FONT_PT + 2, "bold"))
    # memory -> K, V of the cross-attention
    _arrow(ax, (xe + w / 2 + 0.04, 4.9), (xd - w / 2 - 0.06, 3.45), color=BLOCK_COLORS["cross"],
           connectionstyle="arc3,rad=-0.25")
    ax.text(2.72, 3.75, _TEXT["kv"], ha="center", va="center", color="#5b4a99", fontproperties=font)
    ax.text(2.85, -0.55, _TEXT["residual"], ha="center", va="center", color="#444444", fontproperties=font)
    ax.text(2.85, -0.88, f"d_model = {d_model}，h = {n_heads}，d_ff = {d_ff}", ha="center", va="center", color="#444444",
            fontproperties=font)
    ax.set_xlim(-0.05, 5.75)
    ax.set_ylim(-1.1, 7.5)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax
