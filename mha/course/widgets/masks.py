"""Mask explorer: padding, causal or both, for a sentence padded to a chosen length."""
from __future__ import annotations

import matplotlib.pyplot as plt

from ..figure_data.masks import MASK_DEFAULTS, MASK_KINDS, MASK_WORDS, MAX_PADDED, mask_weights
from ..pictures.heatmap import plot_heatmap
from ..pictures.masks import plot_mask
from ._base import Explorer, View, show_static, slider

__all__ = ["MASK_KINDS", "MASK_WORDS", "MASK_DEFAULTS", "mask_weights", "mask_view", "build_mask_explorer",
           "mask_explorer", "mask_explorer_static"]

_KIND_ZH = {"padding": "padding ", "causal": "因果", "both": "padding + 因果"}

_EXPLAIN = {
    "padding": "padding 掩码：PAD 那几列（key）被遮住，谁也不去看 PAD；\n"
               "PAD 自己作为 query 的那几行照常有权重，它们的输出后面会被丢掉。",
    "causal": "因果掩码：第 i 行只能看第 1..i 列，看不到后面（未来）的词，所以是一个下三角。",
    "both": "两个掩码取“与”（&）：既不看 PAD，也不看未来。",
}


def mask_view(kind: str = "both", length: int = 3, padded_len: int = 4) -> View:
    """The mask (white = may attend) next to head 1's weights under that mask."""
    try:
        result = mask_weights(kind, length, padded_len)
    except ValueError as err:
        return View(text=f"⚠️ {err}", figure=None, data={"error": str(err)})
    tokens, grid, weights = result["tokens"], result["grid"], result["weights"]
    h, S = weights.shape[0], len(tokens)
    fig, (left, right) = plt.subplots(2, 1, figsize=(4.6, 7.6))
    plot_mask(grid, tokens, tokens, title=f"{_KIND_ZH.get(kind, kind)}掩码（1 = 可以看）", ax=left)
    plot_heatmap(weights[0], tokens, tokens, title="第 1 个头的注意力权重", ax=right, vmin=0.0, vmax=1.0,
                 annotate=S <= 6)  # numbers in every cell only while they fit (and stay fast to draw)
    fig.tight_layout()
    hidden = int((~grid).sum())
    max_hidden = weights.masked_select(~grid.expand(h, S, S)).abs().max().item() if hidden else 0.0
    text = (f"{' '.join(tokens)}：{length} 个真实词，填充到 S = {S}\n"
            f"掩码的形状 {tuple(result['mask'].shape)}，广播到 (B, h, L, S) = (1, {h}, {S}, {S})\n"
            f"{_EXPLAIN[kind]}\n"
            f"被遮住的 {hidden} 个位置：{h} 个头的权重"
            + ("全部 = 0" if max_hidden == 0 else f"最大 {max_hidden:.2e}（应当是 0！）")
            + "；每行权重之和 = 1。")
    return View(text=text, figure=fig, data=result)


def build_mask_explorer(**settings) -> Explorer:
    """The widget: mask kind, real length and padded length above the mask and the weights."""
    import ipywidgets as widgets

    s = {**MASK_DEFAULTS, **settings}
    controls = {
        "kind": widgets.ToggleButtons(options=MASK_KINDS, value=s["kind"], description="mask"),
        "length": slider("真实长度", s["length"], 1, len(MASK_WORDS)),
        "padded_len": slider("填充后长度 S", s["padded_len"], 1, MAX_PADDED),
    }
    return Explorer(mask_view, controls, rows=[["kind"], ["length", "padded_len"]],
                    title="<b>掩码探索器</b>：选掩码的种类和长度，看掩码和被它改变的注意力权重")


def mask_explorer(**settings) -> None:
    """Display the mask explorer (needs a running kernel: Colab, Jupyter)."""
    from IPython.display import display

    display(build_mask_explorer(**settings).widget)


def mask_explorer_static(**settings):
    """The default setting ("You are welcome PAD", both masks): prints the text, returns the figure."""
    return show_static(mask_view(**{**MASK_DEFAULTS, **settings}))
