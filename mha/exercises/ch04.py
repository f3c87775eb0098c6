"""Checkers for chapter 04, step 3: split heads.

* 4.1 ``check_split_shape``: predict the shape after the split.
* 4.2 ``check_split_heads``: implement ``split_heads`` with view + transpose.
* 4.3 ``check_per_head_linears``: cut one big Linear into h small per-head Linears.
"""
from __future__ import annotations

import torch
from torch import nn

from ._core import Mistake, NotDone, call, checker, expect_close, expect_shape, expect_tensor, is_stub
from .ch03 import _as_shape

__all__ = ["check_split_shape", "check_split_heads", "check_per_head_linears"]


def _reference_split(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    B, L, d_model = x.shape
    return x.view(B, L, n_heads, d_model // n_heads).transpose(1, 2)  # (B, h, L, d_k)


# ---------------------------------------------------------------- 4.1
@checker("ch04", "4.1", "预测分头之后的形状")
def check_split_shape(fn):
    """``fn(B, L, d_model, n_heads)`` must return (B, h, L, d_k)."""
    for B, L, d_model, n_heads in [(2, 4, 512, 8), (3, 5, 6, 2), (1, 7, 12, 3), (4, 2, 64, 16)]:
        d_k = d_model // n_heads
        answer = call(fn, B, L, d_model, n_heads, what="你的函数")
        if not is_stub(answer) and isinstance(answer, (tuple, list, torch.Size)):
            if any(isinstance(n, float) for n in answer) and [float(n) for n in answer] == [B, n_heads, L, d_k]:
                raise Mistake("顺序和数值都对，但 d_k 是浮点数（d_model / n_heads 得到 64.0）；"
                              "形状必须是整数，请用 d_model // n_heads")
        got = _as_shape(answer, "返回值")
        want = (B, n_heads, L, d_k)
        if got == want:
            continue
        args = f"(B, L, d_model, n_heads) = {(B, L, d_model, n_heads)}"
        if got == (B, L, n_heads, d_k):
            raise Mistake(f"{args} 时你答 {got}：这是只做了 view、还没 transpose 的形状；"
                          f"分头后 head 轴要排在 token 轴前面，应为 (B, h, L, d_k) = {want}")
        if got == (B, n_heads, L, d_model):
            raise Mistake(f"{args} 时你答 {got}：每个头只分到 d_k = d_model / h = {d_k} 个数，不是整条 d_model；应为 {want}")
        if got == (B, d_k, L, n_heads) or got == (B, L, d_k, n_heads):
            raise Mistake(f"{args} 时你答 {got}：把 h 和 d_k 的位置弄反了（h = {n_heads} 个头，每头 d_k = {d_k} 维）；应为 {want}")
        if got == (B, n_heads, d_k, L):
            raise Mistake(f"{args} 时你答 {got}：最后两维反了，每个头是 (L, d_k) 的一段序列；应为 {want}")
        if got == (n_heads, L, d_k):
            raise Mistake(f"{args} 时你答 {got}：漏掉了 batch 维 B；应为 {want}")
        raise Mistake(f"{args} 时你答 {got}，应为 (B, h, L, d_k) = {want}")


# ---------------------------------------------------------------- 4.2
@checker("ch04", "4.2", "实现 split_heads")
def check_split_heads(fn):
    """``fn(x, n_heads)``: (B, L, d_model) -> (B, h, L, d_k), head i = dims [i*d_k, (i+1)*d_k)."""
    for B, L, n_heads, d_k in [(1, 3, 2, 4), (2, 5, 4, 3), (3, 4, 3, 2), (2, 4, 8, 64)]:
        x = torch.randn(B, L, n_heads * d_k)
        x_copy = x.clone()
        where = f"x 的形状 {(B, L, n_heads * d_k)}、n_heads={n_heads}"
        out = call(fn, x, n_heads, what="split_heads")
        if x.shape != x_copy.shape or not torch.equal(x, x_copy):
            raise Mistake(f"{where} 时你的函数修改了输入 x（形状或数值变了）；分头只该返回一个新视图，别用 resize_、transpose_ 之类的原地操作")
        out = expect_tensor(out, "split_heads 的返回值")
        want = _reference_split(x_copy, n_heads)
        if tuple(out.shape) == (B, L, n_heads, d_k) and (L != n_heads):
            raise Mistake(f"{where} 时返回了 {tuple(out.shape)} = (B, L, h, d_k)：只做了 view，忘了 transpose(1, 2)；"
                          f"应为 (B, h, L, d_k) = {tuple(want.shape)}")
        if n_heads != d_k and tuple(out.shape) in {(B, d_k, L, n_heads), (B, L, d_k, n_heads)}:
            raise Mistake(f"{where} 时返回了 {tuple(out.shape)}：h 和 d_k 用反了，d_k 应为 d_model // n_heads = {d_k}")
        expect_shape(out, want.shape, f"{where} 时 split_heads 的返回值", hint="(B, h, L, d_k)，d_k = d_model // n_heads")
        if torch.equal(out, x_copy.reshape(B, n_heads, L, d_k)):
            raise Mistake(f"{where} 时形状对了，但你是直接 view/reshape 成 (B, h, L, d_k)，没有先 view 成 (B, L, h, d_k) "
                          "再 transpose——这样会把不同 token 的数混进同一个头的同一行")
        if torch.equal(out, x_copy.view(B, L, d_k, n_heads).permute(0, 3, 1, 2)):
            raise Mistake(f"{where} 时形状对了，但你按 (B, L, d_k, h) 切分：每个头拿到的是隔 h 取一个的数，"
                          "而不是连续的 d_k 个数；应 view 成 (B, L, h, d_k)")
        expect_close(out, want, f"{where} 时 split_heads 的返回值",
                     hint="第 i 个头、第 t 个 token 应是 x[b, t, i*d_k:(i+1)*d_k]")


# ---------------------------------------------------------------- 4.3
def _big_linear(d_model: int) -> nn.Linear:
    big = nn.Linear(d_model, d_model)
    with torch.no_grad():
        big.weight.normal_()
        big.bias.normal_()
    return big


@checker("ch04", "4.3", "把一个大 Linear 拆成每个头的小 Linear")
def check_per_head_linears(fn):
    """``fn(W_q, n_heads)`` must return h ``nn.Linear(d_model, d_k)``; head i uses rows [i*d_k, (i+1)*d_k)."""
    for d_model, n_heads in [(6, 2), (12, 3), (8, 4), (16, 2)]:
        d_k = d_model // n_heads
        big = _big_linear(d_model)
        W0, b0 = big.weight.detach().clone(), big.bias.detach().clone()
        where = f"d_model={d_model}、n_heads={n_heads}"
        smalls = call(fn, big, n_heads, what="你的函数")
        if is_stub(smalls):
            raise NotDone()
        if not torch.equal(big.weight.detach(), W0) or not torch.equal(big.bias.detach(), b0):
            raise Mistake(f"{where} 时你的函数改动了传入的大 Linear 的参数；只应该读取它")
        if isinstance(smalls, nn.Linear) or not isinstance(smalls, (list, tuple, nn.ModuleList)):
            raise Mistake(f"应该返回 h 个 nn.Linear 组成的 list，却返回了 {type(smalls).__name__}")
        if len(smalls) != n_heads:
            raise Mistake(f"{where} 时应该返回 h = {n_heads} 个小 Linear，却返回了 {len(smalls)} 个")
        for i, lin in enumerate(smalls):
            if not isinstance(lin, nn.Linear):
                raise Mistake(f"第 {i} 个元素应该是 nn.Linear，却是 {type(lin).__name__}")
            if tuple(lin.weight.shape) != (d_k, d_model):
                raise Mistake(f"{where} 时第 {i} 个小 Linear 的 weight 形状应为 (d_k, d_model) = {(d_k, d_model)}，"
                              f"实际是 {tuple(lin.weight.shape)}；它应是 nn.Linear(d_model, d_k)")
            if not torch.isfinite(lin.weight).all():
                raise Mistake(f"第 {i} 个小 Linear 的 weight 里有 NaN 或 inf")
        x = torch.randn(2, 3, d_model)
        with torch.no_grad():
            want = _reference_split(big(x), n_heads)  # (B, h, L, d_k)
            got = torch.stack([lin(x) for lin in smalls], dim=1)  # (B, h, L, d_k)
            W = big.weight
            if all(torch.equal(lin.weight, W[:, i * d_k:(i + 1) * d_k].T) for i, lin in enumerate(smalls)):
                raise Mistake(f"{where} 时你按列切了 weight（W[:, i*d_k:(i+1)*d_k]）。nn.Linear 的 weight 是 (out, in)，"
                              "一个头的输出维对应 weight 的行：W[i*d_k:(i+1)*d_k]")
            if all(lin.bias is None for lin in smalls) or torch.allclose(got, _reference_split(x @ W.T, n_heads), atol=1e-5):
                raise Mistake(f"{where} 时小 Linear 的权重对了，但忘了把偏置也切过来（bias[i*d_k:(i+1)*d_k]）")
            if n_heads > 1 and torch.allclose(got, want.flip(1), atol=1e-5):
                raise Mistake(f"{where} 时头的顺序反了：第 i 个小 Linear 应取第 i 段行，即 W[i*d_k:(i+1)*d_k]")
            weights_ok = torch.allclose(torch.stack([x @ lin.weight.T for lin in smalls], 1),
                                        _reference_split(x @ W.T, n_heads), atol=1e-5)
            if weights_ok and not torch.allclose(got, want, atol=1e-5):
                raise Mistake(f"{where} 时每个头的权重对了，但偏置不对：第 i 个头的偏置是 bias[i*d_k:(i+1)*d_k]")
        expect_close(got, want, f"{where} 时把 h 个小 Linear 的输出叠起来",
                     hint="第 i 个小 Linear 的 weight = W_q.weight[i*d_k:(i+1)*d_k]，bias = W_q.bias[i*d_k:(i+1)*d_k]")
