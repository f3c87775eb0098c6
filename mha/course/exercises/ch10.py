"""Checkers for chapter 10, masks and the three attentions of the Transformer.

* 10.1 a causal mask with a sliding window (each query sees only its last w keys),
* 10.2 the decoder's self-attention mask straight from token ids (PAD anywhere), no mask builders,
* 10.3 predict every shape in cross-attention with L != S,
* 10.4 a KV-cache step: where the causal mask is aligned.

The answer keys come from the course package (:mod:`mha.masks`, :mod:`mha.steps`), computed by
the checker; the student's code runs under :func:`call`, which forbids the shortcuts.
"""
from __future__ import annotations

import torch

from mha.layer import MultiHeadAttention
from mha.masks import causal_mask, normalize_mask, padding_mask, padding_mask_from_lengths
from mha.steps import apply_causal, attention_scores, merge_heads, project, attention, split_heads
from .answers import expect_shape, expect_tensor, name_the_match
from .guard import PREDICT_SHAPES
from .records import Exercise, predict_shapes
from .running import call
from .verdicts import checker, Mistake

__all__ = ["check_window_mask", "check_decoder_mask",
           "check_cross_attention_shapes", "check_cache_step_mask"]


def _as_bool(out: torch.Tensor) -> torch.Tensor:
    """Where a mask-like answer is non-zero (the answer itself when it is already bool)."""
    return out if out.dtype == torch.bool else out.ne(0)


# ---------------------------------------------------------------- 10.2 padding & causal

# (token ids, pad id, L): the causal argument is (L, S); L = S, and L < S (a decoder that has
# S - L earlier tokens cached), each with two different (L, S) causal masks.
COMBINE_CASES = [
    ([[1, 2, 3, 0]], 0, 4),
    ([[5, 6, 7, 0, 0], [4, 0, 0, 0, 0], [1, 2, 3, 4, 5]], 0, 5),
    ([[7, 8, 9, 9, 2, 1], [3, 1, 4, 1, 1, 1]], 1, 3),
    ([[2, 0, 5, 0, 0], [6, 7, 8, 9, 0]], 0, 2),
]


def _combine_causals(L: int, S: int):
    """The causal arguments a case is tried with: two different (L, S) masks when L < S."""
    bottom_right = causal_mask(L, S)  # the last query sees every key (KV cache)
    if L == S:
        return [bottom_right]
    return [bottom_right, torch.ones(L, S, dtype=torch.bool).tril()]  # aligned top left


# ---------------------------------------------------------------- 10.1 (reworked) causal mask with a window

# (L, w): windows narrower than L, w = 1 (only itself), and w >= L (the plain causal mask)
WINDOW_CASES = [(5, 2), (6, 3), (4, 1), (3, 5), (7, 4), (1, 1), (8, 8)]


def window_mask(L: int, w: int) -> torch.Tensor:
    """(L, L) bool: query i may see key j iff i - w < j <= i (itself and the w - 1 keys before it)."""
    return causal_mask(L) & ~causal_mask(L).tril(-w)


def _band(L: int, lo: int, hi: int) -> torch.Tensor:
    """(L, L) bool: True where lo <= j - i <= hi."""
    d = torch.arange(L)[None, :] - torch.arange(L)[:, None]  # j - i
    return (d >= lo) & (d <= hi)


