"""Checkers for chapter 09, the worked example "You are welcome PAD".

* 9.1 build the padding mask from token ids,
* 9.2 every head's attention weights from Q' and K' (L != S), splitting the heads by hand,
* 9.3 predict the shapes when the middle widths differ from d_model (d_k, d_v free).

The answer keys come from the course package itself (:func:`mha.padding_mask`, the steps of
:mod:`mha.steps`), computed by the checker, never by the student's code: the student's code
runs under :func:`call`, which forbids the shortcuts each prompt rules out.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from mha.layer import MultiHeadAttention
from mha.masks import padding_mask, padding_mask_from_lengths
from mha.steps import fused_attention, attention
from mha.steps import attention_scores, masked_softmax, merge_heads, split_heads
from .answers import expect_close, expect_shape, expect_tensor, name_the_match, same
from .gradients import expect_gradients
from .guard import PREDICT_SHAPES, SDPA, torch_mha
from .records import Exercise, predict_shapes
from .running import call
from .verdicts import checker, Mistake

__all__ = ["check_padding_mask", "check_all_head_weights", "check_middle_widths", "check_zero_weights"]


# ---------------------------------------------------------------- 9.1 padding mask

# (token ids, pad id): ids below AND above the pad id, so that only `!=` gives the right mask.
PADDING_CASES = [
    ([[0, 5, 1, 2, 3, 3], [4, 3, 3, 3, 3, 3], [2, 0, 1, 5, 4, 6]], 3),  # PAD id 3, real ids on both sides
    ([[1, 2, 3, 0]], 0),  # the worked example: You are welcome PAD
    ([[5, 6, 7, 8, 1, 1], [9, 2, 0, 1, 1, 1]], 1),  # PAD id 1, a real token with id 0
    ([[4, 9, 9], [9, 9, 9]], 9),  # PAD id is the largest id (a sequence that is all PAD)
    ([[1, 3, 2, 3, 5], [3, 3, 4, 0, 3]], 3),  # PAD in the middle and at the front: a mask is per token, not a length
]


@checker("ch09", "9.1", "从 token id 构造 padding 掩码")
def check_padding_mask(fn):
    """``fn(token_ids (B, S) int64, pad_id int) -> (B, 1, 1, S) bool``, True = real token (may attend).

    Accepted: exactly shape (B, 1, 1, S) and dtype torch.bool. Rejected with a
    named mistake: a call of ``mha`` (``mha.padding_mask``), inverted polarity
    (True at PAD), ``>``/``<`` instead of ``!=``, a hard-coded PAD id, shape
    (B, S) or another layout, 0/1 integers or floats instead of bool, a
    mutated input.
    """
    for ids, pad_id in PADDING_CASES:
        token_ids = torch.tensor(ids)
        B, S = token_ids.shape
        out = expect_tensor(call(fn, token_ids, pad_id, what="你的 padding mask 函数", forbid=(padding_mask, padding_mask_from_lengths)),
                            "你的 padding mask")
        want = padding_mask(token_ids, pad_id)  # (B, 1, 1, S)
        if out.numel() == B * S and out.dtype == torch.bool:
            flat, right = out.reshape(B, S), want.reshape(B, S)
            if not torch.equal(flat, right):
                if torch.equal(flat, ~right):
                    raise Mistake("掩码的极性反了：你在 PAD 的位置放了 True。本课约定 True = 可以被关注（真实 token），"
                                  "PAD 处应为 False——这和 torch.nn.MultiheadAttention 的 key_padding_mask（True = 忽略）正好相反")
                if torch.equal(flat, token_ids != 0) or torch.equal(flat, token_ids > 0):
                    raise Mistake(f"你把 PAD 的 id 写死成了 0；这一组输入的 pad_id 是 {pad_id}，要用参数 pad_id 来比较")
                from_first_pad = (token_ids == pad_id).long().cumsum(-1) == 0  # (B, S): True before the first PAD
                if torch.equal(flat, from_first_pad):
                    raise Mistake(f"你把第一个 PAD 之后的位置全当成了 PAD（像是按长度构造的）；PAD 不一定只在末尾："
                                  f"输入 {ids}（pad_id={pad_id}）里 PAD 之后还有真实 token。逐个 token 比较 token_ids != pad_id")
                for op, wrong in ((">", token_ids > pad_id), ("<", token_ids < pad_id)):
                    if torch.equal(flat, wrong) and 0 < int(wrong.sum()) < wrong.numel():
                        raise Mistake(f"用了 `token_ids {op} pad_id`：id 只是编号，没有大小的意义，PAD 的 id 也不一定最小或最大"
                                      f"（这一组 pad_id={pad_id}，输入 {ids}）；真实 token 就是“id 不等于 pad_id”，用 `!=`")
        if tuple(out.shape) == (B, S):
            raise Mistake(f"形状应该是 (B, 1, 1, S) = {(B, 1, 1, S)}，你返回的是 (B, S) = {(B, S)}。"
                          "(B, S) 与 scores 的 (B, h, L, S) 按右端对齐广播时，B 会被对到 L 上——"
                          "B == L 时不报错却悄悄算错；用 [:, None, None, :] 插入两个长度为 1 的轴")
        expect_shape(out, want.shape, "你的 padding mask",
                     hint="掩码要能广播到 scores 的 (B, h, L, S)：头的轴和 query 的轴都写成 1")
        if out.dtype != torch.bool:
            if torch.equal(out.ne(0), want):
                raise Mistake(f"数值对了，但 dtype 是 {out.dtype}，要求 torch.bool。对整数张量 `~` 是按位取反"
                              "（~1 == -2），`masked_fill(~mask, ...)` 会出错；用比较运算 `!=` 直接得到 bool")
            raise Mistake(f"dtype 应该是 torch.bool，实际是 {out.dtype}")
        if not torch.equal(out, want):
            wrong = (out != want).nonzero()[0].tolist()
            raise Mistake(f"形状和 dtype 都对了，但有位置不对，例如下标 {tuple(wrong)}；"
                          f"输入 {ids}，pad_id={pad_id}，应该得到 {want[:, 0, 0].tolist()}")


# ---------------------------------------------------------------- 9.2 one head's weights

def _one_head_weights_reference(q_proj, k_proj, head, n_heads, key_mask):
    """One head's (L, S) weights, from the package's own steps."""
    q = split_heads(q_proj[None], n_heads)[0, head]  # (L, d_k)
    k = split_heads(k_proj[None], n_heads)[0, head]  # (S, d_k)
    return masked_softmax(attention_scores(q, k), key_mask)  # (L, S)


_same = same


# (L, S, d_model, n_heads, head, key_mask)


# ---------------------------------------------------------------- 9.2 (reworked) every head's weights, split by hand

# (L, S, d_model, n_heads, key_mask): L != S, a PAD in the middle, h = 1, d_k = 1
ALL_HEADS_CASES = [
    (3, 5, 8, 2, [True, True, False, True, False]),  # L != S, PAD in the middle
    (4, 4, 6, 2, [True, True, True, False]),         # the worked example's sizes
    (2, 3, 12, 3, [True, True, True]),               # three heads, no PAD
    (5, 2, 4, 4, [True, False]),                     # d_k = 1, L > S
    (2, 4, 6, 1, [False, True, True, True]),         # one head, PAD at the front
]


def _all_heads_reference(q_proj, k_proj, n_heads, key_mask):
    """(h, L, S): every head's weights, from the package's own steps."""
    q, k = split_heads(q_proj[None], n_heads)[0], split_heads(k_proj[None], n_heads)[0]  # (h, L, d_k), (h, S, d_k)
    return masked_softmax(attention_scores(q, k), key_mask)


def _all_heads_wrong_answers(q_proj, k_proj, n_heads, key_mask):
    """(message, tensor) of the usual mistakes, for recognising them."""
    (L, d_model), S = q_proj.shape, k_proj.shape[0]
    h, d_k = n_heads, d_model // n_heads
    big = torch.finfo(q_proj.dtype).min

    def weights(q, k, scale=math.sqrt(d_k), dim=-1, mask=key_mask):
        return torch.softmax((q @ k.transpose(-2, -1) / scale).masked_fill(~mask, big), dim=dim)

    q = q_proj.view(L, h, d_k).transpose(0, 1)  # (h, L, d_k)
    k = k_proj.view(S, h, d_k).transpose(0, 1)
    raw = q @ k.transpose(-2, -1)
    out = [
        ("分头时少了 transpose：直接把 (L, d_model) view/reshape 成 (h, L, d_k)，会把不同 token 的数混进同一个头。"
         "要先 view 成 (L, h, d_k)，再 transpose 成 (h, L, d_k)",
         weights(q_proj.reshape(h, L, d_k), k_proj.reshape(h, S, d_k)) if h > 1 else None),
        ("头的列取错了：第 i 个头是连续的 d_k 列 [i·d_k, (i+1)·d_k)，不是隔 h 取一列；view 成 (L, h, d_k) 而不是 (L, d_k, h)",
         weights(q_proj.view(L, d_k, h).permute(2, 0, 1), k_proj.view(S, d_k, h).permute(2, 0, 1)) if h > 1 and d_k > 1 else None),
        ("忘了除以 √d_k：scores 应该是 Q_i K_iᵀ / √d_k", weights(q, k, scale=1.0) if d_k > 1 else None),
        (f"缩放用错了：应该除以 √d_k = √{d_k}（一个头的宽度），你除的是 √d_model = √{d_model}",
         weights(q, k, scale=math.sqrt(d_model)) if h > 1 else None),
        ("softmax 的轴错了：要在 key 的轴（最后一维）上归一化，使每个 query 的一行之和为 1", weights(q, k, dim=-2)),
        ("掩码的极性反了：key_mask 里 True = 可以看，应该挡住 False（PAD）的位置",
         weights(q, k, mask=~key_mask) if (~key_mask).any() and key_mask.any() else None),
        ("没有用掩码：PAD 那一列的权重应该正好是 0", torch.softmax(raw / math.sqrt(d_k), dim=-1)),
        ("在 softmax 之后才把 PAD 列置零：每行之和就不再是 1；要在 softmax 之前把被挡住的分数换成很小的数",
         torch.softmax(raw / math.sqrt(d_k), dim=-1).masked_fill(~key_mask, 0.0)),
    ]
    return [(msg, t) for msg, t in out if t is not None]


@checker("ch09", "9.2", "不用 split_heads，算出每个头的注意力权重")
def check_all_head_weights(fn):
    """``fn(q_proj (L, d_model), k_proj (S, d_model), n_heads, key_mask (S,) bool) -> (h, L, S)``.

    Forbidden: ``mha.split_heads``, ``mha.attention_scores``, ``mha.masked_softmax``, ``mha.attention`` (and
    the fused path, the layer), ``F.scaled_dot_product_attention``, ``nn.MultiheadAttention``. The weights must
    be differentiable: the gradients reaching ``q_proj`` and ``k_proj`` are compared with the reference's.
    """
    for L, S, d_model, n_heads, keep in ALL_HEADS_CASES:
        q_leaf = torch.randn(L, d_model, requires_grad=True)
        k_leaf = torch.randn(S, d_model, requires_grad=True)
        key_mask = torch.tensor(keep)
        h = n_heads
        with torch.enable_grad():  # the chapter turns autograd off globally
            q_proj, k_proj = q_leaf.clone(), k_leaf.clone()
            out = call(fn, q_proj, k_proj, n_heads, key_mask, what="你的函数",
                       forbid=(SDPA, torch_mha(), MultiHeadAttention, attention, fused_attention, masked_softmax,
                               split_heads, attention_scores))
        out = expect_tensor(out, "你的权重")
        where = f"（L={L}, S={S}, d_model={d_model}, n_heads={h}）"
        if tuple(out.shape) == (L, h, S) and L != h:
            raise Mistake(f"形状应该是 (h, L, S) = {(h, L, S)}，你返回的是 (L, h, S)：头的轴要放在最前面{where}")
        if tuple(out.shape) == (L, S) and h > 1:
            raise Mistake(f"形状应该是 (h, L, S) = {(h, L, S)}，你返回的是 (L, S)：每个头有自己的一张权重表，"
                          f"不要把头合并或平均掉{where}")
        if tuple(out.shape) == (h, S, L) and L != S:
            raise Mistake(f"形状应该是 (h, L, S) = {(h, L, S)}，你返回的是 (h, S, L)：行是 query，列是 key，"
                          f"scores = Q_i K_iᵀ 而不是 K_i Q_iᵀ{where}")
        expect_shape(out, (h, L, S), "你的权重", hint="每个头一张 (L, S) 的表：(h, L, S)")
        if not out.is_floating_point():
            raise Mistake(f"权重应该是浮点数张量，实际 dtype 是 {out.dtype}")
        q, k = q_leaf.detach(), k_leaf.detach()
        want = _all_heads_reference(q, k, n_heads, key_mask)
        if not _same(out, want):
            name_the_match(out, ((wrong, why) for why, wrong in _all_heads_wrong_answers(q, k, n_heads, key_mask)),
                           suffix=where, same=_same)
            expect_close(out, want, "你的权重", hint="依次检查：view 成 (L, h, d_k) 再 transpose、Q_i K_iᵀ、"
                                                  "除以 √d_k、softmax 之前用掩码、dim=-1" + where)
        with torch.enable_grad():
            expect_gradients(out, {"q_proj": q_leaf, "k_proj": k_leaf}, "你的权重")
            probe = torch.randn(h, L, S)
            got_q, got_k = torch.autograd.grad((out * probe).sum(), (q_leaf, k_leaf), allow_unused=True)
            ref = _all_heads_reference(q_leaf, k_leaf, n_heads, key_mask)
            want_q, want_k = torch.autograd.grad((ref * probe).sum(), (q_leaf, k_leaf))
        for name, got, want_g in (("q_proj", got_q, want_q), ("k_proj", got_k, want_k)):
            if got is None or not torch.allclose(got, want_g, atol=1e-5, rtol=1e-4):
                raise Mistake(f"权重的值对了，但传回 {name} 的梯度不对：是不是有一步用了 .detach()、.data 或 no_grad？{where}")


# ---------------------------------------------------------------- 9.3 middle widths

WIDTH_KEYS = ("q_proj", "v_proj", "q", "k", "v", "scores", "heads", "concat", "output")


@torch.no_grad()
def middle_shapes(B, L, d_model, n_heads, d_k, d_v):
    """Every shape of self-attention with free middle widths, by running the package's steps."""
    h = n_heads
    x = torch.zeros(B, L, d_model)
    q_proj = nn.Linear(d_model, h * d_k)(x)  # W^Q: d_model -> h d_k
    k_proj = nn.Linear(d_model, h * d_k)(x)
    v_proj = nn.Linear(d_model, h * d_v)(x)  # W^V: d_model -> h d_v
    q, k, v = split_heads(q_proj, h), split_heads(k_proj, h), split_heads(v_proj, h)
    scores = attention_scores(q, k)
    heads = masked_softmax(scores) @ v
    concat = merge_heads(heads)
    output = nn.Linear(h * d_v, d_model)(concat)  # W^O: h d_v -> d_model
    tensors = dict(q_proj=q_proj, v_proj=v_proj, q=q, k=k, v=v, scores=scores, heads=heads, concat=concat, output=output)
    return {key: tuple(t.shape) for key, t in tensors.items()}


