"""Checkers for chapter 07, 步骤 6：最终 Linear W^O.

* 7.1 count the parameters of W^O;
* 7.2 compute the layer's output from the heads: ``Concat(head_1, ..., head_h) W^O + b``;
* 7.3 split the output into one contribution per head: ``head_i W^O_i``.
"""
from __future__ import annotations

import torch
from torch import nn

from ..steps import merge_heads
from ._core import Mistake, call, checker, expect_close, expect_shape, expect_tensor
from .ch05 import as_number

__all__ = ["check_w_o_params", "check_output_from_heads", "check_head_contributions"]

# ---------------------------------------------------------------- 7.1
W_O_D_MODEL, W_O_HEADS = 512, 8


@checker("ch07", "7.1", "数一数 W^O 的参数")
def check_w_o_params(answer):
    """``answer``: the number of parameters of ``nn.Linear(512, 512)`` (weight and bias)."""
    n = as_number(answer, "参数个数")
    d, h = W_O_D_MODEL, W_O_HEADS
    d_k = d // h
    right = d * d + d
    if n == right:
        return
    if n == d * d:
        raise Mistake(f"{int(n)} 只数了权重矩阵 {d}×{d}，忘了 bias 的 {d} 个参数")
    if n in (h * d_k * d_k, h * d_k * d_k + d, d_k * d_k):
        raise Mistake(f"{int(n)} 把 W^O 当成了每个头各自一块 {d_k}×{d_k} 的小矩阵；"
                      f"其实 W^O 作用在整条 {d} 维的拼接结果上，每个输出维度都读所有头")
    if n in (4 * right, 3 * right):
        raise Mistake(f"{int(n)} 把 W_q、W_k、W_v（和 W_o）都算进去了；这里只问最终的 W^O")
    raise Mistake(f"{n:g} 不对。提示：nn.Linear({d}, {d}) 有一个 {d}×{d} 的 weight 和一个长度 {d} 的 bias")


# ---------------------------------------------------------------- 7.2
OUTPUT_CASES = [(2, 4, 3, 5), (1, 2, 6, 3)]  # (B, h, L, d_k), h != d_k


def _layer(d_model: int) -> nn.Linear:
    W_o = nn.Linear(d_model, d_model)
    with torch.no_grad():
        W_o.bias.normal_()  # a bias large enough that forgetting it shows
    return W_o


@checker("ch07", "7.2", "从各个头的输出算出最终输出")
def check_output_from_heads(fn):
    """``fn(heads, W_o)``: heads (B, h, L, d_k), W_o ``nn.Linear(d_model, d_model)`` -> (B, L, d_model)."""
    for B, h, L, d_k in OUTPUT_CASES:
        d_model = h * d_k
        heads = torch.randn(B, h, L, d_k)
        heads_copy = heads.clone()
        W_o = _layer(d_model)
        W, b = W_o.weight.detach(), W_o.bias.detach()
        with torch.no_grad():
            out = call(fn, heads, W_o, what="你的函数")
        if not torch.equal(heads, heads_copy) or heads.shape != heads_copy.shape:
            raise Mistake("你的函数修改了输入 heads（例如用了 transpose_ 这类原地操作）；请返回新的张量")
        out = expect_tensor(out, "最终输出")
        concat = merge_heads(heads)  # (B, L, d_model)
        if tuple(out.shape) == (B, h, L, d_k):
            raise Mistake(f"返回的还是分头的形状 {tuple(out.shape)}：先 Concat 成 (B, L, d_model)，再过 W^O")
        expect_shape(out, (B, L, d_model), "最终输出", hint="Concat 得到 (B, L, d_model)，W^O 不改变形状")
        out = out.detach()
        if torch.allclose(out, concat, atol=1e-5):
            raise Mistake("少了最终 Linear W^O：只做了 Concat。没有 W^O，各个头的结果永远不会混合")
        if torch.allclose(out, concat @ W + b, atol=1e-4):
            raise Mistake("权重没有转置：nn.Linear 存的 weight 是 (out, in)，算的是 x @ weight.T + bias；"
                          "直接用 W_o(concat) 最稳")
        if torch.allclose(out, concat @ W.T, atol=1e-4):
            raise Mistake("少了 bias：nn.Linear 算的是 x @ weight.T + bias，直接用 W_o(concat) 就不会漏")
        wrong_concat = heads.reshape(B, L, d_model)
        if torch.allclose(out, wrong_concat @ W.T + b, atol=1e-4):
            raise Mistake("Concat 做错了：没有先 transpose(1, 2) 就 reshape，把不同 token 的数混在了一起")
        expect_close(out, concat @ W.T + b, "最终输出", hint="W_o(merge_heads(heads))")


