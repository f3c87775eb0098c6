"""Checkers for chapter 10, masks and the three attentions of the Transformer.

* 10.1 a causal mask with a sliding window (each query sees only its last w keys),
* 10.2 the decoder's self-attention mask straight from token ids (PAD anywhere), no mask builders, in both
  conventions: ours (B, 1, L, L), True = may attend, and nn.MultiheadAttention's (B·h, L, L), True = not allowed,
* 10.3 predict which row of a (B, S) mask masks scores[b, i, t] when it is handed over as (B, S) or (B, 1, S),
* 10.4 a KV-cache step: where the causal mask is aligned.
"""
from __future__ import annotations

import torch

from mha.masks import (causal_mask, normalize_mask, padding_mask, padding_mask_from_lengths, to_torch_attn_mask,
                       to_torch_key_padding_mask)
from mha.steps import apply_causal
from .answers import as_int, as_parts, part
from .records import as_index_list, as_names, check_mask, dict_answer
from .running import call
from .verdicts import checker, Mistake

__all__ = ["check_window_mask", "check_decoder_mask", "check_mask_alignment", "check_cache_step_mask"]

# what a forbidden mask builder's verdict suggests instead (the generic hint speaks of attention: view, @, softmax)
MASK_HINT = "请用比较运算（<、>=、==、!=）、torch.tril 和 &、|、~ 这些基本运算自己搭出掩码"


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
    """``fn(L, w) -> (L, L) bool``: query i may see key j iff i - w < j <= i (w keys, itself included)."""
    for L, w in WINDOW_CASES:
        out = call(fn, L, w, what="你的窗口掩码函数", forbid=(causal_mask, apply_causal), shortcut_hint=MASK_HINT)
        check_mask(out, window_mask(L, w), f"window_mask({L}, {w})", hint="行是 query t，列是 key s：(L, L)", named=[
            (_band(L, -(L - 1), 0), "这是普通的因果掩码：你没有用窗口 w，query t 还能看到 t − w 及更早的 key。"
                                    "窗口只留最近的 w 个 key（含自己）"),
            (_band(L, -w, 0), "窗口多了一个：query t 看到了 t − w 到 t，共 w + 1 个 key；含自己在内应该正好 w 个：t − w < s ≤ t"),
            (_band(L, -(w - 2), 0), "窗口少了一个：含自己在内应该正好 w 个 key（t − w < s ≤ t）"),
            (_band(L, -(w - 1), -1), "把对角线挡住了：query t 可以看它自己（s = t），窗口是 t − w < s ≤ t"),
            (_band(L, -w, -1), "把对角线挡住了（窗口整体往前挪了一格）：query t 可以看它自己，窗口是 t − w < s ≤ t"),
            (_band(L, -(w - 1), w - 1), "窗口向两边展开了：query t 也看到了 s > t 的未来 key。因果掩码只许往前看，窗口在对角线的左边（含对角线）"),
            (_band(L, 0, w - 1), "窗口朝向反了：你让 query t 看 t 到 t + w − 1（未来），应该是 t − w + 1 到 t")],
            bad_hint=f"(query, key) 的表应该是 {window_mask(L, w).int().tolist()}")


# ---------------------------------------------------------------- 10.2 (reworked) decoder masks from token ids, both conventions

# (token ids, pad id): PAD at the end, in the middle and at the front; pad ids 0, 1, 3 with real ids below and
# above them; L = 1; a row that is all PAD; left padding. (The first case is also the web self-check's sentence.)
DECODER_CASES = [
    ([[2, 0, 5, 7, 0], [6, 7, 8, 9, 0]], 0),             # PAD in the middle (first: PAD rows and columns differ)
    ([[1, 4, 6], [1, 5, 0]], 0),                         # the chapter's decoder batch
    ([[5, 3, 0, 3, 2, 1], [3, 3, 4, 0, 3, 3]], 3),       # PAD id 3 at the front and in the middle, real id 0
    ([[7], [1]], 1),                                     # L = 1, the second sentence all PAD
    ([[0, 9, 1, 1], [4, 1, 2, 1], [1, 1, 5, 6]], 1),     # PAD id 1, a real token with id 0, left padding
]
# n_heads for each case: B != h wherever B > 1 and the sentences differ, so a head-major (B·h) order cannot pass
DECODER_HEADS = [3, 3, 4, 3, 2]
TORCH_WHAT = "给 nn.MultiheadAttention 的 attn_mask"


