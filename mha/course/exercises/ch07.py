"""Checkers for chapter 07, 步骤 6：最终 Linear W^O.

* 7.1 count the parameters of W^O when the heads are d_v wide (d_v != d_model / h);
* 7.2 go back: recover the concatenated heads from the output and W^O (a linear system);
* 7.3 only the output and ONE head's result are known (heads d_v wide, h·d_v != d_model): switch that head
  off by subtracting its contribution head_i W^O_i, keeping the bias.
"""
from __future__ import annotations

import functools

import torch
from torch import nn

from mha.layer import MultiHeadAttention
from mha.steps import merge_heads, project
from .answers import as_int, expect_close, expect_shape, expect_tensor, same
from .gradients import expect_gradients
from .running import call
from .verdicts import checker, is_stub, Mistake, NotDone

__all__ = ["check_w_o_params_dv", "check_concat_from_output", "check_remove_head"]

# ---------------------------------------------------------------- 7.1
W_O_D_MODEL, W_O_HEADS = 512, 8  # the lecture's layer


def _count(modules) -> int:
    return sum(p.numel() for m in modules for p in m.parameters())


# ---------------------------------------------------------------- 7.2 and 7.3
OUTPUT_CASES = [(2, 4, 3, 5), (1, 2, 6, 3)]  # (B, h, L, d_k), h != d_k


def _layer(d_model: int) -> nn.Linear:
    W_o = nn.Linear(d_model, d_model)
    with torch.no_grad():
        W_o.bias.normal_()  # a bias large enough that forgetting it shows
    return W_o


def _float_tensor(out, what: str) -> torch.Tensor:
    out = expect_tensor(out, what)
    if not out.is_floating_point():
        raise Mistake(f"{what} 的 dtype 应该是浮点数（例如 torch.float32），实际是 {out.dtype}")
    return out


_matches = functools.partial(same, atol=1e-4)


def _answers(fn, what: str):
    """Run ``fn(heads, W_o)`` on each case of OUTPUT_CASES: yields (case, heads, W_o, the answer)."""
    for B, h, L, d_k in OUTPUT_CASES:
        heads, W_o = torch.randn(B, h, L, d_k), _layer(h * d_k)
        yield (B, h, L, d_k), heads, W_o, _float_tensor(call(fn, heads, W_o, what="你的函数", forbid=(merge_heads, project, MultiHeadAttention)), what)


# ---------------------------------------------------------------- 7.1 (heads d_v wide)
W_O_DV_QUESTION = {"d_model": 512, "n_heads": 8, "d_v": 32}


@checker("ch07", "7.1", "W^O 的参数：每个头只有 d_v 维时")
def check_w_o_params_dv(answer):
    """``answer``: parameters of W^O = nn.Linear(h·d_v, d_model) (with bias) for d_model 512, 8 heads of d_v = 32."""
    if is_stub(answer):
        raise NotDone()
    n = as_int(answer, "W^O 的参数个数")
    q = W_O_DV_QUESTION
    d, h, d_v = q["d_model"], q["n_heads"], q["d_v"]
    right = _count([nn.Linear(h * d_v, d)])
    if n == right:
        return
    if n == d * d + d:
        raise Mistake(f"{n} 是 nn.Linear({d}, {d}) 的参数：这里 Concat 之后只有 h·d_v = {h * d_v} 维，W^O 是 nn.Linear({h * d_v}, {d})")
    if n == h * d_v * d:
        raise Mistake(f"{n} 只数了权重 ({d}, {h * d_v})，忘了 bias：W^O 的输出有 {d} 维，就有 {d} 个偏置")
    if n == h * d_v * d + h * d_v:
        raise Mistake(f"{n} 的偏置数错了：偏置的个数等于输出维数 d_model = {d}，不是输入的 h·d_v = {h * d_v}")
    if n == d_v * d + d:
        raise Mistake(f"{n} 只算了一个头的 d_v = {d_v} 维输入；W^O 读的是 h 个头拼起来的 h·d_v = {h * d_v} 维")
    raise Mistake(f"{n} 不对。提示：W^O 把 Concat 后的 h·d_v 维映射回 d_model 维")


# ---------------------------------------------------------------- 7.2 (back from the output to the concat)
@checker("ch07", "7.2", "反推：从输出和 W^O 求出 Concat")
def check_concat_from_output(fn):
    """``fn(out (B, L, d_model), W_o nn.Linear(d_model, d_model)) -> concat (B, L, d_model)`` with
    ``W_o(concat) == out`` (W_o is invertible here)."""
    for B, L, d in [(2, 3, 4), (1, 5, 6)]:
        W_o = _layer(d).double()
        with torch.no_grad():
            W_o.weight.add_(3 * torch.eye(d, dtype=torch.float64))  # well conditioned
            concat = torch.randn(B, L, d, dtype=torch.float64)
            out = W_o(concat).clone()  # a tensor of its own: an in-place edit is reported, not a torch error
        where = f"out {(B, L, d)}、W_o = nn.Linear({d}, {d})"
        got = _float_tensor(call(fn, out, W_o, what="你的函数"), f"{where} 时的返回值")
        expect_shape(got, concat.shape, f"{where} 时的返回值")
        if _matches(got, concat, atol=1e-6):
            continue
        W, b = W_o.weight.detach(), W_o.bias.detach()
        if _matches(got, out @ torch.linalg.inv(W).T, atol=1e-6):
            raise Mistake(f"{where} 时忘了先减去偏置：out = concat @ W.T + b，所以 concat = (out − b) @ (W.T)⁻¹")
        if _matches(got, (out - b) @ torch.linalg.inv(W), atol=1e-6):
            raise Mistake(f"{where} 时转置错了：out − b = concat @ W.T，两边右乘 (W.T)⁻¹，即 torch.linalg.inv(W).T"
                          "（或用 torch.linalg.solve）")
        if _matches(got, (out - b) @ W, atol=1e-6):
            raise Mistake(f"{where} 时你乘的是 W 而不是它的逆：要“撤销”一次矩阵乘法，需要逆矩阵（torch.linalg.inv 或 torch.linalg.solve）")
        expect_close(got, concat, f"{where} 时反推出的 concat", hint="检查：W_o(你的结果) 应该等于 out")


