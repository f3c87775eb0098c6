"""Checkers for chapter 09, the worked example "You are welcome PAD".

* 9.1 build the padding mask from token ids,
* 9.2 after attention: each sentence's mean over its real tokens only (PAD anywhere),
* 9.3 predict which rows of the weights and of the output change when only PAD's word vector changes,
* 9.4 predict how many attention weights are exactly 0 after padding.
"""
from __future__ import annotations

import functools

import torch

from mha.layer import MultiHeadAttention
from mha.masks import padding_mask, padding_mask_from_lengths
from .answers import as_int, expect_close, expect_shape, expect_tensor, name_the_match, same
from .gradients import expect_gradients
from .records import Ask, Which, check_mask, predict_which
from .running import call
from .verdicts import checker, Mistake

__all__ = ["check_padding_mask", "check_masked_mean", "check_pad_change", "check_zero_weights"]


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
    """``fn(token_ids (B, S) int64, pad_id int) -> (B, 1, 1, S) bool``, True = real token (may attend)."""
    for ids, pad_id in PADDING_CASES:
        token_ids = torch.tensor(ids)
        B, S = token_ids.shape
        out = expect_tensor(call(fn, token_ids, pad_id, what="你的 padding mask 函数", forbid=(padding_mask, padding_mask_from_lengths),
                                 shortcut_hint="请用比较运算和索引这些基本运算自己搭出掩码"),
                            "你的 padding mask")
        want, cols = padding_mask(token_ids, pad_id), lambda m: m[:, None, None, :]  # (B, 1, 1, S)
        named = [(~want, "掩码的极性反了：你在 PAD 的位置放了 True。本课约定 True = 可以被关注（真实 token），"
                         "PAD 处应为 False——这和 torch.nn.MultiheadAttention 的 key_padding_mask（True = 忽略）正好相反"),
                 *[(cols(m), f"你把 PAD 的 id 写死成了 0；这一组输入的 pad_id 是 {pad_id}，要用参数 pad_id 来比较")
                   for m in (token_ids != 0, token_ids > 0)],
                 (cols((token_ids == pad_id).long().cumsum(-1) == 0),
                  f"你把第一个 PAD 之后的位置全当成了 PAD（像是按长度构造的）；PAD 不一定只在末尾：输入 {ids}（pad_id={pad_id}）"
                  "里 PAD 之后还有真实 token。逐个 token 比较 token_ids != pad_id"),
                 *[(cols(m), f"用了 `token_ids {op} pad_id`：id 只是编号，没有大小的意义，PAD 的 id 也不一定最小或最大"
                             f"（这一组 pad_id={pad_id}，输入 {ids}）；真实 token 就是“id 不等于 pad_id”，用 `!=`")
                   for op, m in ((">", token_ids > pad_id), ("<", token_ids < pad_id)) if 0 < int(m.sum()) < m.numel()]]
        check_mask(out, want, "你的 padding mask", named=named, hint="掩码要能广播到 scores 的 (B, h, L, S)：头的轴和 query 的轴都写成 1",
                   bad_hint=f"位置不对：输入 {ids}，pad_id={pad_id}，应该得到 {want[:, 0, 0].tolist()}",
                   shapes=[((B, S), f"形状应该是 (B, 1, 1, S) = {(B, 1, 1, S)}，你返回的是 (B, S) = {(B, S)}。"
                                    "(B, S) 与 scores 的 (B, h, L, S) 按右端对齐广播时，B 会被对到 L 上——"
                                    "B == L 时不报错却悄悄算错；用 [:, None, None, :] 插入两个长度为 1 的轴")])


# ---------------------------------------------------------------- 9.2 (after attention: average the real tokens only)
# (token ids, pad id): PAD at the end, in the middle and at the front, a sentence without PAD, d_model != L
POOL_CASES = [([[1, 2, 3, 0]], 0), ([[5, 0, 7, 8, 0], [4, 4, 4, 4, 4]], 0), ([[3, 1, 1], [2, 2, 1]], 1)]


