"""Checkers for chapter 03, step 2: the three Linear projections.

* 3.1 ``check_projection_shape``: predict the shape of Q' = Q W^Q.
* 3.2 ``check_count_parameters``: parameters of the whole layer, with and without bias.
* 3.3 ``check_project_matmul``: write the projection as ``x @ W.T + b``.
"""
from __future__ import annotations

import numbers

import torch
from torch import nn

from ._core import Mistake, NotDone, call, checker, expect_close, expect_shape, expect_tensor, is_stub

__all__ = ["check_projection_shape", "check_count_parameters", "check_project_matmul"]


def _as_shape(answer, what: str) -> tuple:
    """Turn a tuple / list / torch.Size of ints into a tuple; anything else is a Mistake."""
    if is_stub(answer):
        raise NotDone()
    if not isinstance(answer, (tuple, list, torch.Size)):
        raise Mistake(f"{what} 应该是一个 tuple（例如 (2, 4, 512)），却是 {type(answer).__name__}")
    for n in answer:
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise Mistake(f"{what} 里的每一项都应该是整数，却出现了 {n!r}（{type(n).__name__}）；除法请用 //")
    return tuple(int(n) for n in answer)


# ---------------------------------------------------------------- 3.1
@checker("ch03", "3.1", "预测 Linear 之后的形状")
def check_projection_shape(fn):
    """``fn(B, L, d_model, n_heads)`` must return the shape of ``W_q(Q)`` for Q of shape (B, L, d_model)."""
    for B, L, d_model, n_heads in [(2, 4, 512, 8), (3, 5, 4, 2), (1, 7, 12, 3), (4, 1, 64, 16)]:
        d_k = d_model // n_heads
        got = _as_shape(call(fn, B, L, d_model, n_heads, what="你的函数"), "返回值")
        want = (B, L, d_model)
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
def _reference_count(d_model: int, bias: bool) -> int:
    return 4 * (d_model * d_model + (d_model if bias else 0))


@checker("ch03", "3.2", "数一数整层的参数")
def check_count_parameters(fn):
    """``fn(d_model, n_heads, bias)`` must return the number of parameters of the whole layer."""
    for d_model, n_heads in [(512, 8), (6, 2), (64, 4), (12, 3), (8, 1)]:
        d_k = d_model // n_heads
        for bias in (True, False):
            got = call(fn, d_model, n_heads, bias, what="你的函数")
            if is_stub(got):
                raise NotDone()
            if isinstance(got, torch.Tensor) and got.numel() == 1:
                got = got.item()
            if isinstance(got, bool) or not isinstance(got, numbers.Real):
                raise Mistake(f"返回值应该是一个整数，却是 {type(got).__name__}")
            want = _reference_count(d_model, bias)
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
class _SpyLinear(nn.Linear):
    """An nn.Linear that remembers whether its forward was called."""

    called = False

    def forward(self, x):
        self.called = True
        return super().forward(x)


def _spy(d_in: int, d_out: int, bias: bool) -> _SpyLinear:
    lin = _SpyLinear(d_in, d_out, bias=bias)
    with torch.no_grad():
        lin.weight.normal_()
        if bias:
            lin.bias.normal_()
    return lin


@checker("ch03", "3.3", "用矩阵乘法实现投影")
def check_project_matmul(fn):
    """``fn(x, linear)`` must return ``x @ linear.weight.T + linear.bias`` without calling ``linear(x)``."""
    cases = [((2, 4, 6), 6, True), ((3, 5, 8), 8, True), ((1, 3, 4), 6, True), ((2, 2, 5), 5, False)]
    for x_shape, d_out, bias in cases:
        d_in = x_shape[-1]
        lin = _spy(d_in, d_out, bias)
        x = torch.randn(*x_shape)
        x_copy = x.clone()
        where = f"x 的形状 {x_shape}、nn.Linear({d_in}, {d_out}, bias={bias})"
        try:
            with torch.no_grad():
                out = call(fn, x, lin, what="你的函数")
        except Mistake as m:
            if not bias and "NoneType" in str(m):
                raise Mistake(f"{where} 时出错：nn.Linear(..., bias=False) 的 linear.bias 是 None，"
                              "不能直接相加；没有偏置时只算 x @ W.T") from None
            raise
        if lin.called:
            raise Mistake("你直接调用了 linear(x)。结果当然对，但这道题要你亲手写出它做的事：x @ W.T + b")
        if not torch.equal(x, x_copy):
            raise Mistake(f"{where} 时你的函数修改了输入 x；投影应该返回新张量，不改动 x")
        out = expect_tensor(out, "返回值")
        W, b = lin.weight.detach(), (lin.bias.detach() if bias else None)
        want = x @ W.T + (b if bias else 0)
        expect_shape(out, want.shape, f"{where} 时的返回值",
                     hint="nn.Linear 的 weight 形状是 (out_features, in_features)，要乘它的转置 W.T")
        if d_in == d_out and torch.allclose(out, x @ W + (b if bias else 0), atol=1e-5):
            raise Mistake(f"{where} 时你算的是 x @ W，忘了转置。nn.Linear 存的 weight 是 (out, in)，"
                          "计算的是 x @ W.T + b；论文里的 W^Q 就是 weight.T")
        if bias and torch.allclose(out, x @ W.T, atol=1e-5):
            raise Mistake(f"{where} 时你忘了加偏置 b（linear.bias）")
        expect_close(out, want, f"{where} 时的返回值", hint="应为 x @ linear.weight.T + linear.bias")
