"""Shape explorer: choose B, L, d_model and n_heads, see the real shape after each of the six steps."""
from __future__ import annotations

import unicodedata

from ..figure_data.shapes import MAX_HEADS, SHAPE_DEFAULTS, head_width_problem, shape_steps
from ..pictures.flow import plot_flow
from ._base import Explorer, View, show_static, slider

__all__ = ["head_width_problem", "shape_steps", "shape_view", "build_shape_explorer",
           "shape_explorer", "shape_explorer_static", "SHAPE_DEFAULTS"]


def _pad(label: str, width: int) -> str:
    """Left-justify counting a Chinese character as two columns, so the shapes line up."""
    used = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in label)
    return label + " " * max(1, width - used)


def shape_view(batch: int = 2, seq_len: int = 4, d_model: int = 512, n_heads: int = 8) -> View:
    """Text listing the six shapes + the flow figure; an impossible setting gets only the explanation."""
    try:
        report = shape_steps(batch, seq_len, d_model, n_heads)
    except ValueError as err:
        return View(text=f"⚠️ {err}", figure=None, data={"error": str(err)})
    d_k = report["d_k"]
    lines = [f"B = {batch}, L = {seq_len}, d_model = {d_model}, n_heads = {n_heads}"
             f"  →  d_k = {d_model} / {n_heads} = {d_k}"]
    lines += [f"{_pad(label, 30)}{shape}" for label, shape in report["steps"]]
    lines.append(f"（第 4 步的注意力权重 weights：{report['weights']}，每个头一张 L × L 的表）")
    figure = plot_flow(batch, seq_len, d_model, n_heads).figure
    return View(text="\n".join(lines), figure=figure, data=report)


def build_shape_explorer(**settings) -> Explorer:
    """The widget: four sliders (B, L, d_model, n_heads) above the shapes and the flow figure."""
    s = {**SHAPE_DEFAULTS, **settings}
    controls = {
        "batch": slider("batch B", s["batch"], 1, 8),
        "seq_len": slider("序列长度 L", s["seq_len"], 1, 32),
        "d_model": slider("d_model", s["d_model"], 8, 1024, step=8),
        "n_heads": slider("n_heads h", s["n_heads"], 1, MAX_HEADS),
    }
    return Explorer(shape_view, controls, rows=[["batch", "seq_len"], ["d_model", "n_heads"]],
                    title="<b>形状探索器</b>：拖动滑块，看每一步之后张量的形状")


def shape_explorer(**settings) -> None:
    """Display the shape explorer (needs a running kernel: Colab, Jupyter)."""
    from IPython.display import display

    display(build_shape_explorer(**settings).widget)


def shape_explorer_static(**settings):
    """The default setting as a static picture: prints the shapes, returns the flow figure."""
    return show_static(shape_view(**{**SHAPE_DEFAULTS, **settings}))