def _width_mistake(key, got, want, B, L, d_model, h, d_k, d_v):
    base = f'shapes["{key}"] 应该是 {want}，你写的是 {got}'
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
    if key in ("q", "k", "v", "heads") and len(got) == 4 and got[1] == L and got[2] == h and got[1] != h:
        return base + "：分头后要 transpose，把头的轴放到 token 的轴前面：(B, h, L, 宽度)"
    return base


check_middle_widths = predict_shapes(Exercise(  # fn(B, L, d_model, n_heads, d_k, d_v) -> {key: shape}, self-attention
    "9.3", "ch09", "中间宽度不等于 d_model 时的形状", "shape dict", right=middle_shapes, wrongs=None,
    hint=lambda key, got, want, B, L, d, h, d_k, d_v: (_width_mistake(key, got, want, B, L, d, h, d_k, d_v)
                                                      + f"（B={B}, L={L}, d_model={d}, n_heads={h}, d_k={d_k}, d_v={d_v}）"),
    cases=((1, 4, 6, 2, 2, 4), (2, 5, 8, 4, 3, 1), (3, 2, 12, 3, 5, 2)), forbids=PREDICT_SHAPES(), keys=WIDTH_KEYS))


# ---------------------------------------------------------------- 9.4 (predict: how many attention weights are 0)
ZERO_QUESTION = {"B": 2, "h": 2, "L": 4, "lengths": [4, 2]}  # self-attention, key padding mask from the lengths


