"""The whole encoder-decoder Transformer of the numeral task, with its three attention blocks highlighted.

Labels are Chinese, drawn with the shipped font subset (:func:`mha.viz.cjk.cjk_font`).
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
    "cross": "③ 交叉注意力\nQ 来自解码器\nK = V 来自编码器",
    "ffn": "前馈网络 FFN\nd_model → d_ff → d_model",
    "src_embed": "字的词嵌入 × √d_model\n+ 位置编码",
    "tgt_embed": "数字的词嵌入 × √d_model\n+ 位置编码",
    "enc_norm": "LayerNorm →\n编码器输出 memory",
    "readout": "LayerNorm → Linear\n→ softmax",
    "enc_title": "编码器",
    "dec_title": "解码器",
    "residual": "每个子层：\nx + 子层(LayerNorm(x))",
    "src": "输入：两千零二十六",
    "tgt_in": "解码器输入：<bos> 2 0 2 6",
    "tgt_out": "输出：2 0 2 6 <eos>",
    "kv": "K、V",
}
CHINESE_TEXT = tuple(_TEXT.values())


# Drawn in inches (data units = inches at the default size): the PNG is 5 in wide (500 px), so its smallest
# text, 10 pt, stays >= 9 CSS px in the 358 px column of a 390 px phone (mha.viz.style.smallest_text_px).
_W = 2.1  # box width
_XE, _XD = 1.13, 3.63  # centres of the encoder and decoder columns
_FRAME = 0.08  # the dashed "× N" frame around the repeated sublayers
_SIZE = 10


def _box(ax, x, y, h, text, color, edge="#555555", lw=1.0):
    ax.add_patch(FancyBboxPatch((x - _W / 2, y - h / 2), _W, h, boxstyle="round,pad=0.04",
                                facecolor=color, edgecolor=edge, linewidth=lw))
    ax.text(x, y, text, ha="center", va="center", fontproperties=cjk_font(_SIZE), linespacing=1.4)


def _arrow(ax, start, end, color="#555555", style="-|>", **kw):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=12, color=color, linewidth=1.2, **kw))


def _frame(ax, x, y0, y1):
    ax.add_patch(Rectangle((x - _W / 2 - _FRAME, y0), _W + 2 * _FRAME, y1 - y0, fill=False, linestyle="--",
                           edgecolor="#888888"))


def plot_transformer(n_encoder_layers: int = 2, n_decoder_layers: int = 2, d_model: int = 64, n_heads: int = 4,
                     d_ff: int = 128, ax=None):
    """Draw the encoder (left) and decoder (right); the three attention blocks get their own colours.

    Sized for a phone: 4.8 in wide, no text below 10 pt (>= 9 CSS px in a 390 px phone's column).

    Returns:
        The matplotlib ``Axes``.
    """
    for name, value in (("n_encoder_layers", n_encoder_layers), ("n_decoder_layers", n_decoder_layers)):
        require_int(value, name, minimum=1)
    if ax is None:
        _, ax = plt.subplots(figsize=(4.8, 5.77))
        ax.set_position([0, 0, 1, 1])  # one data unit = one inch
    one, two, three = 0.36, 0.55, 0.75  # box heights for 1, 2, 3 lines
    small = cjk_font(_SIZE)
    # encoder column, bottom to top; its notes fill the space above it
    ax.text(_XE, 0.0, _TEXT["src"], ha="center", va="center", fontproperties=small)
    _box(ax, _XE, 0.62, two, _TEXT["src_embed"], _PLAIN)
    _box(ax, _XE, 1.62, three, _TEXT["encoder"], BLOCK_COLORS["encoder"], lw=2.0)
    _box(ax, _XE, 2.45, two, _TEXT["ffn"], _PLAIN)
    _box(ax, _XE, 3.35, two, _TEXT["enc_norm"], _PLAIN)
    _frame(ax, _XE, 1.1, 2.85)
    ax.text(_XE - _W / 2 - _FRAME, 2.96, f"× {n_encoder_layers}", ha="left", va="center", fontproperties=cjk_font(11))
    for y0, y1 in ((0.12, 0.33), (0.9, 1.23), (2.0, 2.16), (2.73, 3.06)):
        _arrow(ax, (_XE, y0), (_XE, y1))
    ax.text(_XE, 3.9, _TEXT["enc_title"], ha="center", va="center", fontproperties=cjk_font(12, "bold"))
    ax.text(_XE, 4.85, _TEXT["residual"] + f"\nd_model = {d_model}, h = {n_heads}\nd_ff = {d_ff}",
            ha="center", va="center", color="#444444", fontproperties=small, linespacing=1.4)
    # decoder column
    ax.text(_XD, 0.0, _TEXT["tgt_in"], ha="center", va="center", fontproperties=small)
    _box(ax, _XD, 0.62, two, _TEXT["tgt_embed"], _PLAIN)
    _box(ax, _XD, 1.62, three, _TEXT["decoder"], BLOCK_COLORS["decoder"], lw=2.0)
    _box(ax, _XD, 2.64, three, _TEXT["cross"], BLOCK_COLORS["cross"], lw=2.0)
    _box(ax, _XD, 3.56, two, _TEXT["ffn"], _PLAIN)
    _box(ax, _XD, 4.5, two, _TEXT["readout"], _PLAIN)
    _frame(ax, _XD, 1.1, 3.95)
    ax.text(_XD + _W / 2 + _FRAME, 4.07, f"× {n_decoder_layers}", ha="right", va="center", fontproperties=cjk_font(11))
    for y0, y1 in ((0.12, 0.33), (0.9, 1.23), (2.0, 2.25), (3.02, 3.27), (3.84, 4.21), (4.78, 4.98)):
        _arrow(ax, (_XD, y0), (_XD, y1))
    ax.text(_XD, 5.12, _TEXT["tgt_out"], ha="center", va="center", fontproperties=small)
    ax.text(_XD, 5.48, _TEXT["dec_title"], ha="center", va="center", fontproperties=cjk_font(12, "bold"))
    # memory -> K, V of the cross-attention
    _arrow(ax, (_XE + _W / 2 + 0.05, 3.35), (_XD - _W / 2 - 0.05, 2.64), color=BLOCK_COLORS["cross"],
           connectionstyle="arc3,rad=-0.2")
    ax.text(2.2, 3.8, _TEXT["kv"], ha="center", va="center", color="#5b4a99", fontproperties=small)
    ax.set_xlim(-0.02, 4.78)  # the frames' outer edges
    ax.set_ylim(-0.15, 5.62)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax
