"""Checkers for chapter 03, step 2: the three Linear projections.

* 3.1 ``check_cross_projection_shapes``: predict Q', K', V' in cross-attention (L != S).
* 3.2 ``check_count_parameters_general``: parameters of a layer whose heads are d_k (queries, keys) and d_v
  (values) wide, d_k, d_v free.
* 3.3 ``check_packed_head_k``: one head's K' straight from the packed (3·d_model, d_model) weight that
  nn.MultiheadAttention stores (the K block, then the head's d_k rows), with matrix products only.
"""
from __future__ import annotations

import torch
from torch import nn

from mha.steps import project

from .answers import as_int, expect_close, expect_tensor, name_the_match
from .gradients import expect_gradients
from .guard import LINEAR, PREDICT_SHAPES
from .records import Exercise, predict_shapes
from .running import call
from .verdicts import checker, Mistake

__all__ = ["check_cross_projection_shapes", "check_count_parameters_general", "check_packed_head_k"]


# ---------------------------------------------------------------- 3.1 (cross-attention: L != S)
PROJECTION_KEYS = ("q", "k", "v")


@torch.no_grad()
def _projected_shapes(B, L, S, d_model, h):
    """The shapes of W_q(Q), W_k(K), W_v(V) for Q (B, L, d_model) and K = V (B, S, d_model), by running them."""
    from mha.layer import MultiHeadAttention
    layer = MultiHeadAttention(d_model, h)
    return {"q": tuple(layer.W_q(torch.zeros(B, L, d_model)).shape), "k": tuple(layer.W_k(torch.zeros(B, S, d_model)).shape),
            "v": tuple(layer.W_v(torch.zeros(B, S, d_model)).shape)}


def _projection_hint(key, value, want, B, L, S, d_model, h):
    args = f"(B, L, S, d_model, n_heads) = {(B, L, S, d_model, h)}"
    if key == "q" and value == (B, S, d_model):
        return f"{args} 时 q 答成了 {value}：Q′ 来自 Query，长度是 L = {L}；S 是 Key/Value 那句话的长度"
    if key in ("k", "v") and value == (B, L, d_model):
        return (f"{args} 时 {key} 答成了 {value}：{key.upper()}′ 来自 {key.upper()} 那句话，长度是 S = {S}，"
                f"不是 Query 的 L = {L}；Linear 只改最后一维，长度保持不变")
    if len(value) == 4:
        return f"{args} 时 {key} 答成了 {value}：这是分头之后的形状；投影本身不分头，仍是三维"
    return f"{args} 时 {key} 应为 {want}，你答的是 {value}：Linear 只改最后一维（d_model → d_model）"


check_cross_projection_shapes = predict_shapes(Exercise(  # fn(B, L, S, d_model, n_heads) -> {"q", "k", "v": shape}
    "3.1", "ch03", "交叉注意力里三个投影之后的形状（L ≠ S）", "shape dict", right=_projected_shapes, wrongs=None,
    hint=_projection_hint, cases=((2, 4, 6, 512, 8), (3, 5, 2, 12, 3), (1, 1, 7, 8, 2)),
    forbids=PREDICT_SHAPES() + (LINEAR,), keys=PROJECTION_KEYS, label="返回值",
    shortcut_hint="请从参数推出形状，不要真的运行投影"))


# ---------------------------------------------------------------- 3.2 (d_k and d_v free)
def _general_count(d_model, h, d_k, d_v, bias):
    return (2 * (d_model * h * d_k + (h * d_k if bias else 0)) + d_model * h * d_v + (h * d_v if bias else 0)
            + h * d_v * d_model + (d_model if bias else 0))