@checker("ch10", "10.1", "带窗口的因果掩码")
def check_window_mask(fn):
    """``fn(L, w) -> (L, L) bool``: query i may see key j iff i - w < j <= i (w keys, itself included).

    Accepted: exactly shape (L, L) and dtype torch.bool, for several (L, w), w >= L included.
    Forbidden: ``mha.causal_mask`` (and the step that applies it).
    """
    for L, w in WINDOW_CASES:
        out = expect_tensor(call(fn, L, w, what="你的窗口掩码函数", forbid=(causal_mask, apply_causal)),
                            f"window_mask({L}, {w})")
        expect_shape(out, (L, L), f"window_mask({L}, {w})", hint="行是 query t，列是 key s：(L, L)")
        want = window_mask(L, w)
        got = _as_bool(out)
        if torch.equal(got, want):
            if out.dtype != torch.bool:
                raise Mistake(f"window_mask({L}, {w}) 的位置都对了，但 dtype 是 {out.dtype}，要求 torch.bool："
                              "`masked_fill(~mask, ...)` 需要 bool：对整数张量 `~` 是按位取反（~1 == -2），对浮点张量 `~` 直接报错")
            continue
        where = f"window_mask({L}, {w})"
        named = [
            (_band(L, -(L - 1), 0), f"{where} 是普通的因果掩码：你没有用窗口 w，query t 还能看到 t − w 及更早的 key。"
                                    "窗口只留最近的 w 个 key（含自己）"),
            (_band(L, -w, 0), f"{where} 的窗口多了一个：query t 看到了 t − w 到 t，共 w + 1 个 key；"
                              "含自己在内应该正好 w 个：t − w < s ≤ t"),
            (_band(L, -(w - 2), 0), f"{where} 的窗口少了一个：含自己在内应该正好 w 个 key（t − w < s ≤ t）"),
            (_band(L, -(w - 1), -1), f"{where} 把对角线挡住了：query t 可以看它自己（s = t），窗口是 t − w < s ≤ t"),
            (_band(L, -w, -1), f"{where} 把对角线挡住了（窗口整体往前挪了一格）：query t 可以看它自己，窗口是 t − w < s ≤ t"),
            (_band(L, -(w - 1), w - 1), f"{where} 的窗口向两边展开了：query t 也看到了 s > t 的未来 key。"
                                        "因果掩码只许往前看，窗口在对角线的左边（含对角线）"),
            (_band(L, 0, w - 1), f"{where} 的窗口朝向反了：你让 query t 看 t 到 t + w − 1（未来），应该是 t − w + 1 到 t"),
            (~want, f"{where} 的极性反了：True 应该表示“可以看”。你标出的是被挡住的位置"),
        ]
        name_the_match(got, named)
        bad = (got != want).nonzero()[0].tolist()
        raise Mistake(f"{where} 在 (query, key) = {tuple(bad)} 处不对：应该是 {want.int().tolist()}，"
                      f"你得到的是 {got.int().tolist()}")


# ---------------------------------------------------------------- 10.2 (reworked) decoder mask from token ids

# (token ids, pad id): PAD at the end, in the middle and at the front; pad ids 0, 1, 3 with real ids
# below and above them; L = 1; a row that is all PAD.
DECODER_CASES = [
    ([[2, 0, 5, 7, 0], [6, 7, 8, 9, 0]], 0),           # PAD in the middle (first: PAD rows and columns differ)
    ([[1, 4, 6], [1, 5, 0]], 0),                       # the chapter's decoder batch
    ([[5, 3, 0, 3, 2, 1], [3, 3, 4, 0, 3, 3]], 3),     # PAD id 3 at the front and in the middle, real id 0
    ([[7], [1]], 1),                                   # L = 1, the second sentence all PAD
    ([[0, 9, 1, 1], [4, 1, 2, 1]], 1),                 # PAD id 1, a real token with id 0
]


