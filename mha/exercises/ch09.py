"""Checkers for chapter 09, the worked example "You are welcome PAD".

* 9.1 build the padding mask from token ids,
* 9.2 compute one head's attention weights by hand,
* 9.3 one head's own projection, cut out of the big ``W_q`` Linear.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from ._core import Mistake, call, checker, expect_close, expect_shape, expect_tensor

__all__ = ["check_padding_mask", "check_one_head_weights", "check_head_projection"]


# ---------------------------------------------------------------- 9.1 padding mask

def _padding_mask_reference(token_ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    return (token_ids != pad_id)[:, None, None, :]  # (B, 1, 1, S)


@checker("ch09", "9.1", "从 token id 构造 padding mask")
def check_padding_mask(fn):
    """``fn(token_ids (B, S) int64, pad_id int) -> (B, 1, 1, S) bool``, True = real token (may attend).

    Accepted: exactly shape (B, 1, 1, S) and dtype torch.bool. Rejected with a
    named mistake: inverted polarity (True at PAD), shape (B, S) or another
    layout, 0/1 integers or floats instead of bool, a hard-coded PAD id,
    a mutated input.
    """
    cases = [
        (torch.tensor([[1, 2, 3, 0]]), 0),  # the worked example: You are welcome PAD
        (torch.tensor([[5, 6, 7, 8, 1, 1], [9, 2, 1, 1, 1, 1], [3, 4, 5, 6, 7, 8]]), 1),  # PAD id 1
        (torch.tensor([[4, 0, 0], [0, 0, 0]]), 0),  # a sequence that is all PAD
    ]
    for token_ids, pad_id in cases:
        ids_copy = token_ids.clone()
        B, S = token_ids.shape
        out = expect_tensor(call(fn, token_ids, pad_id, what="你的 padding mask 函数"), "你的 padding mask")
        if not torch.equal(token_ids, ids_copy):
            raise Mistake("你的函数修改了输入的 token_ids；构造掩码时不要原地改动输入（别用 `token_ids[...] = ...`）")
        want = _padding_mask_reference(token_ids, pad_id)
        flat = out.reshape(-1) if out.numel() == B * S else None
        if flat is not None and flat.dtype == torch.bool:
            if torch.equal(flat, ~want.reshape(-1)):
                raise Mistake("掩码的极性反了：你在 PAD 的位置放了 True。本课约定 True = 可以被关注（真实 token），"
                              "PAD 处应为 False——这和 torch.nn.MultiheadAttention 的 key_padding_mask（True = 忽略）正好相反")
            if not torch.equal(flat, want.reshape(-1)) and torch.equal(flat, (token_ids != 0).reshape(-1)):
                raise Mistake(f"你把 PAD 的 id 写死成了 0；这一组输入的 pad_id 是 {pad_id}，要用参数 pad_id 来比较")
        if tuple(out.shape) == (B, S):
            raise Mistake(f"形状应该是 (B, 1, 1, S) = {(B, 1, 1, S)}，你返回的是 (B, S) = {(B, S)}。"
                          "(B, S) 与 scores 的 (B, h, L, S) 按右端对齐广播时，B 会被对到 L 上——"
                          "B == L 时不报错却悄悄算错；用 [:, None, None, :] 插入两个长度为 1 的轴")
        expect_shape(out, (B, 1, 1, S), "你的 padding mask",
                     hint="掩码要能广播到 scores 的 (B, h, L, S)：头的轴和 query 的轴都写成 1")
        if out.dtype != torch.bool:
            if torch.equal(out.ne(0), want):
                raise Mistake(f"数值对了，但 dtype 是 {out.dtype}，要求 torch.bool。对整数张量 `~` 是按位取反"
                              "（~1 == -2），`masked_fill(~mask, ...)` 会出错；用比较运算 `!=` 直接得到 bool")
            raise Mistake(f"dtype 应该是 torch.bool，实际是 {out.dtype}")
        if not torch.equal(out, want):
            wrong = (out != want).nonzero()[0].tolist()
            raise Mistake(f"形状和 dtype 都对了，但有位置不对，例如下标 {tuple(wrong)}；"
                          f"输入 {token_ids.tolist()}，pad_id={pad_id}，应该得到 {want[:, 0, 0].tolist()}")


# ---------------------------------------------------------------- 9.2 one head's weights

def _one_head_weights_reference(q_proj, k_proj, head, n_heads, key_mask):
    d_k = q_proj.shape[-1] // n_heads
    cols = slice(head * d_k, (head + 1) * d_k)
    q_i = q_proj[:, cols]  # (L, d_k)
    k_i = k_proj[:, cols]  # (S, d_k)
    scores = q_i @ k_i.T / math.sqrt(d_k)  # (L, S)
    scores = scores.masked_fill(~key_mask, torch.finfo(scores.dtype).min)  # (L, S)
    return torch.softmax(scores, dim=-1)  # (L, S)


def _one_head_wrong_answers(q_proj, k_proj, head, n_heads, key_mask):
    """(name, message, tensor) of the usual mistakes, for recognising them."""
    L, d_model = q_proj.shape
    d_k = d_model // n_heads
    cols = slice(head * d_k, (head + 1) * d_k)
    q_i, k_i = q_proj[:, cols], k_proj[:, cols]
    big = torch.finfo(q_proj.dtype).min

    def soft(s, dim=-1, mask=key_mask):
        return torch.softmax(s.masked_fill(~mask, big), dim=dim)

    raw = q_i @ k_i.T
    out = [
        ("忘了除以 √d_k：scores 应该是 Q_i K_iᵀ / √d_k（这里 d_k = d_model / n_heads）",
         soft(raw)),
        (f"缩放用错了：应该除以 √d_k = √{d_k}（一个头的宽度），你除的是 √d_model = √{d_model}",
         soft(raw / math.sqrt(d_model))),
        ("softmax 的轴错了：要在 key 的轴（最后一维，dim=-1）上归一化，使每个 query 的一行之和为 1；"
         "你在 query 的轴（dim=0）上做了 softmax",
         soft(raw / math.sqrt(d_k), dim=0)),
        ("掩码的极性反了：key_mask 里 True = 可以关注，应该把 False（PAD）的位置填成很小的数；你屏蔽了真实 token",
         soft(raw / math.sqrt(d_k), mask=~key_mask) if (~key_mask).any() else None),
        ("没有用掩码：PAD 这一列的权重应该正好是 0",
         torch.softmax(raw / math.sqrt(d_k), dim=-1)),
        ("在 softmax 之后才把 PAD 列置零：每行之和就不再是 1；要在 softmax 之前把被屏蔽的分数填成很小的数",
         torch.softmax(raw / math.sqrt(d_k), dim=-1).masked_fill(~key_mask, 0.0)),
        ("头取错了：head 从 0 开始编号，第 head 个头是列 [head*d_k, (head+1)*d_k)，你取成了相邻的另一个头",
         _one_head_weights_reference(q_proj, k_proj, (head + 1) % n_heads, n_heads, key_mask)
         if n_heads > 1 else None),
        ("头的列取错了：第 i 个头是连续的 d_k 列 [i*d_k, (i+1)*d_k)，不是隔 n_heads 取一列 [i::n_heads]",
         soft(q_proj[:, head::n_heads] @ k_proj[:, head::n_heads].T / math.sqrt(d_k)) if n_heads > 1 else None),
    ]
    if L == k_proj.shape[0]:
        right = _one_head_weights_reference(q_proj, k_proj, head, n_heads, key_mask)
        out.append(("行和列颠倒了：结果应该是 (L, S)，行是 query，列是 key，所以是 Q_i K_iᵀ；你得到的是它的转置 (S, L)",
                    right.T))
    return [(msg, t) for msg, t in out if t is not None]


@checker("ch09", "9.2", "手算一个头的注意力权重")
def check_one_head_weights(fn):
    """``fn(q_proj (L, d_model), k_proj (S, d_model), head, n_heads, key_mask (S,) bool) -> (L, S)``."""
    cases = [(4, 4, 6, 2, 0, [True, True, True, False]),  # the worked example, head 1
             (4, 4, 6, 2, 1, [True, True, True, False]),  # head 2
             (3, 5, 8, 4, 2, [True, True, False, True, False]),  # L != S, four heads
             (2, 3, 4, 1, 0, [True, True, True])]  # one head, no PAD
    for L, S, d_model, n_heads, head, keep in cases:
        q_proj = torch.randn(L, d_model)
        k_proj = torch.randn(S, d_model)
        key_mask = torch.tensor(keep)
        copies = (q_proj.clone(), k_proj.clone(), key_mask.clone())
        out = call(fn, q_proj, k_proj, head, n_heads, key_mask, what="你的函数")
        out = expect_tensor(out, "你的权重")
        if not (torch.equal(q_proj, copies[0]) and torch.equal(k_proj, copies[1]) and torch.equal(key_mask, copies[2])):
            raise Mistake("你的函数修改了输入（q_proj、k_proj 或 key_mask）；不要原地改动输入")
        if tuple(out.shape) == (S, L) and L != S:
            raise Mistake(f"形状应该是 (L, S) = {(L, S)}，你返回的是 (S, L) = {(S, L)}：行是 query，列是 key，"
                          "scores = Q_i K_iᵀ 而不是 K_i Q_iᵀ")
        expect_shape(out, (L, S), "你的权重", hint="一个头的权重是 (L, S)：每个 query 一行，每个 key 一列")
        if not out.is_floating_point():
            raise Mistake(f"权重应该是浮点数张量，实际 dtype 是 {out.dtype}")
        want = _one_head_weights_reference(q_proj, k_proj, head, n_heads, key_mask)
        if torch.allclose(out, want, atol=1e-5, rtol=1e-4):
            continue
        for msg, wrong in _one_head_wrong_answers(q_proj, k_proj, head, n_heads, key_mask):
            if wrong.shape == out.shape and torch.allclose(out, wrong, atol=1e-5, rtol=1e-4):
                raise Mistake(msg)
        expect_close(out, want, "你的权重", hint="依次检查：取对头的列、Q_i K_iᵀ、除以 √d_k、softmax 之前用掩码、dim=-1")


# ---------------------------------------------------------------- 9.3 one head's projection

def _head_projection_reference(x, linear, head, n_heads):
    d_k = linear.out_features // n_heads
    rows = slice(head * d_k, (head + 1) * d_k)
    W_i = linear.weight[rows]  # (d_k, d_model): nn.Linear stores (out, in)
    b_i = linear.bias[rows]  # (d_k,)
    return x @ W_i.T + b_i  # (B, L, d_k)


@checker("ch09", "9.3", "从大 Linear 中切出一个头自己的投影")
def check_head_projection(fn):
    """``fn(x (B, L, d_model), linear nn.Linear(d_model, d_model), head, n_heads) -> (B, L, d_k)``.

    Must equal ``split_heads(linear(x), n_heads)[:, head]``.
    """
    cases = [(1, 4, 6, 2, 0), (1, 4, 6, 2, 1), (2, 3, 8, 4, 2), (3, 2, 12, 3, 1)]
    for B, L, d_model, n_heads, head in cases:
        d_k = d_model // n_heads
        linear = nn.Linear(d_model, d_model)
        x = torch.randn(B, L, d_model)
        x_copy = x.clone()
        w_copy, b_copy = linear.weight.detach().clone(), linear.bias.detach().clone()
        out = call(fn, x, linear, head, n_heads, what="你的函数")
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out = out.detach()
        out = expect_tensor(out, "你的投影结果")
        if not torch.equal(x, x_copy) or not torch.equal(linear.weight.detach(), w_copy) \
                or not torch.equal(linear.bias.detach(), b_copy):
            raise Mistake("你的函数修改了输入 x 或 Linear 的参数；只读取它们，不要原地改动")
        if tuple(out.shape) == (B, L, d_model):
            raise Mistake(f"形状应该是 (B, L, d_k) = {(B, L, d_k)}，你返回的是 (B, L, d_model) = {(B, L, d_model)}："
                          "只要第 head 个头的 d_k 个数")
        expect_shape(out, (B, L, d_k), "你的投影结果", hint="一个头的 Q_i 是 (B, L, d_k)，d_k = d_model / n_heads")
        with torch.no_grad():
            want = _head_projection_reference(x, linear, head, n_heads)
            W, b = linear.weight, linear.bias
            rows = slice(head * d_k, (head + 1) * d_k)
            wrongs = [
                ("忘了加偏置：nn.Linear 计算的是 x Wᵀ + b，第 head 个头要加上 bias[head*d_k:(head+1)*d_k]",
                 x @ W[rows].T),
                ("把权重的行和列弄反了：nn.Linear 的 weight 形状是 (out_features, in_features)，"
                 "第 head 个头对应的是 weight 的 d_k 行 weight[head*d_k:(head+1)*d_k]（再转置），不是 d_k 列",
                 x @ W[:, rows] + b[rows]),
                ("头的位置取错了：第 head 个头是连续的 d_k 个输出 [head*d_k, (head+1)*d_k)，"
                 "不是隔 n_heads 取一个 [head::n_heads]",
                 x @ W[head::n_heads].T + b[head::n_heads]),
            ]
            if n_heads > 1:
                other = (head + 1) % n_heads
                wrongs.append(("头的编号错了：head 从 0 开始，第 head 个头是 [head*d_k, (head+1)*d_k)，你取成了另一个头",
                               _head_projection_reference(x, linear, other, n_heads)))
        if torch.allclose(out, want, atol=1e-5, rtol=1e-4):
            continue
        for msg, wrong in wrongs:
            if wrong.shape == out.shape and torch.allclose(out, wrong, atol=1e-5, rtol=1e-4):
                raise Mistake(msg)
        expect_close(out, want, "你的投影结果",
                     hint="Q_i = x W_iᵀ + b_i，W_i = weight[head*d_k:(head+1)*d_k]，b_i = bias[head*d_k:(head+1)*d_k]")

