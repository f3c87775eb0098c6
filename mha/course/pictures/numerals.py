"""Figures of the numeral Transformer (chapter 13): attention maps with Chinese labels, loss, ablations.

Tick labels are the tokens themselves (Chinese characters, digits, ``<bos>``),
drawn with the shipped font subset (:func:`mha.course.pictures.cjk.cjk_font`).
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from mha.validate import require_int

from .style import CMAP, to_numpy
from .cjk import cjk_font

__all__ = ["plot_block_heads", "plot_head_panels", "plot_loss", "plot_head_table", "row_label", "head_label",
           "step_label", "BLOCK_TITLES", "DROP_TITLES", "CHINESE_TEXT", "PHONE_WIDTH_IN", "TICK_PT", "smallest_text_css_px",
           "overlapping_labels", "figure_texts"]

BLOCK_TITLES = {"encoder": "编码器自注意力", "decoder": "解码器带掩码的自注意力", "cross": "交叉注意力"}
_SHORT = {"encoder": "编码器", "decoder": "解码器自注意力", "cross": "交叉注意力"}
_AXIS = {"layer": "第 {} 层", "head": "头 {}", "loss": "训练损失（每 {} 步的平均）", "step": "训练步数",
         "drop": "去掉这个头后准确率下降（百分点）", "at_step": "训练 {} 步",
         "drop_zero": "置零后准确率下降（百分点）", "drop_mean": "换成平均输出后准确率下降（百分点）"}
DROP_TITLES = {"zero": _AXIS["drop_zero"], "mean": _AXIS["drop_mean"]}  # titles of the ablation tables
# what the rows (Query) and columns (Key) of each kind of map are
BLOCK_AXES = {"encoder": ("行：Query（输入的字）", "列：Key（输入的字）"),
              "decoder": ("行：Query（解码器输入）", "列：Key（解码器输入）"),
              "cross": ("行：Query（这一步写出的数字）", "列：Key（输入的字）")}
CHINESE_TEXT = (tuple(BLOCK_TITLES.values()) + tuple(_SHORT.values()) + tuple(_AXIS.values())
                + tuple(t for pair in BLOCK_AXES.values() for t in pair))


def row_label(block: str, layer: int) -> str:
    """``"交叉注意力 第 2 层"``: a row label for one block and layer (``layer`` counts from 0)."""
    return f"{_SHORT[block]} " + _AXIS["layer"].format(layer + 1)


def head_label(head: int) -> str:
    """``"头 1"`` for head index 0."""
    return _AXIS["head"].format(head + 1)


def step_label(step: int) -> str:
    """``"训练 300 步"``."""
    return _AXIS["at_step"].format(step)


PHONE_WIDTH_IN = 4.0  # every heat-map figure is this wide: on a 358 CSS px phone column 1 pt of text is ~1.24 px
TICK_PT, TITLE_PT = 8.0, 9.0  # ~9.9 and ~11 CSS px on the phone column (the rule: smallest text >= 9 CSS px)


def _labels(ax, rows, cols, size=TICK_PT):
    font = cjk_font(size)
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols, fontproperties=font)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontproperties=font)
    for label in ax.get_xticklabels():  # "<bos>" stands upright so it cannot run into its neighbour
        if len(label.get_text()) > 1:
            label.set_rotation(90)
    ax.tick_params(length=2, pad=1)


MIN_CELL_IN = 0.16  # a heat-map cell this wide holds one 8 pt character with room to spare (no touching labels)


def _columns(S: int) -> int:
    """Panels side by side: 2 while a cell stays at least :data:`MIN_CELL_IN` wide, else 1."""
    return 2 if (PHONE_WIDTH_IN - 0.5 - 0.45 * 2) / (2 * S) >= MIN_CELL_IN else 1


def plot_head_panels(panels, row_labels, col_labels, titles, ncols: int | None = None, suptitle: str | None = None,
                     annotate: bool = False, axis_labels=None):
    """Draw several (L, S) attention maps, at most two side by side, with token labels.

    The figure is :data:`PHONE_WIDTH_IN` wide whatever the number of panels, so its smallest text
    (tick labels, :data:`TICK_PT`) stays above 9 CSS px when a phone shrinks it to a 358 px column.

    Args:
        panels: a list of (L, S) weight matrices (tensors or arrays), values in [0, 1].
        row_labels: L query labels; col_labels: S key labels (Chinese characters are fine).
        titles: one title per panel.
        ncols: panels per row (default: 2 when a cell stays :data:`MIN_CELL_IN` wide, else 1; at most 2).
        axis_labels: optional ``(rows, columns)`` words, drawn once under and left of the panels.

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
    ncols = min(_columns(S), len(mats)) if ncols is None else ncols
    if require_int(ncols, "ncols", minimum=1) > 2:
        raise ValueError(f"ncols must be 1 or 2 (phone-readable figures), got {ncols!r}")
    nrows = -(-len(mats) // ncols)
    cell = (PHONE_WIDTH_IN - 0.5 - 0.45 * ncols) / (ncols * S)  # inches per heat-map cell
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, gridspec_kw={"wspace": 0.6, "hspace": 0.45},
                             figsize=(PHONE_WIDTH_IN, nrows * (cell * L + 0.75) + (0.35 if suptitle else 0.1)))
    for k, ax in enumerate(axes.flat):
        if k >= len(mats):
            ax.axis("off")
            continue
        m = mats[k]
        im = ax.imshow(m, cmap=CMAP, vmin=0.0, vmax=1.0)
        _labels(ax, row_labels, col_labels)
        ax.set_title(titles[k], fontproperties=cjk_font(TITLE_PT), pad=3)
        if annotate:
            for i in range(m.shape[0]):
                for j in range(m.shape[1]):
                    ax.text(j, i, f"{m[i, j]:.1f}", ha="center", va="center", fontsize=TICK_PT,
                            color="black" if m[i, j] > 0.5 else "white")
    bar = fig.colorbar(im, ax=axes.ravel().tolist(), fraction=0.03, pad=0.02)
    bar.ax.tick_params(labelsize=TICK_PT)
    if suptitle:
        fig.suptitle(suptitle, fontproperties=cjk_font(TITLE_PT + 1))
    if axis_labels:
        fig.supylabel(axis_labels[0], x=-0.04, fontproperties=cjk_font(TITLE_PT))
        fig.supxlabel(axis_labels[1], fontproperties=cjk_font(TITLE_PT))
    return fig


