"""Shape explorer: choose B, L, d_model and n_heads, see the real shape after each of the six steps."""
from __future__ import annotations

import math
import unicodedata

import torch

from mha.steps import merge_heads, project, attention, split_heads
from ..viz.flow import plot_flow
from ._base import Explorer, View, require_positive, show_static, slider
from ._toy import toy_layer

__all__ = ["head_width_problem", "shape_steps", "shape_view", "build_shape_explorer",
           "shape_explorer", "shape_explorer_static", "SHAPE_DEFAULTS"]

SHAPE_DEFAULTS = {"batch": 2, "seq_len": 4, "d_model": 512, "n_heads": 8}  # the lecture's (2, 4, 512), h = 8
MAX_HEADS = 16
D_MODEL_STEP = 8  # the d_model slider moves in steps of 8


def head_width_problem(d_model: int, n_heads: int, max_heads: int = MAX_HEADS) -> str | None:
    """A friendly Chinese explanation when ``d_model`` cannot be split into ``n_heads`` heads, else None."""
    if n_heads >= 1 and d_model % n_heads == 0:
        return None
    if n_heads < 1:
        return f"n_heads = {n_heads}：至少要有 1 个头。"
    choices = [h for h in range(1, max_heads + 1) if d_model % h == 0]
    more = ", ..." if any(d_model % h == 0 for h in range(max_heads + 1, d_model + 1)) else ""
    step = math.lcm(n_heads, D_MODEL_STEP) if d_model % D_MODEL_STEP == 0 else n_heads  # stay on the slider
    lower = d_model - d_model % step
    nearby = [m for m in (lower, lower + step) if m >= 1]
    return (
        f"{d_model} 不能被 {n_heads} 整除（{d_model} / {n_heads} ≈ {d_model / n_heads:.2f}），"
        f"每个头的宽度 d_k = d_model / n_heads 必须是整数；"
        f"n_heads 可以选 {', '.join(map(str, choices))}{more}；"
        f"或者把 d_model 改成 {n_heads} 的倍数，比如 {' 或 '.join(map(str, nearby))}。"
    )


@torch.no_grad()
def shape_steps(batch: int, seq_len: int, d_model: int, n_heads: int, seed: int = 0) -> dict:
    """Run the six steps on a real tensor and record the shape after each.

    Returns:
        ``{"steps": [(label, shape), ...] (six of them), "weights": shape of the
        attention weights (B, h, L, L), "d_k": d_model // n_heads}``.

    Raises:
        ValueError: with the Chinese explanation of :func:`head_width_problem`,
        or when a size is not a positive integer.
    """
    require_positive(batch=batch, seq_len=seq_len, d_model=d_model, n_heads=n_heads)
    problem = head_width_problem(d_model, n_heads)
    if problem:
        raise ValueError(problem)
    layer = toy_layer(d_model, n_heads, seed=seed, gain=1.0)
    x = torch.randn(batch, seq_len, d_model, generator=torch.Generator().manual_seed(seed))  # (B, L, d_model)
    q = project(x, layer.W_q)  # (B, L, d_model)
    k = project(x, layer.W_k)  # (B, L, d_model)
    v = project(x, layer.W_v)  # (B, L, d_model)
    q_h, k_h, v_h = (split_heads(t, n_heads) for t in (q, k, v))  # (B, h, L, d_k)
    heads, weights = attention(q_h, k_h, v_h)  # (B, h, L, d_k), (B, h, L, L)
    concat = merge_heads(heads)  # (B, L, d_model)
    out = project(concat, layer.W_o)  # (B, L, d_model)
    assert torch.allclose(out, layer(x, x, x), atol=1e-4)  # the same numbers as the whole layer
    steps = [
        ("1. 输入 Q = K = V = x", x.shape),
        ("2. Linear W_q, W_k, W_v", q.shape),
        ("3. split heads", q_h.shape),
        ("4. 每个头并行做 attention", heads.shape),
        ("5. Concat", concat.shape),
        ("6. Linear W_o", out.shape),
    ]
    return {"steps": [(label, tuple(shape)) for label, shape in steps],
            "weights": tuple(weights.shape), "d_k": d_model // n_heads}


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
