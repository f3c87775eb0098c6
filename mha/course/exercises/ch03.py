"""Checkers for chapter 03, step 2: the three Linear projections.

* 3.1 ``check_projection_shape``: predict the shape of Q' = Q W^Q.
* 3.2 ``check_count_parameters``: parameters of the whole layer, with and without bias.
* 3.3 ``check_project_matmul``: write the projection as ``x @ W.T + b``.
"""
from __future__ import annotations

import torch
from torch import nn

from mha.steps import project

from ._core import (LINEAR, Mistake, as_int, as_shape, call, checker, expect_close, expect_gradients,
                    expect_shape, expect_tensor)

__all__ = ["check_projection_shape", "check_count_parameters", "check_project_matmul"]


# ---------------------------------------------------------------- 3.1
def _projection_shape(B: int, L: int, d_model: int, n_heads: int) -> tuple:
    """The truth, by running the layer's W_q on a Q of shape (B, L, d_model)."""
    from mha.layer import MultiHeadAttention

    layer = MultiHeadAttention(d_model, n_heads)
    with torch.no_grad():
        return tuple(layer.W_q(torch.zeros(B, L, d_model)).shape)


def _shape_answer(value, what: str) -> tuple:
    try:
        return as_shape(value, what)
    except Mistake as m:
        if "应该是整数，却是" in str(m):  # a non-integral float: say where it usually comes from
            raise Mistake(f"{m}；形状里的每一项都是整数，除法请用 //") from None
        raise


@checker("ch03", "3.1", "预测 Linear 之后的形状")
def check_projection_shape(fn):
    """``fn(B, L, d_model, n_heads)`` must return the shape of ``W_q(Q)`` for Q of shape (B, L, d_model)."""
    for B, L, d_model, n_heads in [(2, 4, 512, 8), (3, 5, 4, 2), (1, 7, 12, 3), (4, 1, 64, 16)]:
        d_k = d_model // n_heads
        got = _shape_answer(call(fn, B, L, d_model, n_heads, what="你的函数"), "返回值")
        want = _projection_shape(B, L, d_model, n_heads)
        if got == want:
            continue
        args = f"(B, L, d_model, n_heads) = {(B, L, d_model, n_heads)}"
        if got == (B, n_heads, L, d_k) or got == (B, L, n_heads, d_k):
            raise Mistake(f"{args} 时你答 {got}：这是分头之后的形状。Linear 本身不分头，"
                          f"投影后形状不变，仍是 (B, L, d_model) = {want}；分头是下一步（第 4 章）")
        if got == (B, L, d_k):
            raise Mistake(f"{args} 时你答 {got}：W_q 是 nn.Linear(d_model, d_model)，输出宽度是 d_model，"
                          f"不是一个头的宽度 d_k = {d_k}；应为 {want}")
        if got == (d_model, d_model):
            raise Mistake(f"{args} 时你答 {got}：这是权重矩阵 W_q.weight 的形状，不是投影结果的形状；应为 {want}")
        if got == (L, d_model):
            raise Mistake(f"{args} 时你答 {got}：漏掉了 batch 维 B；Linear 作用在最后一维，前面的维度原样保留，应为 {want}")
        raise Mistake(f"{args} 时你答 {got}，应为 {want}：Linear 只改最后一维，而 W_q 把 d_model 映射回 d_model")


# ---------------------------------------------------------------- 3.2
def _parameter_count(d_model: int, n_heads: int, bias: bool) -> int:
    """The truth, counted on the course's layer."""
    from mha.layer import MultiHeadAttention

    return sum(p.numel() for p in MultiHeadAttention(d_model, n_heads, bias=bias).parameters())


def _count_without_building_a_layer(fn, d_model, n_heads, bias):
    """Run the student's count; building any nn.Module to count its parameters is the shortcut the prompt forbids."""
    return call(fn, d_model, n_heads, bias, what="你的函数", forbid=(("nn.Module（建一个层）", nn.Module.__init__),),
                shortcut_hint="这道题要你用公式算，不要创建任何 nn.Module（包括 nn.Linear）去数；"
                              "想一想每个 nn.Linear(d_model, d_model) 有多少个权重和偏置")


