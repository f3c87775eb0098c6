"""Alt texts of chapter 13's figures, written from the numbers each figure draws.

They live outside :mod:`mha.course.pictures` because their words are read by screen readers, never drawn: the font
subset (:func:`mha.course.pictures.cjk.required_characters`) need not carry them.
"""
from __future__ import annotations

from mha.course.pictures.numerals import _AXIS, BLOCK_AXES, BLOCK_TITLES, head_label
from mha.course.pictures.style import to_numpy

__all__ = ["heads_alt", "table_alt"]


def heads_alt(maps, block: str, layer: int, row_labels, col_labels, note: str = "") -> str:
    """Alt text of :func:`plot_block_heads` for one layer, written from the weights it draws.

    Names the block, the layer and, for every head, the brightest key of each row (``row→key``):
    the pattern the figure shows, not a column average. ``note`` (optional) is appended as a summary
    the caller has checked, e.g. which heads form a diagonal.

    Args:
        maps: (h, L, S) weights of one layer of one sequence.
    """
    m = to_numpy(maps)
    parts = []
    for i in range(m.shape[0]):
        peaks = m[i].argmax(-1)  # (L,): the brightest key of each row
        parts.append(f"{head_label(i)}每行最亮的格子：" + " ".join(f"{r}→{col_labels[int(j)]}" for r, j in zip(row_labels, peaks)))
    rows, cols = BLOCK_AXES[block]
    return (f"{BLOCK_TITLES[block]}" + _AXIS["layer"].format(layer + 1) + f" {m.shape[0]} 个头的热力图，"
            f"{rows}：{' '.join(row_labels)}，{cols}：{' '.join(col_labels)}；" + "；".join(parts) + (f"。{note}" if note else ""))


def table_alt(table, row_labels, col_labels, title: str, what: str, top: int = 3, small: float = 0.5) -> str:
    """Alt text of :func:`plot_head_table`, written from the numbers it draws.

    Names the ``top`` largest cells (row and column label with the value) and how many cells are
    below ``small``. ``what`` says what the numbers are measured on (e.g. ``"1000 个留出的数"``).
    """
    m = to_numpy(table)
    order = sorted(((float(m[i, j]), i, j) for i in range(m.shape[0]) for j in range(m.shape[1])), reverse=True)
    named = "、".join(f"{row_labels[i]}{col_labels[j]}（{v:.1f}）" for v, i, j in order[:top])
    few = sum(v < small for v, _, _ in order)
    return (f"{m.shape[0]} 行 {m.shape[1]} 列的表格：{title}，{what}；最大的是 {named}；"
            f"{few} 个格子不到 {small}")