def _pool_wrongs(out, keep):
    """Typical wrong poolings of ``out`` (B, L, d) with ``keep`` (B, L) bool, each with why."""
    k = keep[..., None].to(out.dtype)  # (B, L, 1)
    n = k.sum(1)  # (B, 1): real tokens per sentence
    first = (torch.arange(keep.shape[1])[None, :] < keep.sum(1, keepdim=True))[..., None].to(out.dtype)
    before_pad = keep.int().cumprod(-1)[..., None].to(out.dtype)  # (B, L, 1): the rows before the first PAD
    return [(out.mean(1), "PAD 的行也算进了平均：PAD 作为 query 照样算出了一行输出，可它不是句子的内容"),
            ((out * k).sum(1) / keep.shape[1], "除以了 L：PAD 的行虽然被置 0，分母还得是这句话的真实 token 数"),
            ((out * k).sum(1), "只求了和，没有除以真实 token 数"),
            ((out * first).sum(1) / n, "按长度取了前几行：PAD 可能在句子中间，要逐个 token 看掩码"),
            ((out * before_pad).sum(1) / before_pad.sum(1), "只取了第一个 PAD 之前的行：PAD 可能在句子中间，"
                                                            "它后面的真实 token 也要算进平均，要逐个 token 看掩码"),
            ((out * (1 - k)).sum(1) / (1 - k).sum(1), "掩码的极性反了：你平均的是 PAD 的行。掩码里 True 是真实 token，"
                                                      "要留下的是 True 的行")]


@checker("ch09", "9.2", "注意力之后：只对真实 token 取平均")
def check_masked_mean(fn):
    """``fn(out (B, L, d_model), pad_mask (B, 1, 1, L) bool) -> (B, d_model)``: each sentence's mean over the output
    rows of its real tokens (True in the mask). Nothing is forbidden; ``out`` must not change; gradients reach it."""
    for ids, pad_id in POOL_CASES:
        token_ids = torch.tensor(ids)
        B, L = token_ids.shape
        out = torch.randn(B, L, 6, requires_grad=True)
        mask = padding_mask(token_ids, pad_id)  # (B, 1, 1, L)
        keep = mask[:, 0, 0]  # (B, L)
        got = expect_tensor(call(fn, out, mask, what="你的函数"), "你的平均")
        where = f"（token ids = {ids}，pad_id = {pad_id}）"
        want = (out * keep[..., None]).sum(1) / keep.sum(1, keepdim=True)  # (B, d_model)
        expect_shape(got, (B, 6), "你的平均", hint="每句话一个 d_model 维的向量：(B, d_model)" + where)
        if not same(got, want):
            name_the_match(got, _pool_wrongs(out.detach(), keep), suffix=where, same=same)
            expect_close(got, want, "你的平均", hint="只把掩码为 True 的行加起来，再除以 True 的个数" + where)
        expect_gradients(got, {"out": out}, "你的平均")


# ---------------------------------------------------------------- 9.3 (predict: PAD's word vector changes)
PAD_QUESTION = {"L": 4, "pad_at": 3, "d_model": 6, "n_heads": 2}  # You are welcome PAD
WARMUP_SENTENCE = "Nice to meet you PAD PAD"  # the self-check's sibling case: two PADs, one word vector


@functools.lru_cache(maxsize=None)
def pad_change_truth(L: int = PAD_QUESTION["L"], real: int = PAD_QUESTION["pad_at"]) -> tuple:
    """(query rows of the weights that change in some head, output rows that change) when only PAD's word vector
    changes under the padding mask, for ``real`` tokens followed by ``L - real`` PADs, measured on the chapter's sizes."""
    q = PAD_QUESTION
    with torch.random.fork_rng():
        torch.manual_seed(9)
        layer = MultiHeadAttention(q["d_model"], q["n_heads"], dropout=0.0).eval()
        x = torch.randn(1, L, q["d_model"])
        x[0, real:] = 0.0
        moved = x.clone()
        moved[0, real:] = torch.randn(q["d_model"])  # every PAD has the same word vector
        mask = padding_mask_from_lengths([real], L)
        with torch.no_grad():
            (o1, w1), (o2, w2) = (layer(t, t, t, mask, need_weights=True) for t in (x, moved))
    rows = lambda a, b: ((a - b).abs() > 1e-6).flatten(0, -3).any(0).any(-1).nonzero().flatten().tolist()  # noqa: E731
    return rows(w1, w2), rows(o1[:, None], o2[:, None])