@checker("ch10", "10.2", "从 token id 直接得到解码器自注意力的掩码")
def check_decoder_mask(fn):
    """``fn(dec_ids (B, L) long, pad_id) -> (B, 1, L, L) bool``: query i may see key j iff j <= i and
    token j is not PAD. Accepted: exactly (B, 1, L, L), dtype torch.bool. Forbidden: the builders
    ``mha.padding_mask``, ``mha.padding_mask_from_lengths``, ``mha.causal_mask`` (and the steps that
    apply or normalise masks)."""
    for ids, pad_id in DECODER_CASES:
        token_ids = torch.tensor(ids)
        B, L = token_ids.shape
        out = expect_tensor(call(fn, token_ids, pad_id, what="你的掩码函数",
                                 forbid=(padding_mask, padding_mask_from_lengths, causal_mask, apply_causal,
                                         normalize_mask)), "解码器的掩码")
        where = f"dec_ids = {ids}，pad_id = {pad_id}"
        if tuple(out.shape) == (B, L, L):
            raise Mistake(f"形状应该是 (B, 1, L, L) = {(B, 1, L, L)}，你返回的是 (B, L, L)。少了头的轴："
                          "和 scores 的 (B, h, L, L) 右对齐广播时 B 会被对到 h 上；在第 1 维留一个长度为 1 的轴")
        expect_shape(out, (B, 1, L, L), "解码器的掩码",
                     hint="(B, 1, 1, L) 的 padding 部分与 (L, L) 的因果部分广播，得到 (B, 1, L, L)")
        keep = token_ids != pad_id  # (B, L)
        causal = torch.ones(L, L, dtype=torch.bool).tril()
        pad_cols = keep[:, None, None, :]  # PAD hides a column (key)
        want = pad_cols & causal
        got = _as_bool(out)
        if torch.equal(got, want):
            if out.dtype != torch.bool:
                raise Mistake(f"位置都对了，但 dtype 是 {out.dtype}，要求 torch.bool；`!=` 和 `&` 本来就给出 bool")
            continue
        upto_first_pad = keep.int().cumprod(dim=-1).bool()  # real tokens only before the first PAD
        by_length = torch.arange(L)[None, :] < keep.sum(dim=-1, keepdim=True)  # the first (number of real tokens)
        zero_is_pad = token_ids != 0
        named = [
            (zero_is_pad[:, None, None, :] & causal, f"{where}：你把 id 0 当成了 PAD；pad_id 不一定是 0，要和参数 pad_id 比较"),
            (by_length[:, None, None, :] & causal,
             f"{where}：你按“真实 token 的个数”挡住了后面的位置，好像 PAD 都在句子末尾。PAD 可能在句子中间，"
             "要逐个 token 判断是不是 PAD（dec_ids != pad_id）"),
            (~keep[:, None, None, :] & causal, f"{where}：padding 部分反了：你让 query 只看 PAD。True 应该是真实 token（dec_ids != pad_id）"),
            (keep[:, None, :, None] & causal, f"{where}：PAD 挡住的应该是列（key），你挡住的是行（query）："
                                               "padding 部分的形状是 (B, 1, 1, L)，不是 (B, 1, L, 1)"),
            ((keep[:, None, :, None] & keep[:, None, None, :]) & causal,
             f"{where}：你把 PAD 的行也挡住了。padding 掩码只挡 key（列）；PAD 作为 query 的那一行照常算，之后不会被用到"),
            (pad_cols | causal, f"{where}：用了“或”（|）而不是“与”（&）：key 既不能是 PAD，也不能在未来，两个条件都要满足"),
            (causal.expand(B, 1, L, L), f"{where}：只有因果部分，PAD 那几列也必须是 False"),
            (pad_cols.expand(B, 1, L, L), f"{where}：只有 padding 部分，对角线以上（未来）的位置也必须是 False"),
            (upto_first_pad[:, None, None, :] & causal,
             f"{where}：你把第一个 PAD 之后的所有位置都挡住了（像是按长度算的）。PAD 可以出现在句子中间，"
             "要逐个 token 判断是不是 PAD，PAD 后面的真实 token 仍然可以看"),
            (pad_cols & torch.ones(L, L, dtype=torch.bool).triu(), f"{where}：因果部分取成了上三角：query t 只能看 s ≤ t，是下三角"),
            (pad_cols & causal.tril(-1), f"{where}：把对角线也挡住了：一个真实 token 可以看它自己"),
            (~want, f"{where}：极性反了：True 应该表示“可以看”"),
        ]
        name_the_match(got, named)
        bad = (got != want).nonzero()[0].tolist()
        raise Mistake(f"{where}：在下标 {tuple(bad)}（batch, 1, query, key）处不对，应该是 {bool(want[tuple(bad)])}；"
                      "query t 能看 key s 当且仅当 s ≤ t 且第 s 个 token 不是 PAD")


# ---------------------------------------------------------------- 10.3 cross-attention shapes

KEYS = ("mask", "q", "k", "v", "scores", "weights", "heads", "output")


