"""Checkers for chapter 09, the worked example "You are welcome PAD".

* 9.1 build the padding mask from token ids,
* 9.2 compute one head's attention weights by hand,
* 9.3 predict the shapes when the middle widths differ from d_model (d_k, d_v free).
"""
from __future__ import annotations

import math

import torch

from ._core import Mistake, NotDone, call, checker, expect_close, expect_shape, expect_tensor, is_stub

__all__ = ["check_padding_mask", "check_one_head_weights", "check_middle_widths"]


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


# ---------------------------------------------------------------- 9.3 middle widths

WIDTH_KEYS = ("q_proj", "v_proj", "q", "k", "v", "scores", "heads", "concat", "output")


def _middle_shapes(B, L, d_model, n_heads, d_k, d_v):
    h = n_heads
    return {
        "q_proj": (B, L, h * d_k),  # Q W^Q with W^Q of size d_model x (h d_k)
        "v_proj": (B, L, h * d_v),  # V W^V with W^V of size d_model x (h d_v)
        "q": (B, h, L, d_k),
        "k": (B, h, L, d_k),
        "v": (B, h, L, d_v),
        "scores": (B, h, L, L),
        "heads": (B, h, L, d_v),
        "concat": (B, L, h * d_v),
        "output": (B, L, d_model),  # W^O maps h d_v back to d_model
    }


def _width_shape(value, key):
    if isinstance(value, torch.Size):
        return tuple(value)
    if isinstance(value, (tuple, list)) and all(isinstance(n, int) and not isinstance(n, bool) for n in value):
        return tuple(value)
    raise Mistake(f"shapes[{key!r}] 应该是由整数组成的 tuple，例如 (1, 4, 6)，却收到了 {value!r}")


def _width_mistake(key, got, want, B, L, d_model, h, d_k, d_v):
    base = f"shapes[{key!r}] 应该是 {want}，你写的是 {got}"
    if key in ("q_proj", "v_proj", "concat") and got == (B, L, d_model):
        return base + "：中间的宽度不再是 d_model；" + {
            "q_proj": "W^Q 把 d_model 映射到 h·d_k",
            "v_proj": "W^V 把 d_model 映射到 h·d_v",
            "concat": "Concat 把 h 个 d_v 维的头拼起来，得到 h·d_v",
        }[key]
    used_d_k = (key in ("v", "heads") and got[-1:] == (d_k,)) or (key in ("v_proj", "concat") and got[-1:] == (h * d_k,))
    if d_k != d_v and used_d_k:
        return base + "：V 的宽度由 d_v 决定，不是 d_k（d_k 只属于 Q 和 K，它们要做点积，所以必须一样宽）"
    if key == "scores" and len(got) == 4 and got[-1] in (d_k, d_v) and got[-1] != L:
        return base + "：scores 是 query 和 key 两两之间的分数，形状 (L, S)，和 d_k、d_v 无关"
    if key == "output" and got == (B, L, h * d_v):
        return base + "：最后的 W^O 把 h·d_v 映射回 d_model，输出和输入形状相同"
    if key == "q" and got == (B, h, L, d_model // h):
        return base + "：每个头的宽度现在是题目给的 d_k，不再是 d_model / h"
    return base


@checker("ch09", "9.3", "中间宽度不等于 d_model 时的形状")
def check_middle_widths(fn):
    """``fn(B, L, d_model, n_heads, d_k, d_v) -> dict`` with the shapes of WIDTH_KEYS (self-attention, S = L)."""
    configs = [(1, 4, 6, 2, 2, 4), (2, 5, 8, 4, 3, 1), (3, 2, 12, 3, 5, 2)]
    for B, L, d_model, h, d_k, d_v in configs:
        answer = call(fn, B, L, d_model, h, d_k, d_v, what="你的函数")
        if is_stub(answer):
            raise NotDone()
        if not isinstance(answer, dict):
            raise Mistake(f"应该返回一个 dict（键是 {', '.join(WIDTH_KEYS)}），却收到了 {type(answer).__name__}")
        if all(is_stub(answer.get(k)) for k in WIDTH_KEYS):
            raise NotDone()
        missing = [k for k in WIDTH_KEYS if k not in answer or is_stub(answer[k])]
        if missing:
            raise Mistake(f"dict 里还缺这些键（或值还是 ...）：{', '.join(missing)}")
        want = _middle_shapes(B, L, d_model, h, d_k, d_v)
        for key in WIDTH_KEYS:
            got = _width_shape(answer[key], key)
            if got != want[key]:
                raise Mistake(_width_mistake(key, got, want[key], B, L, d_model, h, d_k, d_v)
                              + f"（B={B}, L={L}, d_model={d_model}, n_heads={h}, d_k={d_k}, d_v={d_v}）")