# ---------------------------------------------------------------- 7.3
@checker("ch07", "7.3", "把输出拆成每个头的贡献 head_i W^O_i")
def check_head_contributions(fn):
    """``fn(heads, W_o)``: (B, h, L, d_k) -> (B, h, L, d_model), entry i = ``head_i @ W^O_i`` (no bias).

    ``W^O = W_o.weight.T`` (d_model, d_model); ``W^O_i`` is its row block
    ``[i*d_k, (i+1)*d_k)``, i.e. ``W_o.weight[:, i*d_k:(i+1)*d_k].T``.
    """
    for B, h, L, d_k in OUTPUT_CASES:
        d_model = h * d_k
        heads = torch.randn(B, h, L, d_k)
        heads_copy = heads.clone()
        W_o = _layer(d_model)
        W, b = W_o.weight.detach(), W_o.bias.detach()
        with torch.no_grad():
            out = call(fn, heads, W_o, what="你的函数")
        if not torch.equal(heads, heads_copy) or heads.shape != heads_copy.shape:
            raise Mistake("你的函数修改了输入 heads；请返回新的张量")
        out = expect_tensor(out, "每个头的贡献")
        W_O = W.T  # (d_model, d_model): the W^O of the formula
        want = torch.stack([heads[:, i] @ W_O[i * d_k:(i + 1) * d_k] for i in range(h)], dim=1)  # (B, h, L, d_model)
        if tuple(out.shape) == (B, L, d_model):
            raise Mistake(f"返回的形状是 {tuple(out.shape)}：这是所有头加起来之后的结果；"
                          "这里要的是把每个头的贡献分开放，形状 (B, h, L, d_model)")
        if tuple(out.shape) == (B, L, h, d_model):
            raise Mistake(f"返回的形状是 {tuple(out.shape)}：头的轴应该在第 1 维，(B, h, L, d_model)；"
                          "用 torch.stack(..., dim=1)")
        expect_shape(out, want.shape, "每个头的贡献", hint="(B, h, L, d_model)，第 i 个是 head_i @ W^O_i")
        out = out.detach()
        if torch.allclose(out, want + b, atol=1e-4):
            raise Mistake("每个头的贡献里都加了 bias：那样加起来会有 h 个 bias；bias 只在总和上加一次")
        rows = torch.stack([heads[:, i] @ W[i * d_k:(i + 1) * d_k] for i in range(h)], dim=1)
        if torch.allclose(out, rows, atol=1e-4):
            raise Mistake("取成了 W_o.weight 的行块：nn.Linear 存的是 W^O 的转置，"
                          "head_i 对应 W_o.weight 的列块 W_o.weight[:, i*d_k:(i+1)*d_k]，用之前要转置")
        same = torch.stack([heads[:, i] @ W_O[:d_k] for i in range(h)], dim=1)
        if torch.allclose(out, same, atol=1e-4):
            raise Mistake("每个头都乘了同一块 W^O_1：第 i 个头要乘 W^O 的第 i 块 [i*d_k, (i+1)*d_k)")
        expect_close(out, want, "每个头的贡献", hint="head_i @ W_o.weight[:, i*d_k:(i+1)*d_k].T")
        total = out.sum(dim=1) + b  # (B, L, d_model)
        expect_close(total, W_o(merge_heads(heads)).detach(), "各头贡献之和加 bias")