def _pad_change(sentence: str) -> Which:
    """Exercise 9.3 for ``sentence`` (words, then PADs; the self-check asks the same for another sentence)."""
    words = sentence.split()
    L, real = len(words), words.index("PAD")
    pads = list(range(real, L))
    at, nth = "、".join(str(p) for p in pads), "、".join(str(p + 1) for p in pads)
    wrongs = (([], f"PAD 作为 query 的那一行照常算：它的 query 由 PAD 的词向量算出，会跟着变（第 {at} 行）"),
              (list(range(L)), "PAD 的 key 被掩码挡住，PAD 的 value 权重为 0：别的 query 的权重和输出都不受 PAD 的词向量影响"),
              ([p + 1 for p in pads], f"行号从 0 数：PAD 是第 {nth} 个 token，下标 {at}"),
              (list(range(real)), f"正好反了：前 {real} 行不受影响，变的是 PAD 自己的行"))
    if len(pads) > 1:
        wrongs += ((pads[:1], "每个 PAD 用的是同一个词向量：它换了，每个 PAD 的 query 都变了，它们的行都会变"),)
    hint = "PAD 的词向量会变成它的 query、key 和 value，三者各去了哪里？"
    return Which(  # answer = {"weights_rows": [...], "output_rows": [...]}
        id="9.3", chapter="ch09", title="预测：只改 PAD 的词向量，哪些行会变",
        right=lambda: dict(zip(("weights_rows", "output_rows"), pad_change_truth(L, real))), size=L,
        setting=f"“{sentence}”，用本章的 padding 掩码。只把 PAD 的词向量从 0 换成别的数，",
        asks={"weights_rows": Ask("注意力权重里哪些 query 行会变（任何一个头）？（行号从 0 数）",
                                  f"只有 PAD 自己的 query 变了：第 {at} 行的分数跟着变；PAD 的 key 被挡住，别的行的权重不变。",
                                  hint, wrongs),
              "output_rows": Ask("层的输出里哪些行会变？（行号从 0 数）",
                                 f"PAD 的 key 被挡住、value 的权重为 0，别的行都不受影响；只有 PAD 自己的行（第 {at} 行）的 query 变了。",
                                 hint, wrongs)})


PAD_CHANGE = _pad_change("You are welcome PAD")
check_pad_change = predict_which(PAD_CHANGE)
WARMUP = _pad_change(WARMUP_SENTENCE)
check_pad_change.__doc__ = """``answer = {"weights_rows": [...], "output_rows": [...]}``: for "You are welcome PAD" with the padding
mask, the query rows of the weights (in any head) and the rows of the output that change when only PAD's word
vector changes."""


# ---------------------------------------------------------------- 9.4 (predict: how many attention weights are 0)
ZERO_QUESTION = {"B": 2, "h": 2, "L": 4, "lengths": [4, 2]}  # self-attention, key padding mask from the lengths


def zero_weights_truth(B, h, L, lengths) -> int:
    """Count the exact zeros of the layer's weights (B, h, L, L) under the key padding mask (computed, not assumed)."""
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
    n = as_int(answer, "你的答案")
    q = ZERO_QUESTION
    B, h, L, lengths = q["B"], q["h"], q["L"], q["lengths"]
    truth = zero_weights_truth(B, h, L, lengths)
    if n == truth:
        return
    name_the_match(n, [
        (sum(L * (L - n_real) for n_real in lengths), f"只数了一个头：每个头都有一张 (L, S) 的权重表，h = {h} 个头都一样被挡住"),
        (h * sum(L * L - n_real * n_real for n_real in lengths), "把 PAD 的 query 行也当成了全 0：padding mask 的形状是 "
         "(B, 1, 1, S)，只挡 key（列）；PAD 位置的 query 仍然对真实 token 分配权重，这一行加起来还是 1"),
        (h * sum(L - n_real for n_real in lengths), f"每个 PAD key 只数了一次：每个 query 行都挡住这个 key，一共 L = {L} 行"),
    ], prefix=f"{n} ", same=int.__eq__)
    raise Mistake(f"{n} 不对。提示：被挡住的是 key 的列；第二句有 {L - lengths[1]} 个 PAD key，每个 query、每个头都看不到它们")