@torch.no_grad()
def cross_shapes(B, L, S, d_model, n_heads):
    """Every shape of cross-attention, by running the package's layer step by step."""
    layer = MultiHeadAttention(d_model, n_heads, dropout=0.0)
    y = torch.zeros(B, L, d_model)  # decoder side: the queries
    x = torch.zeros(B, S, d_model)  # encoder output: keys and values
    ids = torch.ones(B, S, dtype=torch.long)
    ids[:, -1] = 0  # one PAD per encoder sentence
    mask = padding_mask(ids, pad_id=0)  # (B, 1, 1, S)
    q = split_heads(project(y, layer.W_q), n_heads)
    k = split_heads(project(x, layer.W_k), n_heads)
    v = split_heads(project(x, layer.W_v), n_heads)
    scores = attention_scores(q, k)
    heads, weights = attention(q, k, v, mask)
    output = project(merge_heads(heads), layer.W_o)
    assert output.shape == layer(y, x, x, mask).shape
    tensors = dict(mask=mask, q=q, k=k, v=v, scores=scores, weights=weights, heads=heads, output=output)
    return {key: tuple(t.shape) for key, t in tensors.items()}


def _shape_mistake(key, got, want, B, L, S, d_model, n_heads):
    """A message that names the mistake behind a wrong shape."""
    d_k = d_model // n_heads
    h = n_heads
    base = f'shapes["{key}"] 应该是 {want}，你写的是 {got}'
    if key == "mask":
        if got == (B, 1, L, S):
            return base + ("：(B, 1, L, S) 是 padding mask 和因果掩码合并之后的形状；这里要的是编码器一侧的 padding mask 本身"
                           "（mha.padding_mask 的形状），它只和 key 有关，query 的轴写成 1。交叉注意力也不用因果掩码")
        if got in ((B, 1, L, L), (L, L)):
            return base + "：L×L 是解码器自注意力里因果掩码的形状；交叉注意力的 key 来自编码器，长度是 S，而且只用编码器的 padding mask"
        if got == (B, S):
            return base + "：(B, S) 会被右对齐到 (B, h, L, S) 的 (L, S) 上，要写成 (B, 1, 1, S)"
        if got in ((B, 1, 1, L), (B, L)):
            return base + "：padding mask 来自编码器一侧，屏蔽的是 key（长度 S），不是 decoder 的 query（长度 L）"
        if got == (B, h, L, S):
            return base + "：padding mask 和头无关，头的轴写成 1，靠广播用到每个头上"
    if key in ("q", "heads") and got == (B, h, S, d_k):
        return base + "：Q 来自 decoder，长度是 L；K、V 才来自编码器，长度是 S"
    if key in ("k", "v") and got == (B, h, L, d_k):
        return base + "：K、V 来自编码器的输出，长度是 S，不是 decoder 的 L"
    if key in ("q", "k", "v", "heads") and len(got) == 4 and got[-1] == d_model:
        return base + f"：分头后每个头只有 d_k = d_model / n_heads = {d_k} 维，不是 d_model = {d_model}"
    if key in ("q", "k", "v", "heads") and len(got) == 4 and got[1] != h and got[2] == h:
        return base + "：分头后要 transpose，把头的轴放到 token 的轴前面：(B, h, 长度, d_k)"
    if key in ("scores", "weights"):
        if got == (B, h, S, L):
            return base + "：行是 query（L 个），列是 key（S 个）；scores = Q Kᵀ 得到 (L, d_k) @ (d_k, S) = (L, S)"
        if got in ((B, h, L, L), (B, h, S, S)):
            return base + "：交叉注意力里 L ≠ S，scores 不是方阵，而是 (L, S)"
        if got == (B, L, S):
            return base + "：每个头有自己的一张权重表，别忘了头的轴 h"
    if key == "output":
        if got == (B, S, d_model):
            return base + "：输出的每一行对应一个 query，长度跟着 decoder 的 L，而不是编码器的 S"
        if got == (B, h, L, d_k):
            return base + "：最后还有 Concat 和 W^O，输出回到 (B, L, d_model)"
    return base


# fn(B, L, S, d_model, n_heads) -> {key: shape}: mask is the encoder padding mask (B, 1, 1, S); L is the decoder
# (query) length, S the encoder (key) length. Predicted: running mha or PyTorch's layers is forbidden.
check_cross_attention_shapes = predict_shapes(Exercise(
    "10.3", "ch10", "预测交叉注意力里的每个形状（L ≠ S）", "shape dict", right=cross_shapes, wrongs=None,
    hint=lambda key, got, want, B, L, S, d, h: (_shape_mistake(key, got, want, B, L, S, d, h)
                                               + f"（B={B}, L={L}, S={S}, d_model={d}, n_heads={h}）"),
    cases=((2, 3, 5, 8, 2), (1, 4, 7, 12, 3), (3, 6, 2, 16, 4)), forbids=PREDICT_SHAPES(), keys=KEYS))