@checker("ch03", "3.2", "数一数整层的参数")
def check_count_parameters(fn):
    """``fn(d_model, n_heads, bias)`` must return the number of parameters of the whole layer, by a formula."""
    for d_model, n_heads in [(512, 8), (6, 2), (64, 4), (12, 3), (8, 1)]:
        d_k = d_model // n_heads
        for bias in (True, False):
            got = as_int(_count_without_building_a_layer(fn, d_model, n_heads, bias), "返回值")
            want = _parameter_count(d_model, n_heads, bias)
            if got == want:
                continue
            d = d_model
            args = f"d_model={d}, n_heads={n_heads}, bias={bias}"
            if bias and got == 4 * d * d:
                raise Mistake(f"{args} 时你答 {got}：忘了偏置 b；每个 Linear 还有 d_model 个偏置，应为 4·(d²+d) = {want}")
            if not bias and got == 4 * (d * d + d):
                raise Mistake(f"{args} 时你答 {got}：bias=False 时四个 Linear 都没有偏置，应为 4·d² = {want}")
            if got == 3 * (d * d + (d if bias else 0)):
                raise Mistake(f"{args} 时你答 {got}：只数了 W_q、W_k、W_v 三个 Linear，忘了最终的 W_o；应为 {want}")
            if got == n_heads * want:
                raise Mistake(f"{args} 时你答 {got}：多乘了 n_heads。不是每个头各有一套 d_model×d_model 的 Linear——"
                              f"h 个头合起来才是一个 d_model×d_model；参数量与 n_heads 无关，应为 {want}")
            if got == 4 * (d * d_k + (d_k if bias else 0)):
                raise Mistake(f"{args} 时你答 {got}：只数了一个头的那一份 (d_model×d_k)；四个 Linear 都是 d_model×d_model，应为 {want}")
            if bias and got == 4 * (d * d + 1):
                raise Mistake(f"{args} 时你答 {got}：偏置不是一个数，而是每个输出维一个，共 d_model 个；应为 {want}")
            raise Mistake(f"{args} 时你答 {got}，应为 {want}：四个 nn.Linear(d_model, d_model)，每个有 d² 个权重"
                          f"{'和 d 个偏置' if bias else '（没有偏置）'}")


# ---------------------------------------------------------------- 3.3
def _linear(d_in: int, d_out: int, bias: bool) -> nn.Linear:
    lin = nn.Linear(d_in, d_out, bias=bias)
    with torch.no_grad():
        lin.weight.normal_()
        if bias:
            lin.bias.normal_()
    return lin


PROJECT_HINT = ("linear(x)、F.linear 和 torch.ops.aten.linear 都是现成的投影；"
                "这道题要你只用 linear.weight、linear.bias 和矩阵乘法（@ 或 torch.matmul）写出 x @ W.T + b")


def _project(fn, x, lin, where):
    """Run the student's projection; calling the layer, F.linear, aten.linear or mha.project is named."""
    try:
        return call(fn, x, lin, what="你的函数", forbid=(LINEAR, project), shortcut_hint=PROJECT_HINT)
    except Mistake as m:
        if lin.bias is None and "NoneType" in str(m):
            raise Mistake(f"{where} 时出错：nn.Linear(..., bias=False) 的 linear.bias 是 None，"
                          "不能直接相加；没有偏置时只算 x @ W.T") from None
        raise


@checker("ch03", "3.3", "用矩阵乘法实现投影")
def check_project_matmul(fn):
    """``fn(x, linear)`` must return ``x @ linear.weight.T + linear.bias`` without calling ``linear(x)``,
    ``F.linear`` or ``mha.project``; float32 or float64 results, and gradients must reach x, W and b."""
    cases = [((2, 4, 6), 6, True), ((3, 5, 8), 8, True), ((1, 3, 4), 6, True), ((2, 2, 5), 5, False), ((2, 3, 4), 6, False)]
    for x_shape, d_out, bias in cases:
        d_in = x_shape[-1]
        lin = _linear(d_in, d_out, bias)
        x = torch.randn(*x_shape)
        where = f"x 的形状 {x_shape}、nn.Linear({d_in}, {d_out}, bias={bias})"
        out = expect_tensor(_project(fn, x, lin, where), "返回值")  # an input changed in place is named by call
        if not out.is_floating_point():
            raise Mistake(f"{where} 时返回值的 dtype 是 {out.dtype}；投影的结果应该是浮点张量")
        W, b = lin.weight.detach(), (lin.bias.detach() if bias else None)
        want = x @ W.T + (b if bias else 0)
        expect_shape(out, want.shape, f"{where} 时的返回值",
                     hint="nn.Linear 的 weight 形状是 (out_features, in_features)，要乘它的转置 W.T")
        got = out.detach().double()  # float32 or float64 answers alike
        x64, W64 = x.double(), W.double()
        b64 = b.double() if bias else 0
        if d_in == d_out and torch.allclose(got, x64 @ W64 + b64, atol=1e-5):
            raise Mistake(f"{where} 时你算的是 x @ W，忘了转置。nn.Linear 存的 weight 是 (out, in)，"
                          "计算的是 x @ W.T + b；论文里的 W^Q 就是 weight.T")
        if bias and torch.allclose(got, x64 @ W64.T, atol=1e-5):
            raise Mistake(f"{where} 时你忘了加偏置 b（linear.bias）")
        expect_close(out, want, f"{where} 时的返回值", hint="应为 x @ linear.weight.T + linear.bias")
        params = {"linear.weight": lin.weight, **({"linear.bias": lin.bias} if bias else {})}
        expect_gradients(out, params, f"{where} 时的返回值")  # a projection that cannot train is wrong
    # gradients must also reach the input: the layers before the projection learn through it
    lin = _linear(4, 6, True)
    x = torch.randn(2, 3, 4, requires_grad=True)
    out = expect_tensor(_project(fn, x, lin, "x 需要梯度时"), "返回值")
    expect_gradients(out, {"x": x}, "x 需要梯度时的返回值")
