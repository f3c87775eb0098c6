"""Checkers for chapter 03, step 2: the three Linear projections.

* 3.1 ``check_gradient_reach``: which rows and columns of W_q.weight and which tokens of x one number of Q' uses
  (its self-check, :data:`WARMUP`, asks which entries of W_q.bias, rows of W_k.weight and tokens of the other
  sentence a whole row of Q' uses).
* 3.2 ``check_count_parameters_general``: parameters of a layer whose heads are d_k (queries, keys) and d_v
  (values) wide, d_k, d_v free.
* 3.3 ``check_packed_k``: K' straight from the packed (3·d_model, d_model) weight that nn.MultiheadAttention
  stores (its K block, transposed), with matrix products only.
"""
from __future__ import annotations

import torch
from torch import nn

from mha.layer import MultiHeadAttention
from mha.steps import project

from .answers import as_int, expect_close, expect_shape, expect_tensor, name_the_match, same
from .ch01 import positions
from .gradients import expect_gradients
from .guard import LINEAR
from .records import Ask, Which, predict_which
from .running import call
from .verdicts import checker, Mistake

__all__ = ["check_gradient_reach", "check_count_parameters_general", "check_packed_k"]


# ---------------------------------------------------------------- 3.1 (what one number of Q' is made of)
AT = (1, 2, 4)  # Q'[b, t, j]: of a d_model = 6 layer, x (2, 3, 6)
WARMUP_AT = (0, 3)  # the self-check's loss Q'[b, t, :].sum(): a whole row, of a d_model = 8 layer, x (2, 4, 8)


def gradient_reach(d_model: int = 6, at=AT, L: int = 3) -> dict:
    """Which rows and columns of ``W_q.weight`` and which tokens of ``x[at[0]]`` get a non-zero gradient from
    ``loss = W_q(x)[at]``, by running autograd on the course's layer."""
    layer, x = MultiHeadAttention(d_model, 2), torch.randn(2, L, d_model, requires_grad=True)
    with torch.enable_grad():
        g_w, g_x = (g != 0 for g in torch.autograd.grad(layer.W_q(x)[at], (layer.W_q.weight, x)))  # (out, in), (B, L, d)
    return {"weight_rows": positions(g_w.any(1)), "weight_cols": positions(g_w.any(0)), "x_tokens": positions(g_x[at[0]].any(-1))}


