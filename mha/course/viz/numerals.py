"""Figures of the numeral Transformer (chapter 13): attention maps with Chinese labels, loss, ablations.

Tick labels are the tokens themselves (Chinese characters, digits, ``<bos>``),
drawn with the shipped font subset (:func:`mha.viz.cjk.cjk_font`).
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from ._style import CMAP, to_numpy
from .cjk import cjk_font

__all__ = ["plot_block_heads", "plot_head_panels", "plot_loss", "plot_head_table", "row_label", "head_label",
           "step_label", "BLOCK_TITLES", "CHINESE_TEXT"]

BLOCK_TITLES = {"encoder": "编码器自注意力", "decoder": "解码器带掩码的自注意力", "cross": "交叉注意力"}
_SHORT = {"encoder": "编码器", "decoder": "解码器自注意力", "cross": "交叉注意力"}
_AXIS = {"layer": "第 {} 层", "head": "头 {}", "loss": "训练损失（每 {} 步的平均）", "step": "训练步数",
         "drop": "去掉这个头后准确率下降（百分点）", "at_step": "训练 {} 步"}
CHINESE_TEXT = tuple(BLOCK_TITLES.values()) + tuple(_SHORT.values()) + tuple(_AXIS.values())


def row_label(block: str, layer: int) -> str:
    """``"交叉注意力 第 2 层"``: a row label for one block and layer (``layer`` counts from 0)."""
    return f"{_SHORT[block]} " + _AXIS["layer"].format(layer + 1)


def head_label(head: int) -> str:
    """``"头 1"`` for head index 0."""
    return _AXIS["head"].format(head + 1)


def step_label(step: int) -> str:
    """``"训练 300 步"``."""
    return _AXIS["at_step"].format(step)


def _labels(ax, rows, cols, size=9):
    font = cjk_font(size)
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols, fontproperties=font)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontproperties=font)


def plot_head_panels(panels, row_labels, col_labels, titles, ncols: int | None = None, suptitle: str | None = None,
                     annotate: bool = False):
    """Draw several (L, S) attention maps side by side with token labels.

    Args:
        panels: a list of (L, S) weight matrices (tensors or arrays), values in [0, 1].
        row_labels: L query labels; col_labels: S key labels (Chinese characters are fine).
        titles: one title per panel.
        ncols: panels per row (default: all in one row).

    Returns:
        The matplotlib ``Figure``.
    """
    mats = [to_numpy(p) for p in panels]
    if not mats or any(m.ndim != 2 for m in mats):
        raise ValueError("panels must be a non-empty list of 2-D (L, S) matrices")
    if len(titles) != len(mats):
        raise ValueError(f"need one title per panel: {len(mats)} panels, {len(titles)} titles")
    L, S = mats[0].shape
    if len(row_labels) != L or len(col_labels) != S:
        raise ValueError(f"labels must match the (L, S) = {(L, S)} maps, got {len(row_labels)} and {len(col_labels)}")
    ncols = len(mats) if ncols is None else ncols
    nrows = -(-len(mats) // ncols)
    cell = 0.32
    fig, axes = plt.subplots(nrows, ncols, squeeze=False,
                             figsize=(ncols * (cell * S + 1.1) + 0.6, nrows * (cell * L + 1.0) + 0.5))
    for k, ax in enumerate(axes.flat):
        if k >= len(mats):
            ax.axis("off")
            continue
        m = mats[k]
        im = ax.imshow(m, cmap=CMAP, vmin=0.0, vmax=1.0)
        _labels(ax, row_labels, col_labels)
        ax.set_title(titles[k], fontproperties=cjk_font(10))
        if annotate:
            for i in range(m.shape[0]):
                for j in range(m.shape[1]):
                    ax.text(j, i, f"{m[i, j]:.1f}", ha="center", va="center", fontsize=6,
                            color="black" if m[i, j] > 0.5 else "white")
    fig.colorbar(im, ax=axes.ravel().tolist(), fraction=0.02, pad=0.02)
    if suptitle:
        fig.suptitle(suptitle, fontproperties=cjk_font(13))
    return fig


def plot_block_heads(maps, block: str, row_labels, col_labels):
    """Every layer (rows) and head (columns) of one attention kind for one example.

    Args:
        maps: a list with one (h, L, S) weight tensor per layer (one sequence, e.g. ``w[0]``).
        block: ``"encoder"``, ``"decoder"`` or ``"cross"`` (names the figure).

    Returns:
        The matplotlib ``Figure``.
    """
    if block not in BLOCK_TITLES:
        raise ValueError(f"block must be one of {tuple(BLOCK_TITLES)}, got {block!r}")
    mats = [to_numpy(m) for m in maps]
    if not mats or any(m.ndim != 3 for m in mats):
        raise ValueError("maps must be a list of (h, L, S) weights, one per layer (one sequence, no batch axis)")
    h = mats[0].shape[0]
    panels = [m[i] for m in mats for i in range(h)]
    titles = [_AXIS["layer"].format(l + 1) + "  " + head_label(i) for l in range(len(mats)) for i in range(h)]
    return plot_head_panels(panels, row_labels, col_labels, titles, ncols=h, suptitle=BLOCK_TITLES[block])


def plot_loss(values, window: int, ax=None):
    """The training loss, one point per ``window`` steps, on a log scale; returns the ``Axes``."""
    values = [float(v) for v in values]
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 3.8))
    steps = [window * (i + 1) for i in range(len(values))]
    ax.plot(steps, values, color="#1f77b4")
    ax.set_yscale("log")
    ax.set_xlabel(_AXIS["step"], fontproperties=cjk_font(10))
    ax.set_ylabel(_AXIS["loss"].format(window), fontproperties=cjk_font(10))
    ax.grid(True, alpha=0.3)
    return ax


def plot_head_table(table, row_labels, col_labels, title: str | None = None, fmt: str = "{:.1f}", vmax=None, ax=None):
    """A small table of one number per head (rows: block and layer, columns: heads), e.g. ablation drops.

    Returns:
        The matplotlib ``Axes``.
    """
    m = to_numpy(table)
    if m.ndim != 2 or m.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"table must be 2-D with shape ({len(row_labels)}, {len(col_labels)}), got {m.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 * m.shape[1] + 3.2, 0.5 * m.shape[0] + 1.2))
    hi = float(m.max()) if vmax is None else vmax
    im = ax.imshow(m, cmap="Reds", vmin=0.0, vmax=max(hi, 1e-9))
    _labels(ax, row_labels, col_labels, size=10)
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            ax.text(j, i, fmt.format(m[i, j]), ha="center", va="center", fontsize=9,
                    color="white" if m[i, j] > 0.6 * hi else "black")
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    ax.set_title(_AXIS["drop"] if title is None else title, fontproperties=cjk_font(11))
    return ax