def torch_attn_mask(ours: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Our (B, 1, L, S) mask (True = may attend) as ``nn.MultiheadAttention``'s attn_mask: (B·h, L, S),
    True = not allowed, sentence b's head i at index b·h + i."""
    B, _, L, S = ours.shape
    return ~ours.expand(B, n_heads, L, S).reshape(B * n_heads, L, S)  # (B·h, L, S)


def _check_ours(out, token_ids, pad_id, where) -> torch.Tensor:
    """The first mask, ours: (B, 1, L, L) bool, True = may attend; returns the right one."""
    B, L = token_ids.shape
    keep = token_ids != pad_id  # (B, L)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    pad_cols = keep[:, None, None, :]  # PAD hides a column (key)
    upto_first_pad = keep.int().cumprod(dim=-1).bool()  # real tokens only before the first PAD
    by_length = torch.arange(L)[None, :] < keep.sum(dim=-1, keepdim=True)  # the first (number of real tokens)
    want = pad_cols & causal
    check_mask(out, want, f"{where}（第一个，mha 的约定）",
               hint="(B, 1, 1, L) 的 padding 部分与 (L, L) 的因果部分广播，得到 (B, 1, L, L)",
               bad_hint="query t 能看 key s 当且仅当 s ≤ t 且第 s 个 token 不是 PAD",
               shapes=[((B, L, L), f"第一个掩码的形状应该是 (B, 1, L, L) = {(B, 1, L, L)}，你返回的是 (B, L, L)。少了头的轴："
                                   "和 scores 的 (B, h, L, L) 右对齐广播时 B 会被对到 h 上；在第 1 维留一个长度为 1 的轴")], named=[
        ((token_ids != 0)[:, None, None, :] & causal, "你把 id 0 当成了 PAD；pad_id 不一定是 0，要和参数 pad_id 比较"),
        (by_length[:, None, None, :] & causal, "你按“真实 token 的个数”挡住了后面的位置，好像 PAD 都在句子末尾。"
                                               "PAD 可能在句子中间，要逐个 token 判断是不是 PAD（dec_ids != pad_id）"),
        (~keep[:, None, None, :] & causal, "padding 部分反了：你让 query 只看 PAD。True 应该是真实 token（dec_ids != pad_id）"),
        (keep[:, None, :, None] & causal, "PAD 挡住的应该是列（key），你挡住的是行（query）：padding 部分的形状是 (B, 1, 1, L)，不是 (B, 1, L, 1)"),
        ((keep[:, None, :, None] & pad_cols) & causal, "你把 PAD 的行也挡住了。padding 掩码只挡 key（列）；PAD 作为 query 的那一行照常算，之后不会被用到"),
        (pad_cols | causal, "用了“或”（|）而不是“与”（&）：key 既不能是 PAD，也不能在未来，两个条件都要满足"),
        (causal.expand(B, 1, L, L), "只有因果部分，PAD 那几列也必须是 False"),
        (pad_cols.expand(B, 1, L, L), "只有 padding 部分，对角线以上（未来）的位置也必须是 False"),
        (upto_first_pad[:, None, None, :] & causal, "你把第一个 PAD 之后的所有位置都挡住了（像是按长度算的）。PAD 可以出现在句子中间，"
                                                    "要逐个 token 判断是不是 PAD，PAD 后面的真实 token 仍然可以看"),
        (pad_cols & torch.ones(L, L, dtype=torch.bool).triu(), "因果部分取成了上三角：query t 只能看 s ≤ t，是下三角"),
        (pad_cols & causal.tril(-1), "把对角线也挡住了：一个真实 token 可以看它自己")])
    return want


def _check_theirs(out, ours, n_heads, where) -> None:
    """The second mask, nn.MultiheadAttention's attn_mask: (B·h, L, L) bool, True = not allowed, b·h + i."""
    B, _, L, _ = ours.shape
    what = f"{where}（第二个，{TORCH_WHAT}）"
    want = torch_attn_mask(ours, n_heads)
    head_major = ~ours[:, 0].repeat(n_heads, 1, 1)  # index i·B + b
    check_mask(out, want, what, hint="(B·h, L, L)：第 b 句第 i 个头是第 b·h + i 张",
               bad_hint="True 表示“不许看”：我们的掩码取反", shapes=[
        *((shape, f"{what}是 4 维的 {shape}：nn.MultiheadAttention 的 attn_mask 只收 (L, S) 或 (B·h, L, S) = "
                  f"{(B * n_heads, L, L)}，每句的每个头各一张，叠在第 0 维")
          for shape in ((B, n_heads, L, L), (B, 1, L, L))),
        ((B, L, L), f"{what}的形状是 (B, L, L) = {(B, L, L)}：少了头。nn.MultiheadAttention 要的是 (B·h, L, L) = "
                    f"{(B * n_heads, L, L)}，每句的 h 个头各一张（n_heads = {n_heads}）"),
        ((L, L) if B > 1 else None, f"{what}是一张 (L, L)：它对所有句子都一样，装不下每句不同位置的 PAD；"
                                    f"要给 (B·h, L, L) = {(B * n_heads, L, L)}")], named=[
        (~want, "没有取反：nn.MultiheadAttention 的布尔 attn_mask 里 True 表示“不许看”，和 mha 的约定正好相反；"
                "把第一个掩码取反（~）"),
        (head_major, "顺序错了：nn.MultiheadAttention 把第 b 句第 i 个头放在第 b·h + i 张（句子在外层、头在里层）；"
                     "你的是第 i·B + b 张（头在外层、句子在里层，例如 repeat(h, 1, 1) 就是这样排的）。"
                     "先 expand 成 (B, h, L, L) 再 reshape，或用 repeat_interleave(h, dim=0)"),
        (~head_major, "顺序错了，而且没有取反：第 b 句第 i 个头在第 b·h + i 张（句子在外层）；True 表示“不许看”")])


@checker("ch10", "10.2", "从 token id 直接得到解码器自注意力的掩码")
def check_decoder_mask(fn):
    """``fn(dec_ids (B, L) long, pad_id, n_heads) -> (ours, theirs)``: ``ours`` (B, 1, L, L) bool, query i may see
    key j iff j <= i and token j is not PAD; ``theirs`` the same rule as ``nn.MultiheadAttention``'s attn_mask,
    (B·h, L, L) bool, True = not allowed, sentence b's head i at b·h + i, without the mask builders of ``mha``."""
    for (ids, pad_id), n_heads in zip(DECODER_CASES, DECODER_HEADS):
        token_ids = torch.tensor(ids)
        got = call(fn, token_ids, pad_id, n_heads, what="你的掩码函数",
                   forbid=(padding_mask, padding_mask_from_lengths, causal_mask, apply_causal, normalize_mask,
                           to_torch_attn_mask, to_torch_key_padding_mask), shortcut_hint=MASK_HINT)
        if isinstance(got, torch.Tensor):
            raise Mistake("只返回了一个掩码；这道题要返回两个：(ours, theirs)，先是 mha 的 (B, 1, L, L)，"
                          "再是 nn.MultiheadAttention 的 (B·h, L, L)")
        ours, theirs = as_parts(got, 2, "应该返回两个掩码 (ours, theirs)")
        where = f"dec_ids = {ids}，pad_id = {pad_id}，n_heads = {n_heads} 时"
        want = _check_ours(ours, token_ids, pad_id, where)
        _check_theirs(theirs, want, n_heads, where)


# ---------------------------------------------------------------- 10.3 (a (B, S) mask that runs and masks the wrong rows)
CANDIDATES = ("m", "m[:, None]", "m[:, None, None]")  # ways to hand a (B, S) key padding mask to masked_fill
ALIGN_SIZE = 3  # B = h = L: every candidate broadcasts without an error
ALIGN_WARMUP = 4  # the self-check: a (S,) mask against scores with B = h = L = S = 4


def _expand(name: str, m: torch.Tensor) -> torch.Tensor:
    return {"m": m, "m[:, None]": m[:, None], "m[:, None, None]": m[:, None, None]}[name]


@torch.no_grad()
def rows_used(name: str, n: int = ALIGN_SIZE, S: int = 5) -> dict:
    """``{(b, i, t): r}``: the row r of a (B, S) mask that masks ``scores[b, i, t, :]`` when the mask is handed over as
    ``name`` and B = h = L = n; measured with a mask whose row r hides key r only."""
    m = ~torch.eye(n, S, dtype=torch.bool)  # (B, S): row r hides key r
    scores = torch.zeros(n, n, n, S).masked_fill(~_expand(name, m), 1.0)  # (B, h, L, S): 1 where hidden
    return {(b, i, t): int(scores[b, i, t].argmax()) for b in range(n) for i in range(n) for t in range(n)}


def right_candidates() -> frozenset:
    """The candidates that mask every scores[b, i, t] with row b, measured by :func:`rows_used` (B = h = L: the
    others run there too, and pick row t or i)."""
    return frozenset(name for name in CANDIDATES if all(r == b for (b, _, _), r in rows_used(name).items()))


ROW_WHY = {
    ("m", "b"): "右对齐：(B, S) 的第 0 轴对到的是 scores 的倒数第 2 轴，也就是 query 的轴 L，不是 batch",
    ("m", "i"): "(B, S) 只补了前两根轴：它的第 0 轴对到 query 的轴 L，头的轴是补出来的 1",
    ("m[:, None]", "b"): "(B, 1, S) 右对齐成 (1, B, 1, S)：B 对到了头的轴 h，不是 batch",
    ("m[:, None]", "t"): "(B, 1, S) 的中间那个 1 对到 query 的轴；B 再往左一根，对到头的轴 h",
}


@checker("ch10", "10.3", "预测：(B, S) 的掩码挡错了哪一行")
def check_mask_alignment(answer):
    """``answer = {"m": fn, "m[:, None]": fn, "right": [names]}``: with B = h = L, ``fn(b, i, t)`` returns the row of
    the (B, S) mask ``m`` that masks ``scores[b, i, t, :]`` when the mask is handed over as that expression;
    ``"right"`` names the expressions of :data:`CANDIDATES` that are right for every B, h, L."""
    dict_answer(answer, ("m", "m[:, None]", "right"), '{"m": 函数, "m[:, None]": 函数, "right": [...]}')
    for name in ("m", "m[:, None]"):
        want = rows_used(name)
        got = {k: as_int(call(answer[name], *k, what=f'answer["{name}"]'), f'answer["{name}"]{k}') for k in want}
        if got == want:
            continue
        key = next(k for k in want if got[k] != want[k])
        for axis, which in enumerate("bit"):
            if all(got[k] == k[axis] for k in want) and (name, which) in ROW_WHY:
                raise Mistake(f'answer["{name}"]{key} = {got[key]}（你返回的总是 {which}）：{ROW_WHY[name, which]}')
        raise Mistake(f'answer["{name}"]{key} = {got[key]} 不对：从右往左逐轴对齐，缺的轴补 1，先写出两者对齐后的形状')
    said = as_names(answer["right"], CANDIDATES, 'answer["right"]')
    truth = right_candidates()
    for name in sorted(said - truth):
        raise Mistake(f'answer["right"] 里的 {name} 不对：' + ("它挡的是第 t 行（query 的轴），B = L 时不报错，却挡错了位置"
                                                          if name == "m" else "它的 B 对到了头的轴 h，B = h 时不报错，却挡错了位置"))
    for name in sorted(truth - said):
        raise Mistake(f'answer["right"] 漏了 {name}：(B, 1, 1, S) 的 B 对到 batch，两个 1 对到头和 query')


# ---------------------------------------------------------------- 10.4 (a KV-cache step: the mask's alignment)
BUGGY_S = 5  # the question: one new query after 4 cached tokens, with a top-left aligned tril
BUGGY_WARMUP = (2, 6)  # the self-check's (L, S): the last of two new queries after 4 cached tokens


@checker("ch10", "10.4", "KV cache 的一步：因果掩码要对齐右下角")
def check_cache_step_mask(answer):
    """``answer = {"buggy_sees": [key positions], "mask": fn}``: which keys the new token (L = 1, S = 5) may see
    with ``torch.ones(1, 5).tril().bool()`` (top-left aligned), and ``fn(L, S) -> (L, S) bool`` for L new
    queries after S - L cached tokens (query r sits at position S - L + r)."""
    dict_answer(answer, ("buggy_sees", "mask"), '{"buggy_sees": [...], "mask": 函数}')
    sees = sorted(set(as_index_list(part(answer["buggy_sees"], 'answer["buggy_sees"]'), 'answer["buggy_sees"]')))
    truth = torch.ones(1, BUGGY_S).tril().bool()[0].nonzero().flatten().tolist()
    if sees != truth:
        if sees == list(range(BUGGY_S)):
            raise Mistake(f'answer["buggy_sees"] = {sees} 是正确掩码下的结果；tril() 默认从左上角对齐，'
                          f"(1, {BUGGY_S}) 的第 0 行只保留第 0 列")
        raise Mistake(f'answer["buggy_sees"] = {sees} 不对：算一算 torch.ones(1, {BUGGY_S}).tril() 的第 0 行')
    fn = part(answer["mask"], 'answer["mask"]')
    for L, S in [(2, 6), (1, 5), (3, 3), (1, 1), (4, 7)]:
        out = call(fn, L, S, what="你的掩码函数", forbid=(causal_mask, apply_causal), shortcut_hint=MASK_HINT)
        ones = torch.ones(L, S, dtype=torch.bool)
        check_mask(out, causal_mask(L, S), f"mask({L}, {S})", hint="(L, S)：每个新 query 一行，cache 里和新来的全部 key 一列",
                   bad_hint="query r 能看 key s 当且仅当 s ≤ (S − L) + r", named=[
            (ones.tril(), f"对齐在左上角（tril() 没有偏移）：新 query r 在位置 {S - L} + r，它能看 0 到 {S - L} + r 的 key；"
                          "用 tril(diagonal=S − L)"),
            *([(ones.tril(diagonal=L - S), "偏移符号反了：你用的是 tril(diagonal=L − S)；新 query 在 cache 之后，"
                                           "它们能看的 key 更多，要往右上挪：tril(diagonal=S − L)")] if L != S else []),
            *([(ones, "全是 True：L > 1 时新来的 query 之间仍要遮住后面的那些")] if L > 1 else [])])