# ---------------------------------------------------------------- 10.4 (a KV-cache step: the mask's alignment)
BUGGY_S = 5  # the question: one new query after 4 cached tokens, with a top-left aligned tril


@checker("ch10", "10.4", "KV cache 的一步：因果掩码要对齐右下角")
def check_cache_step_mask(answer):
    """``answer = {"buggy_sees": [key positions], "mask": fn}``: which keys the new token (L = 1, S = 5) may see
    with ``torch.ones(1, 5).tril().bool()`` (top-left aligned), and ``fn(L, S) -> (L, S) bool`` for L new
    queries after S - L cached tokens (query r sits at position S - L + r)."""
    from .answers import part
    from .verdicts import is_stub, NotDone
    if is_stub(answer):
        raise NotDone()
    if not isinstance(answer, dict) or not {"buggy_sees", "mask"} <= set(answer):
        raise Mistake('答案应该是字典 {"buggy_sees": [...], "mask": 函数}' + ("，缺少键" if isinstance(answer, dict)
                                                                           else f"，却收到了 {type(answer).__name__}"))
    from .ch01 import as_index_list
    sees = sorted(set(as_index_list(part(answer["buggy_sees"], 'answer["buggy_sees"]'), 'answer["buggy_sees"]')))
    truth = torch.ones(1, BUGGY_S).tril().bool()[0].nonzero().flatten().tolist()
    if sees != truth:
        if sees == list(range(BUGGY_S)):
            raise Mistake(f'answer["buggy_sees"] = {sees} 是正确掩码下的结果；tril() 默认从左上角对齐，'
                          f"(1, {BUGGY_S}) 的第 0 行只保留第 0 列")
        raise Mistake(f'answer["buggy_sees"] = {sees} 不对：算一算 torch.ones(1, {BUGGY_S}).tril() 的第 0 行')
    fn = part(answer["mask"], 'answer["mask"]')
    for L, S in [(2, 6), (1, 5), (3, 3), (1, 1), (4, 7)]:
        out = expect_tensor(call(fn, L, S, what="你的掩码函数", forbid=(causal_mask, apply_causal)), f"mask({L}, {S})")
        want = causal_mask(L, S)
        expect_shape(out, (L, S), f"mask({L}, {S})", hint="(L, S)：每个新 query 一行，cache 里和新来的全部 key 一列")
        got = out.bool() if out.dtype != torch.bool else out
        if torch.equal(got, want):
            if out.dtype != torch.bool:
                raise Mistake(f"mask({L}, {S}) 的位置都对了，但 dtype 是 {out.dtype}，要求 torch.bool")
            continue
        if torch.equal(got, torch.ones(L, S, dtype=torch.bool).tril()):
            raise Mistake(f"mask({L}, {S}) 对齐在左上角（tril() 没有偏移）：新 query r 在位置 {S - L} + r，"
                          f"它能看 0 到 {S - L} + r 的 key；用 tril(diagonal=S − L)")
        if L != S and torch.equal(got, torch.ones(L, S, dtype=torch.bool).tril(diagonal=L - S)):
            raise Mistake(f"mask({L}, {S}) 的偏移符号反了：你用的是 tril(diagonal=L − S)；新 query 在 cache 之后，"
                          "它们能看的 key 更多，要往右上挪：tril(diagonal=S − L)")
        if want.any() and not want.all() and torch.equal(got, ~want):
            raise Mistake(f"mask({L}, {S}) 的极性反了：True 表示可以看")
        if torch.equal(got, torch.ones(L, S, dtype=torch.bool)):
            raise Mistake(f"mask({L}, {S}) 全是 True：L > 1 时新来的 query 之间仍要遮住后面的那些")
        bad = (got != want).nonzero()[0].tolist()
        raise Mistake(f"mask({L}, {S}) 在 (query, key) = {tuple(bad)} 处不对：query r 能看 key s 当且仅当 s ≤ (S − L) + r")