def plot_block_heads(maps, block: str, row_labels, col_labels, layer: int | None = None, heads=None):
    """The heads of one attention kind for one example: one layer per figure (2 x 2 heads), or every layer.

    Args:
        maps: a list with one (h, L, S) weight tensor per layer (one sequence, e.g. ``w[0]``).
        block: ``"encoder"``, ``"decoder"`` or ``"cross"`` (names the figure).
        layer: draw only this layer (0-based); None draws every layer (h panels per layer).
        heads: draw only these heads (0-based indices; default: every head).

    Returns:
        The matplotlib ``Figure``.
    """
    if block not in BLOCK_TITLES:
        raise ValueError(f"block must be one of {tuple(BLOCK_TITLES)}, got {block!r}")
    mats = [to_numpy(m) for m in maps]
    if not mats or any(m.ndim != 3 for m in mats):
        raise ValueError("maps must be a list of (h, L, S) weights, one per layer (one sequence, no batch axis)")
    layers = range(len(mats)) if layer is None else [layer]
    if layer is not None and require_int(layer, "layer") >= len(mats):
        raise ValueError(f"layer must be an int in [0, {len(mats) - 1}], got {layer!r}")
    h = mats[0].shape[0]
    heads = range(h) if heads is None else list(heads)
    if not heads or any(require_int(i, "head") >= h for i in heads):
        raise ValueError(f"heads must be ints in [0, {h - 1}], got {heads!r}")
    panels = [mats[l][i] for l in layers for i in heads]
    titles = [_AXIS["layer"].format(l + 1) + " " + head_label(i) for l in layers for i in heads]
    return plot_head_panels(panels, row_labels, col_labels, titles, suptitle=BLOCK_TITLES[block],
                            axis_labels=BLOCK_AXES[block])


def plot_loss(values, window: int, ax=None):
    """The training loss, one point per ``window`` steps, on a log scale; returns the ``Axes``."""
    values = [float(v) for v in values]
    if ax is None:
        _, ax = plt.subplots(figsize=(PHONE_WIDTH_IN, 2.6))
    steps = [window * (i + 1) for i in range(len(values))]
    ax.plot(steps, values, color="#1f77b4")
    ax.set_yscale("log")
    ax.set_xlabel(_AXIS["step"], fontproperties=cjk_font(TITLE_PT))
    ax.set_ylabel(_AXIS["loss"].format(window), fontproperties=cjk_font(TITLE_PT))
    ax.tick_params(labelsize=TICK_PT)
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
        _, ax = plt.subplots(figsize=(PHONE_WIDTH_IN, 0.42 * m.shape[0] + 1.0))
    hi = float(m.max()) if vmax is None else vmax
    im = ax.imshow(m, cmap="Reds", vmin=0.0, vmax=max(hi, 1e-9))
    _labels(ax, row_labels, col_labels)
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            ax.text(j, i, fmt.format(m[i, j]), ha="center", va="center", fontsize=TICK_PT,
                    color="white" if m[i, j] > 0.6 * hi else "black")
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04).ax.tick_params(labelsize=TICK_PT)
    ax.set_title(_AXIS["drop"] if title is None else title, fontproperties=cjk_font(TITLE_PT))
    return ax


def smallest_text_css_px(fig, column_px: float = 358.0, dpi: float = 100.0) -> float:
    """The smallest text of ``fig`` in CSS px when the page shows it ``column_px`` wide (never enlarged).

    A figure saved at ``dpi`` is ``width_in * dpi`` px; a narrower column scales it down by
    ``column_px / (width_in * dpi)``. One point is ``dpi / 72`` px before that scaling.
    """
    width_in = fig.get_size_inches()[0]
    scale = min(1.0, column_px / (width_in * dpi))
    sizes = [t.get_fontsize() for t in fig.findobj(plt.Text) if t.get_text().strip() and t.get_visible()]
    return min(sizes) * dpi / 72 * scale


def figure_texts(fig) -> list[str]:
    """Every visible text of ``fig`` (titles, tick labels, axis labels, annotations): what a reader can see."""
    return [t.get_text() for t in fig.findobj(plt.Text) if t.get_text().strip() and t.get_visible()]


def overlapping_labels(fig) -> list[tuple[str, str]]:
    """Pairs of neighbouring tick labels of one axis of ``fig`` whose drawn boxes overlap (empty: all readable)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    out = []
    for ax in fig.axes:
        for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
            boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels if t.get_text() and t.get_visible()]
            for (a, box_a), (b, box_b) in zip(boxes, boxes[1:]):
                if box_a.overlaps(box_b):
                    out.append((a, b))
    return out

