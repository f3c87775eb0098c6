"""The shape explorer's numbers: the shape after each of the six steps, or why a setting cannot work."""
from __future__ import annotations

import math

import torch

from mha.steps import merge_heads, project, attention, split_heads
from .checks import require_positive
from .toy import toy_layer

__all__ = ["SHAPE_DEFAULTS", "MAX_HEADS", "D_MODEL_STEP", "STEP_LABELS", "head_width_problem", "shape_steps"]

# The six steps as the chapter titles name them (chapters 2-7), numbered as in the book; step 6 says 最后的
# instead of the title's first word, which the shipped figure font lacks (these words may be drawn)
STEP_LABELS = ("1. Q、K、V（都是 x）", "2. 三个 Linear 投影", "3. 分头", "4. 每个头并行做 Attention",
               "5. Concat", "6. 最后的 Linear W^O")

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
    shapes = (x.shape, q.shape, q_h.shape, heads.shape, concat.shape, out.shape)
    return {"steps": [(label, tuple(shape)) for label, shape in zip(STEP_LABELS, shapes)],
            "weights": tuple(weights.shape), "d_k": d_model // n_heads}