def zero_weights_truth(B, h, L, lengths) -> int:
    """Count the exact zeros of the layer's weights (B, h, L, L) under the key padding mask (computed, not assumed)."""
    from mha.masks import padding_mask_from_lengths
    torch.manual_seed(9)
    layer = MultiHeadAttention(4 * h, h).eval()
    x = torch.randn(B, L, 4 * h)
    with torch.no_grad():
        _, weights = layer(x, x, x, padding_mask_from_lengths(lengths, L), need_weights=True)
    return int((weights == 0).sum())


@checker("ch09", "9.4", "预测：padding 之后有多少个注意力权重是 0")
def check_zero_weights(answer):
    """``answer``: how many entries of the (B, h, L, L) weights are exactly 0 for B = 2 sentences of L = 4 tokens
    with lengths [4, 2], h = 2 heads and the key padding mask (B, 1, 1, S)."""
    from .answers import as_int
    from .verdicts import is_stub, NotDone
    if is_stub(answer):
        raise NotDone()
    n = as_int(answer, "你的答案")
    q = ZERO_QUESTION
    B, h, L, lengths = q["B"], q["h"], q["L"], q["lengths"]
    truth = zero_weights_truth(B, h, L, lengths)
    if n == truth:
        return
    per_head = sum(L * (L - n_real) for n_real in lengths)
    if n == per_head:
        raise Mistake(f"{n} 只数了一个头：每个头都有一张 (L, S) 的权重表，h = {h} 个头都一样被挡住")
    if n == h * sum(L * L - n_real * n_real for n_real in lengths):
        raise Mistake(f"{n} 把 PAD 的 query 行也当成了全 0：padding mask 的形状是 (B, 1, 1, S)，只挡 key（列）；"
                      "PAD 位置的 query 仍然对真实 token 分配权重，这一行加起来还是 1")
    if n == h * sum(L - n_real for n_real in lengths):
        raise Mistake(f"{n} 每个 PAD key 只数了一次：每个 query 行都挡住这个 key，一共 L = {L} 行")
    raise Mistake(f"{n} 不对。提示：被挡住的是 key 的列；第二句有 {L - lengths[1]} 个 PAD key，每个 query、每个头都看不到它们")