@checker("ch03", "3.2", "数参数：每个头的宽度 d_k、d_v 可以任意")
def check_count_parameters_general(fn):
    """``fn(d_model, n_heads, d_k, d_v, bias)``: parameters of W_q, W_k: d_model -> h·d_k, W_v: d_model -> h·d_v,
    W_o: h·d_v -> d_model (each nn.Linear with or without bias), by a formula."""
    for d, h, d_k, d_v in [(512, 8, 64, 64), (12, 3, 5, 2), (8, 2, 3, 7), (6, 1, 4, 4)]:
        for bias in (True, False):
            got = as_int(call(fn, d, h, d_k, d_v, bias, what="你的函数",
                              forbid=(("nn.Module（建一个层）", nn.Module.__init__),
                                      ("nn.Parameter（复制一个层再改它的形状，也是建了一个层）", nn.Parameter.__new__)),
                              shortcut_hint="这道题要你用公式算，不要创建任何 nn.Module（包括 nn.Linear）去数"), "返回值")
            want = _general_count(d, h, d_k, d_v, bias)
            if got == want:
                continue
            args = f"(d_model, n_heads, d_k, d_v, bias) = {(d, h, d_k, d_v, bias)}"
            b = 1 if bias else 0
            if got == 4 * (d * d + b * d):
                raise Mistake(f"{args} 时你答 {got}：这是 d_k = d_v = d_model / n_heads 时的答案；这里每个头的宽度是给定的 "
                              f"d_k = {d_k}、d_v = {d_v}，四个 Linear 不再都是 d_model × d_model。应为 {want}")
            if got == 3 * (d * h * d_k + b * h * d_k) + h * d_k * d + b * d:
                raise Mistake(f"{args} 时你答 {got}：把 W_v 和 W_o 也按 d_k 算了；值的宽度是 d_v，W_v 输出 h·d_v 维，W_o 输入 h·d_v 维")
            if got == _general_count(d, h, d_k, d_v, bias) - h * d_v * d - b * d:
                raise Mistake(f"{args} 时你答 {got}：忘了 W_o（h·d_v → d_model）")
            if got == _general_count(d, 1, d_k, d_v, bias):
                raise Mistake(f"{args} 时你答 {got}：只数了一个头的宽度；W_q 输出的是 h 个头拼在一起的 h·d_k 维")
            if bias and got == _general_count(d, h, d_k, d_v, False):
                raise Mistake(f"{args} 时你答 {got}：bias=True 时忘了偏置，每个 Linear 的偏置个数等于它的输出维数")
            if not bias and got == _general_count(d, h, d_k, d_v, True):
                raise Mistake(f"{args} 时你答 {got}：把偏置也数进去了；bias=False 时四个 Linear 都没有偏置，只数权重。应为 {want}")
            if bias and got == _general_count(d, h, d_k, d_v, False) + h * d_k * 2 + h * d_v + h * d_v:
                raise Mistake(f"{args} 时你答 {got}：W_o 的偏置有 d_model 个（它的输出维数），不是 h·d_v 个")
            raise Mistake(f"{args} 时你答 {got}，应为 {want}：每个 nn.Linear(in, out) 有 in·out 个权重"
                          f"{'和 out 个偏置' if bias else ''}")


# ---------------------------------------------------------------- 3.3 (one head's K' straight from the packed weight)
HEAD_CASES = [  # (B, L, d_model, n_heads, head (code index), bias)
    (2, 3, 8, 2, 1, True), (1, 4, 12, 3, 0, False), (3, 2, 12, 4, 2, True), (2, 5, 16, 4, 3, True)]


def packed_head_k(x, in_proj_weight, in_proj_bias, n_heads, head, *, block=1, offset=0, interleaved=False,
                  bias=True, input_columns=False):
    """K' of one head from the packed weight (the keywords make the typical wrong cousins; defaults give the truth):
    rows d_model .. 2 d_model of ``in_proj_weight`` are W_k, and head ``head`` owns d_k consecutive rows of them."""
    d = in_proj_weight.shape[1]
    d_k = d // n_heads
    W = in_proj_weight[block * d:(block + 1) * d]  # (d, d): W_k for block 1
    b = None if in_proj_bias is None or not bias else in_proj_bias[block * d:(block + 1) * d]
    h = head + offset
    rows = slice(h, None, n_heads) if interleaved else slice(h * d_k, (h + 1) * d_k)
    if input_columns:  # the head's slice of the input features instead of its output rows
        out = x[..., rows] @ W[rows][:, rows].T  # (B, L, d_k)
        return out if b is None else out + b[rows]
    out = x @ W[rows].T  # (B, L, d_k)
    return out if b is None else out + b[rows]