def _reach(d: int, L: int, at: tuple) -> Which:
    """Exercise 3.1 for a (d, 2) layer, x (2, L, d) and the number ``Q'[at]`` (the self-check asks :data:`WARMUP`)."""
    (b, t, j), d_k = at, d // 2  # a (d, 2) layer
    return Which(
        "3.1", "ch03", "Q′ 的一个数由哪些参数、哪些 token 算出", lambda: gradient_reach(d, at, L), size=d,
        setting=(f"`layer = mha.MultiHeadAttention({d}, 2)`，x 的形状是 (2, {L}, {d})（requires_grad=True），"
                 f"`q = layer.W_q(x)`，再 `q[{b}, {t}, {j}].backward()`。位置、行、列都是下标，从 0 数。"),
        range_why=f"：weight 是 ({d}, {d})，x 的每一句有 {L} 个 token",
        asks={"weight_rows": Ask(
            "`W_q.weight.grad` 的哪些行不是 0？", f"weight 是 (out, in)，输出特征 {j} 只用第 {j} 行。",
            "weight 的形状是 (out, in)：Q′ 的第 j 个数用到哪一行？", (
                ([t], f"{t} 是 token 的位置：weight 不分 token，每个 token 都乘同一个 weight；weight 是 (out, in)，"
                      f"一行对应一个输出特征，Q′ 的第 {j} 个数用的是第 {j} 行"),
                (list(range(d)), f"把 weight 当成了论文的 W^Q：nn.Linear 的 weight 是 (out, in)，W^Q = weight.T；"
                                 f"输出特征 {j} 只用 weight 的第 {j} 行（W^Q 的第 {j} 列）"),
                (list(range(j // d_k * d_k, j // d_k * d_k + d_k)), f"这是下标 {j} 所在的整个头（d_k = {d_k} 行）："
                                                                    f"这里还没分头，只问 Q′ 的一个数，它只用 weight 的第 {j} 行"),
                ([j + 1], f"行的下标从 0 数（0 到 {d - 1}），你的答案像是从 1 数的：输出特征 {j} 用的是下标 {j} 的行"))),
              "weight_cols": Ask(
            "`W_q.weight.grad` 的哪些列不是 0？", f"Q′ 的一个数是这个 token 全部 {d} 个输入的加权和，第 {j} 行的每一列都用上了。",
            "Q′ 的一个数是这个 token 的哪些输入特征的加权和？", (
                ([j], f"以为 Q′ 的第 {j} 个数只来自 x 的第 {j} 维：它是这个 token 全部 d_model 个输入的加权和，"
                      f"weight 第 {j} 行的每一列都用上了"),
                ([t], f"{t} 是 token 的位置：weight 的列对应输入特征，不对应 token"),
                (list(range(1, d + 1)), f"列的下标从 0 数（0 到 {d - 1}），你的答案像是从 1 数的"))),
              "x_tokens": Ask(
            f"`x.grad[{b}]` 里哪些 token（行）不是 0？", f"投影逐 token 计算：只有 token {t} 影响 Q′ 的第 {t} 行。",
            "投影会在 token 之间交换信息吗？", (
                (list(range(L)), f"Linear 逐 token 计算，token 之间不交换信息：Q′ 的第 {t} 行只由 x 的第 {t} 个 token 算出"),
                ([], f"Q′[{b}, {t}, {j}] 正是 token {t} 算出来的，它的梯度会传回 token {t}"),
                ([b], f"{b} 是句子的下标（q[{b}, {t}, {j}] 的第一个下标）：token 是第二个下标，x.grad[{b}] 已经只看这一句")), size=L)})


check_gradient_reach = predict_which(_reach(6, 3, AT))


def gradient_spread(d_model: int = 8, at=WARMUP_AT, L: int = 4) -> dict:
    """Which entries of ``W_q.bias``, which rows of ``W_k.weight`` and which tokens of the other sentence
    ``x[1 - at[0]]`` get a non-zero gradient from ``loss = W_q(x)[at].sum()`` (a whole row of Q'), by running
    autograd on the course's layer; a parameter the loss does not use (``.grad`` None) has no such rows."""
    b, t = at
    layer, x = MultiHeadAttention(d_model, 2), torch.randn(2, L, d_model, requires_grad=True)
    with torch.enable_grad():
        g_b, g_k, g_x = torch.autograd.grad(layer.W_q(x)[b, t, :].sum(), (layer.W_q.bias, layer.W_k.weight, x),
                                            allow_unused=True)  # (out,), (out, in) or None, (B, L, d)
    return {"bias": positions(g_b != 0), "k_rows": [] if g_k is None else positions((g_k != 0).any(1)),
            "other_tokens": positions((g_x[1 - b] != 0).any(-1))}


def _spread(d: int, L: int, at: tuple) -> Which:
    """The self-check above 3.1: the same experiment's neighbours (W_q's bias, W_k, the other sentence) after a
    whole row of Q' is the loss; none of its answers is one of 3.1's, and its words do not say 3.1's rule."""
    (b, t), d_k, o = at, d // 2, 1 - at[0]
    return Which(
        "3.1", "ch03", "Q′ 的一整行用到哪些参数、哪些输入", lambda: gradient_spread(d, at, L), size=d,
        setting=(f"`layer = mha.MultiHeadAttention({d}, 2)`，x 的形状是 (2, {L}, {d})（requires_grad=True），"
                 f"`q = layer.W_q(x)`，这次把 token {t} 的整行 {d} 个数加起来当损失：`q[{b}, {t}, :].sum().backward()`。"
                 "下标都从 0 数。"),
        range_why=f"：bias 有 {d} 个数，W_k.weight 有 {d} 行，x 的每一句有 {L} 个 token",
        asks={"bias": Ask(
            "`layer.W_q.bias.grad` 的哪些数不是 0？",
            f"损失是 q[{b}, {t}, 0] 到 q[{b}, {t}, {d - 1}] 的和，这 {d} 个数各自加了 bias 的一个分量，"
            f"所以 bias 的 {d} 个分量的梯度都是 1。",
            f"bias 的每个分量加到 Q′ 的哪些数上？损失里有 token {t} 的全部 {d} 个数", (
                ([t], f"{t} 是 token 的位置：bias 的下标是输出特征，{d} 个分量每个 token 都加一遍"),
                ([], f"bias 不乘 x，但它也加进了这一行：q[{b}, {t}, m] = x 的加权和 + bias[m]，每个 bias[m] 的梯度是 1"),
                (list(range(d_k)), f"这是第一个头的 d_k = {d_k} 个特征：这里还没分头，损失把 token {t} 的全部 {d} 个数都加起来了"))),
            "k_rows": Ask(
            "`layer.W_k.weight.grad` 的哪些行不是 0？（.grad 是 None 也算作没有）",
            "`q = layer.W_q(x)` 只经过 W_q：W_k 要到算 K′ 时才用上，这个损失里没有它，`W_k.weight.grad` 还是 None。",
            "算 q 的时候用到 W_k 了吗？", (
                (list(range(d)), "以为 Q′ 也用了 W_k：q = layer.W_q(x) 只经过 W_q，Key 的投影是另一个 Linear，"
                                 "要等 K′ 和 Q′ 在注意力分数里相遇，W_k 才会有梯度"),
                ([t], f"{t} 是 token 的位置，而且 W_k 根本没进这个损失：它的 .grad 还是 None"))),
            "other_tokens": Ask(
            f"`x.grad[{o}]`（另一句话）里哪些 token（行）不是 0？",
            f"损失只取了第 {b} 句话的 Q′：batch 里的两句话各算各的，第 {o} 句话的 x 没进这个损失，x.grad[{o}] 全是 0。",
            f"第 {o} 句话的 x 进了这个损失吗？", (
                ([t], f"以为两句话里同一个位置的 token 连在一起：Linear 对 batch 里的每句话分别计算，第 {o} 句的 token {t} "
                      "没进这个损失"),
                (list(range(L)), f"第 {o} 句话没有一个 token 进了这个损失：损失只取了 q[{b}, ...]")), size=L)})


WARMUP = _spread(8, 4, WARMUP_AT)  # the self-check's neighbouring question (3.1 itself is asked of _reach)


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
            args, b, count = f"(d_model, n_heads, d_k, d_v, bias) = {(d, h, d_k, d_v, bias)}", int(bias), _general_count
            name_the_match(got, [
                (4 * (d * d + b * d), f"这是 d_k = d_v = d_model / n_heads 时的答案；这里每个头的宽度是给定的 d_k = {d_k}、"
                                      f"d_v = {d_v}，四个 Linear 不再都是 d_model × d_model。应为 {want}"),
                (3 * (d * h * d_k + b * h * d_k) + h * d_k * d + b * d, "把 W_v 和 W_o 也按 d_k 算了；值的宽度是 d_v，"
                                                                        "W_v 输出 h·d_v 维，W_o 输入 h·d_v 维"),
                (want - h * d_v * d - b * d, "忘了 W_o（h·d_v → d_model）"),
                (want - h * d_v * d + h * d_k * d if d_k != d_v else None,
                 "W_o 的输入是 h 个头的 Value 拼在一起，h·d_v 维（Value 的宽度），不是 h·d_k"),
                (count(d, 1, d_k, d_v, bias), "只数了一个头的宽度；W_q 输出的是 h 个头拼在一起的 h·d_k 维"),
                (count(d, h, d_k, d_v, False) if bias else None, "bias=True 时忘了偏置，每个 Linear 的偏置个数等于它的输出维数"),
                (None if bias else count(d, h, d_k, d_v, True), f"把偏置也数进去了；bias=False 时四个 Linear 都没有偏置，只数权重。应为 {want}"),
                (count(d, h, d_k, d_v, False) + 2 * h * d_k + 2 * h * d_v if bias else None,
                 "W_o 的偏置有 d_model 个（它的输出维数），不是 h·d_v 个")], prefix=f"{args} 时你答 {got}：", same=lambda a, b: a == b)
            raise Mistake(f"{args} 时你答 {got}，应为 {want}：每个 nn.Linear(in, out) 有 in·out 个权重"
                          f"{'和 out 个偏置' if bias else ''}")


# ---------------------------------------------------------------- 3.3 (K' straight from the packed weight)
PACKED_CASES = [(2, 3, 8, True, torch.float64), (1, 4, 12, False, torch.float64), (3, 2, 6, True, torch.float32),
                (2, 5, 16, True, torch.float32)]  # (B, L, d_model, bias, dtype): the prompt promises both dtypes


def packed_k(x, in_proj_weight, in_proj_bias, *, block=1, interleaved=False, transpose=True, bias=True, bias_block=None):
    """K' from the packed weight (the keywords make the typical wrong cousins; defaults give the truth):
    rows d_model .. 2 d_model of ``in_proj_weight`` are K's weight (out, in), and W^K = weight.T."""
    d = in_proj_weight.shape[1]
    rows = slice(block, None, 3) if interleaved else slice(block * d, (block + 1) * d)
    weight = in_proj_weight[rows]  # (d, d): (out, in)
    out = x @ (weight.T if transpose else weight)  # (B, L, d)
    rows = rows if bias_block is None else slice(bias_block * d, (bias_block + 1) * d)
    return out if in_proj_bias is None or not bias else out + in_proj_bias[rows]


PACKED_MISTAKES = [
    (dict(block=0), "用了第 0 块（Q 的 weight）：in_proj_weight 按 Q、K、V 的顺序竖着叠放，K 的是第 d_model 到 2·d_model−1 行"),
    (dict(block=2), "用了第 2 块（V 的 weight）：K 的是中间那一块，第 d_model 到 2·d_model−1 行"),
    (dict(interleaved=True), "每隔 3 行取了一行：三块是竖着整块叠放的（先 d_model 行 Q，再 d_model 行 K，再 d_model 行 V），不是交错的"),
    (dict(transpose=False), "没有转置：取出的那一块和 nn.Linear 的 weight 一样是 (out, in)，W^K = weight.T，要算 x @ weight.T"),
    (dict(block=0, transpose=False), "用了第 0 块（Q 的 weight），而且没有转置：K 的是第 d_model 到 2·d_model−1 行，W^K = weight.T"),
    (dict(bias=False), "忘了加偏置：in_proj_bias 也是 Q、K、V 叠在一起的，要取 K 那一段（第 d_model 到 2·d_model−1 个数）"),
    (dict(bias_block=0), "偏置取成了 Q 的那一段（in_proj_bias[:d_model]）：weight 取对了，偏置也要取 K 那一段，第 d_model 到 2·d_model−1 个数"),
    (dict(bias_block=2), "偏置取成了 V 的那一段（in_proj_bias[2·d_model:]）：weight 取对了，偏置也要取 K 那一段，第 d_model 到 2·d_model−1 个数"),
]


@checker("ch03", "3.3", "从叠在一起的 in_proj_weight 直接算出 K′")
def check_packed_k(fn):
    """``fn(x (B, L, d), in_proj_weight (3d, d), in_proj_bias (3d,) or None) -> (B, L, d)``: the Key projection
    ``x @ W.T + b`` with the K block (rows d .. 2d) of the packed weight and bias."""
    for B, L, d, bias, dtype in PACKED_CASES:
        x = torch.randn(B, L, d, dtype=dtype, requires_grad=True)
        W = torch.randn(3 * d, d, dtype=dtype, requires_grad=True)
        b = torch.randn(3 * d, dtype=dtype, requires_grad=True) if bias else None
        where = f"x {(B, L, d)}、in_proj_weight {(3 * d, d)}、in_proj_bias {'(%d,)' % (3 * d) if bias else 'None'}"
        try:
            out = call(fn, x, W, b, what="你的函数", forbid=(LINEAR, project),
                       shortcut_hint="F.linear 和 mha.project 都是现成的“乘 weight 的转置再加偏置”；请用切片取出 K 的那一块，自己写矩阵乘法（@）和加法")
        except Mistake as m:
            if b is None and "运行时抛出了" in str(m):
                raise Mistake(f"{m}。这一组的 in_proj_bias 是 None（没有偏置）：这时只算 x @ W.T") from None
            raise
        got = expect_tensor(out, f"{where} 时的返回值")
        expect_shape(got, (B, L, d), f"{where} 时返回值", named=[
            ((B, L, 3 * d), f"{where} 时返回了 {(B, L, 3 * d)}：这是 Q′、K′、V′ 连在一起；只要 K′，d_model = {d} 维")])
        if got.dtype != x.dtype:  # before the values: a float16 result is no slicing mistake
            raise Mistake(f"{where} 时返回了 {str(got.dtype)[6:]}，输入 x 是 {str(x.dtype)[6:]}：新建的张量跟 x 用同一个 dtype，"
                          "也不要用 .float()、.half() 之类换成别的 dtype")
        ref = [None if t is None else t.detach().double() for t in (x, W, b)]  # the truth in float64
        want = packed_k(*ref)
        g = got.detach().double()
        if same(g, want):
            expect_gradients(got, {"x": x, "in_proj_weight": W}, f"{where} 时的返回值")
            continue
        name_the_match(g, ((packed_k(*ref, **kwargs), why)
                           for kwargs, why in PACKED_MISTAKES if not (kwargs.get("bias") is False and b is None)),
                       prefix=f"{where} 时", same=same)
        expect_close(got, want, f"{where} 时的返回值", hint="K 的 weight 是 in_proj_weight[d_model : 2·d_model]，偏置同理")