# ---------------------------------------------------------------- 7.3 (only one head is known: take it out of the output)
# (B, h, L, d_v, d_model): h * d_v != d_model, so W^O is not square and W^O_i's rows and columns cannot be confused
REMOVE_CASES = [(2, 4, 3, 5, 6), (1, 3, 2, 4, 10), (2, 2, 4, 3, 7)]


def _remove_reference(heads, W_o, i):
    """The output when head i's result is replaced by zeros: W_o(concat with head i zeroed)."""
    B, h, L, d_v = heads.shape
    off = heads.clone()
    off[:, i] = 0
    return W_o(off.transpose(1, 2).reshape(B, L, h * d_v))


@checker("ch07", "7.3", "只拿到一个头的结果：把它从输出里去掉")
def check_remove_head(fn):
    """``fn(out (B, L, d_model), head_i (B, L, d_v), W_o nn.Linear(h·d_v, d_model), i) -> (B, L, d_model)``:
    the output with head i's result replaced by zeros = out − head_i W^O_i (the bias stays).

    Nothing is forbidden (the other heads are simply not handed over); ``out`` and ``head_i`` must not change;
    gradients (values compared) reach ``head_i`` and ``W_o.weight``.
    """
    for B, h, L, d_v, d_model in REMOVE_CASES:
        W_o = _layer_rect(h * d_v, d_model)
        heads = torch.randn(B, h, L, d_v)
        with torch.no_grad():
            out = W_o(heads.transpose(1, 2).reshape(B, L, h * d_v))
        for i in sorted({0, h // 2, h - 1}):
            where = f"h={h}、d_v={d_v}、d_model={d_model}、i={i}"
            head_i = heads[:, i].clone().requires_grad_()
            got = _float_tensor(call(fn, out.clone(), head_i, W_o, i, what="你的函数"), f"{where} 时的返回值")
            expect_shape(got, (B, L, d_model), f"{where} 时的返回值", hint="去掉一个头，输出的形状不变：(B, L, d_model)")
            with torch.no_grad():
                want = _remove_reference(heads, W_o, i)
                W_O = W_o.weight.T  # (h·d_v, d_model): the W^O of the formula
                contribution = head_i @ W_O[i * d_v:(i + 1) * d_v]  # head_i W^O_i   (B, L, d_model)
            if _matches(got, want):
                _remove_gradients(got, head_i, W_o, i, where)
                continue
            if _matches(got, want - W_o.bias.detach()):
                raise Mistake(f"{where} 时偏置也被减掉了：b^O 不属于任何一个头，关掉一个头时它要留下")
            if _matches(got, out + contribution):
                raise Mistake(f"{where} 时符号反了：去掉头 i 要从输出里减去 head_i W^O_i，你加上了它")
            if _matches(got, contribution) or _matches(got, contribution + W_o.bias.detach()):
                raise Mistake(f"{where} 时返回的是头 {i} 自己的贡献 head_i W^O_i：题目要的是去掉它之后的输出 out − head_i W^O_i")
            if _matches(got, out):
                raise Mistake(f"{where} 时输出没有变：要减去头 {i} 的贡献 head_i W^O_i")
            for j in range(h):
                if j != i and _matches(got, out - head_i @ W_O[j * d_v:(j + 1) * d_v]):
                    raise Mistake(f"{where} 时减去的是 head_i 乘 W^O 的第 {j} 块（代码下标）：头 i 的结果读的是 W^O 的第 i 块，"
                                  "即 W^O = W_o.weight.T 的第 [i·d_v, (i+1)·d_v) 行")
            raise Mistake(f"{where} 时结果不对：输出 = Σ_j head_j W^O_j + b^O，去掉头 i 就是减去 head_i W^O_i，"
                          "其中 W^O = W_o.weight.T，W^O_i 是它的第 [i·d_v, (i+1)·d_v) 行")


def _layer_rect(d_in: int, d_out: int) -> nn.Linear:
    W_o = nn.Linear(d_in, d_out)
    with torch.no_grad():
        W_o.bias.normal_()  # a bias large enough that removing it shows
    return W_o


def _remove_gradients(got, head_i, W_o, i, where) -> None:
    """Gradients reach head_i and W_o.weight, with the reference's values."""
    expect_gradients(got, {"head_i": head_i, "W_o.weight": W_o.weight}, f"{where} 时的返回值")
    d_v = head_i.shape[-1]
    g = torch.randn_like(got)
    got_grads = torch.autograd.grad((got * g).sum(), [head_i, W_o.weight], allow_unused=True)
    head_ref = head_i.detach().clone().requires_grad_()
    W_ref = W_o.weight.detach().clone().requires_grad_()
    ref = -(head_ref @ W_ref.T[i * d_v:(i + 1) * d_v])  # out is a constant here
    want_grads = torch.autograd.grad((ref * g).sum(), [head_ref, W_ref])
    for name, a, b in zip(("head_i", "W_o.weight"), got_grads, want_grads):
        expect_close(a, b, f"{where} 时 {name} 的梯度", hint="前向里有没有 .detach()，或者把 W_o 的参数复制成了常数？")