HEAD_MISTAKES = [
    (dict(block=0), "用了第 0 块（W_q）：in_proj_weight 按 Q、K、V 的顺序竖着叠放，W_k 是第 d_model 到 2·d_model−1 行"),
    (dict(block=2), "用了第 2 块（W_v）：W_k 是中间那一块，第 d_model 到 2·d_model−1 行"),
    (dict(offset=1), "取成了下一个头：head 是代码下标，从 0 数（head=0 是头 1），它的行是 W_k 的第 head·d_k 到 (head+1)·d_k−1 行"),
    (dict(offset=-1), "取成了上一个头：head 是代码下标，从 0 数，它的行是 W_k 的第 head·d_k 到 (head+1)·d_k−1 行"),
    (dict(interleaved=True), "每隔 n_heads 行取了一行：一个头的 d_k 行在 W_k 里是连续的一段（分头就是把 d_model 个输出切成 h 段）"),
    (dict(bias=False), "忘了加偏置：in_proj_bias 也要先取 K 那一段，再取这个头的 d_k 个数"),
    (dict(input_columns=True), "切的是输入的列：分头切的是投影的输出，每个头的 Key 仍然用到输入的全部 d_model 个数；"
                               "要取 W_k 的 d_k 行，乘整个 x"),
]


@checker("ch03", "3.3", "从叠在一起的 in_proj_weight 直接算出一个头的 K′")
def check_packed_head_k(fn):
    """``fn(x (B, L, d), in_proj_weight (3d, d), in_proj_bias (3d,) or None, n_heads, head) -> (B, L, d_k)``: the Key
    projection of head ``head`` (code index, from 0), ``x @ W.T + b`` with the d_k rows of W_k that head owns."""
    for B, L, d, h, head, bias in HEAD_CASES:
        d_k = d // h
        x = torch.randn(B, L, d, dtype=torch.float64, requires_grad=True)
        W = torch.randn(3 * d, d, dtype=torch.float64, requires_grad=True)
        b = torch.randn(3 * d, dtype=torch.float64, requires_grad=True) if bias else None
        where = (f"x {(B, L, d)}、in_proj_weight {(3 * d, d)}、in_proj_bias {'(%d,)' % (3 * d) if bias else 'None'}、"
                 f"n_heads={h}、head={head}")
        try:
            out = call(fn, x, W, b, h, head, what="你的函数", forbid=(LINEAR, project),
                       shortcut_hint="nn.Linear 内部调用的也是它；请用切片取出 W_k 里这个头的 d_k 行，自己写矩阵乘法（@）和加法")
        except Mistake as m:
            if b is None and "运行时抛出了" in str(m):
                raise Mistake(f"{m}。这一组的 in_proj_bias 是 None（没有偏置）：这时只算 x @ W.T") from None
            raise
        got = expect_tensor(out, f"{where} 时的返回值")
        want = packed_head_k(x.detach(), W.detach(), None if b is None else b.detach(), h, head)
        if tuple(got.shape) == (B, L, d):
            raise Mistake(f"{where} 时返回了 {(B, L, d)}：这是整个 K′；只要头 {head + 1}（head={head}）的 d_k = {d_k} 维")
        if tuple(got.shape) == (B, L, 0):
            raise Mistake(f"{where} 时返回值的形状是 {(B, L, 0)}：切片越界了。head 是代码下标，从 0 数（head=0 是头 1），"
                          f"最后一个头是 head = n_heads − 1 = {h - 1}，它的行是 W_k 的第 head·d_k 到 (head+1)·d_k−1 行")
        if tuple(got.shape) != (B, L, d_k):
            raise Mistake(f"{where} 时返回值的形状应该是 {(B, L, d_k)}，实际是 {tuple(got.shape)}")
        g = got.detach().double()
        if torch.allclose(g, want, atol=1e-6):
            expect_gradients(got, {"x": x, "in_proj_weight": W}, f"{where} 时的返回值")
            continue
        name_the_match(g, ((packed_head_k(x.detach(), W.detach(), None if b is None else b.detach(), h, head, **kwargs), why)
                           for kwargs, why in HEAD_MISTAKES
                           if 0 <= head + kwargs.get("offset", 0) < h and not (kwargs.get("bias") is False and b is None)),
                       prefix=f"{where} 时", same=lambda a, b: torch.allclose(a, b, atol=1e-6))
        expect_close(got, want, f"{where} 时的返回值", hint="头 head 的行是 in_proj_weight[d_model + head·d_k : d_model + (head+1)·d_k]")
