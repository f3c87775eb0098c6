"""Checkers for chapter 01, 多头注意力是什么.

1.1 shuffle only the Query, then only the Key/Value, of self-attention: which row of the old output is each row
    of the new one (a dict of two lists)
1.2 which output positions change when one Key/Value token or one Query token changes in cross-attention
    (a dict: reasoning)
1.3 the dependency matrix of a layer: which output positions move when each input token changes; first two
    predictions (causal self-attention and torch.roll, L = 4), then the function (a dict)
"""
from __future__ import annotations


import numpy as np
import torch
from torch import nn

from mha.layer import MultiHeadAttention
from mha.masks import causal_mask
from .answers import as_int, name_the_match, part, plain
from .records import RECORDS, Ask, Which, as_index_list, dict_answer, predict_which
from .running import call
from .verdicts import checker, Mistake, NotDone

__all__ = ["check_permuted_rows", "check_changed_positions_cross", "check_dependency_matrix"]


def positions(moved: torch.Tensor) -> list[int]:
    """The indices where a 1-d bool tensor is True."""
    return moved.nonzero().flatten().tolist()


def _layer(d_model: int = 4):
    return MultiHeadAttention(d_model, 2).eval()


# ---------------------------------------------------------------- 1.1 (shuffled tokens: Query alone, Key/Value alone)
PERMUTATION, WARMUP_PERMUTATION = [3, 0, 4, 1, 2], [2, 0, 3, 1]  # xp = x[:, p]: position t of xp holds token p[t] of x
SHUFFLED = {"queries": "layer(xp, x, x)", "keys": "layer(x, xp, xp)"}  # the exercise's two cases; the warm-up shuffles all


def permuted_rows(p=tuple(PERMUTATION), which: str = "all", d_model: int = 4) -> list[int]:
    """r with ``out == layer(x, x, x)[:, r]`` for ``xp = x[:, p]``, found by running the layer: ``out`` is
    ``layer(xp, x, x)`` (which="queries"), ``layer(x, xp, xp)`` ("keys") or ``layer(xp, xp, xp)`` ("all")."""
    layer, x = _layer(d_model), torch.randn(1, len(p), d_model)
    xp = x[:, list(p)]
    q, kv = (xp if which in ("queries", "all") else x), (xp if which in ("keys", "all") else x)
    with torch.no_grad():
        y, out = layer(x, x, x)[0], layer(q, kv, kv)[0]  # (L, d_model)
    return [int((y - row).abs().sum(-1).argmin()) for row in out]


def _one_based(wrongs, L: int) -> tuple:
    """The typical wrong answers counted from 1, each named with what it is once 1 is taken off."""
    return tuple(([n + 1 for n in w], f"位置编号从 0 开始数（0 到 {L - 1}），你的答案像是从 1 开始数的；减 1 之后是 {w}，"
                  f"也不对：{why}") for w, why in wrongs)


def _all_permuted(p: list) -> Which:
    """The self-check's warm-up: every input shuffled, ``layer(xp, xp, xp)``. Its words explain one row, never the
    general rule: the exercise asks the Query and the Key/Value halves of the same question."""
    L, inverse = len(p), torch.tensor(p).argsort().tolist()
    row0 = f"y2 的第 0 行属于 x2 的第 0 个 token，也就是 x 的第 {p[0]} 个 token"
    wrongs = ((list(range(L)), "以为打乱之后输出还是原来的顺序：输出的每一行属于一个 query token，token 换了位置，"
                               "它那一行输出也跟着换了位置"),
              (inverse, f"方向反了（这是 p 的逆）：{row0}，r[0] 应是 {p[0]}，不是 {inverse[0]}"))
    return Which(
        "1.1", "ch01", "打乱 token 的顺序，输出怎样变", lambda: {"": permuted_rows(tuple(p))}, size=L, ordered=True,
        setting=(f"自注意力 `y = layer(x, x, x)`，x 的形状是 (1, {L}, 4)，没有掩码、没有位置编码。把 token 全部换个顺序："
                 f"`x2 = x[:, p]`，p = {p}，再算 `y2 = layer(x2, x2, x2)`。"),
        asks={"": Ask("y2 的第 t 行等于 y 的第 r[t] 行，r 是？",
                      f"{row0}；它看到的 key/value 还是那 {L} 个 token，所以这一行就是 y 的第 {p[0]} 行，r[0] = {p[0]}。"
                      "其余各行同理。",
                      f"r 应是 0–{L - 1} 的一个排列；y2 的第 0 行属于 x2 的第 0 个 token，它是 x 的哪一个 token？",
                      wrongs + _one_based(wrongs, L))})


def _query_or_kv(p: list) -> Which:
    """Exercise 1.1: only the Query shuffled (``layer(xp, x, x)``), then only the Key and Value together
    (``layer(x, xp, xp)``); the answer ``{"queries": r_q, "keys": r_k}``, each with ``out == y[:, r]``."""
    L, inverse, identity = len(p), torch.tensor(p).argsort().tolist(), list(range(len(p)))
    follows = "输出的第 t 行属于第 t 个 query"
    weighted = ("输出的每一行是它的 query 对全部 key/value 的加权和；加权和与求和顺序无关，权重跟着 key 一起换，"
                "key 和 value 一起换顺序，输出一行也不变")
    queries = ((inverse, f"方向反了（这是 p 的逆）：{follows}，也就是 xp 的第 t 个 token；它是 x 的哪一个 token？"),
               (identity, f"以为打乱 query 输出不变：{follows}，query 换了位置，它那一行输出也跟着换了位置"),
               (p[::-1], f"这是把 p 倒过来：r_q 不是倒序；{follows}，也就是 xp 的第 t 个 token"))
    keys = ((p, f"以为输出跟着 key 的顺序走：{weighted}"),
            (inverse, f"以为输出跟着 key 的顺序走（这还是 p 的逆）：{weighted}"))
    hint = f"答案应是 0–{L - 1} 的一个排列（y 的每一行恰好用一次）；"
    return Which(
        "1.1", "ch01", "打乱 token 的顺序，输出怎样变",
        lambda: {key: permuted_rows(tuple(p), key) for key in SHUFFLED}, size=L, ordered=True,
        setting=f"自注意力 `y = layer(x, x, x)`，x 的形状是 (1, {L}, 4)，没有掩码、没有位置编码；`xp = x[:, p]`，p = {p}。",
        asks={"queries": Ask(f"只打乱 Query：`{SHUFFLED['queries']}` 等于 `y[:, r_q]`，r_q 是？",
                             f"{follows}；xp 的第 t 个 token 是 x 的第 p[t] 个，key/value 没动，所以 r_q = p。",
                             hint + f"{follows}，也就是 xp 的第 t 个 token，它是 x 的哪一个 token？", queries + _one_based(queries, L)),
              "keys": Ask(f"只打乱 Key 和 Value（一起）：`{SHUFFLED['keys']}` 等于 `y[:, r_k]`，r_k 是？",
                          f"query 没动；{weighted}，所以 r_k = {identity}。",
                          hint + "输出的第 t 行用到了哪个 query、哪些 key/value？", keys + _one_based(keys, L))})


EXERCISE = _query_or_kv(PERMUTATION)
RECORDS[EXERCISE.id] = EXERCISE  # what tests and the self-check read; the checker below reads it too
WARMUP = _all_permuted(WARMUP_PERMUTATION)  # the self-check's sibling case: every input shuffled


@checker("ch01", EXERCISE.id, EXERCISE.title)
def check_permuted_rows(answer):
    """1.1: ``{"queries": r_q, "keys": r_k}``, each a list/tuple/tensor/array of L row numbers of y; the typical
    mistakes of the record are named, then a 1-based answer, the length, the range and a repeated row."""
    answer, truth, L = dict_answer(answer, EXERCISE.keys, '{"queries": [...], "keys": [...]}'), EXERCISE.right(), EXERCISE.size
    for key, ask in EXERCISE.asks.items():
        what = f'answer["{key}"]'
        if isinstance(answer[key], (set, frozenset)):
            raise Mistake(f"{what} 是一个集合，集合没有顺序；这里第 t 项说的是第 t 行，写成列表 [...]")
        got = as_index_list(part(answer[key], what), what)
        if got == truth[key]:
            continue
        name = f"{what} = {got}"
        name_the_match(got, ask.wrongs, prefix=f"{name}：", same=lambda a, b: a == list(b))
        if got == [n + 1 for n in truth[key]]:
            raise Mistake(f"{name}：位置编号从 0 开始数（0 到 {L - 1}），你的答案像是从 1 开始数的")
        if len(got) != L:
            raise Mistake(f"{name} 有 {len(got)} 个数：要写 {L} 个，输出的每一行一个")
        if any(n < 0 or n >= L for n in got):
            raise Mistake(f"{name} 超出了范围：y 只有 {L} 行（0 到 {L - 1}）")
        repeated = sorted({n for n in got if got.count(n) > 1})
        if repeated:
            raise Mistake(f"{name} 不是一个排列：y 的第 {repeated} 行用了不止一次；输出的 {L} 行各不相同，"
                          f"每一行恰好对应 y 的一行")
        raise Mistake(f"{name} 不对。提示：{ask.hint}")


# ---------------------------------------------------------------- 1.2 (cross-attention: change a Key/Value token or a Query token)
CROSS = (4, 6, 2, 1)  # (L, S, kv token replaced, q token replaced)
WARMUP_CROSS_AT = (5, 4, 2)  # the self-check's masked case: (L, S, kv token replaced under the (L, S) "0 to j" mask)


def cross_changed_positions(which: str, L: int, S: int, k: int, d_model: int = 4, mask=None) -> list[int]:
    """Output positions of ``layer(q, kv, kv, mask)`` that move when token ``k`` of ``which`` ("kv" or "q") is
    replaced (``mask``: True = may attend, (L, S); None: no mask)."""
    layer = _layer(d_model)
    q, kv = torch.randn(1, L, d_model), torch.randn(1, S, d_model)
    q2, kv2 = q.clone(), kv.clone()
    (kv2 if which == "kv" else q2)[0, k] = torch.randn(d_model)
    with torch.no_grad():
        return positions((layer(q2, kv2, kv2, mask) - layer(q, kv, kv, mask)).abs().amax(dim=-1)[0] > 1e-6)  # (L,)


def _cross(L: int, S: int, kv: int, q: int) -> Which:
    """Exercise 1.2: cross-attention without a mask, one Key/Value token and one Query token replaced."""
    return Which(  # {"change_kv": [...], "change_q": [...]}, positions from 0
        "1.2", "ch01", "交叉注意力：改一个 Key/Value 或一个 Query，哪些位置会变",
        lambda: {"change_kv": cross_changed_positions("kv", L, S, kv), "change_q": cross_changed_positions("q", L, S, q)},
        size=L, setting=f"交叉注意力 `layer(q, kv, kv)`：q 有 L = {L} 个 token，kv 有 S = {S} 个 token，没有掩码。",
        range_why=f"：输出的位置跟着 Query 走，只有 L = {L} 个；Key/Value 的 S = {S} 个位置不是输出的位置",
        asks={"change_kv": Ask(
            f"把 kv 里位置 {kv} 的 token（位置从 0 数）换掉，输出的哪些位置会变？",
            f"每个 query 都对全部 S 个 key/value 加权求和；改了其中一个，{L} 个输出全都会变。",
            f"哪些 query 会用到位置 {kv} 的 key/value？", (
                ([kv], f"把 Key/Value 的位置 {kv} 当成了输出的位置：每个 query 都对全部 S 个 key/value 加权求和，"
                       f"改了其中一个，所有 {L} 个输出都会变"),
                ([], "被换掉的 key/value 参与了每个 query 的加权求和，输出不会纹丝不动"))),
              "change_q": Ask(
            f"把 q 里位置 {q} 的 token（位置从 0 数）换掉，输出的哪些位置会变？",
            f"位置 j 的输出只用到 query j 和全部 key/value；别的 query 没变，只有位置 {q} 会变。",
            "位置 j 的输出用到了哪些 query？", (
                (list(range(L)), f"改一个 query 只影响它自己那一行输出：位置 j 的输出只用到 query j 和（没变的）全部 "
                                 f"key/value，所以只有位置 {q} 会变"),
                ([], f"位置 {q} 的 query 变了，它对 key 的打分和加权结果都会变，所以它的输出会变")))})


def _masked_cross(L: int, S: int, kv: int) -> Which:
    """The self-check's neighbour of 1.2: the same cross-attention with a mask, so that a replaced Key/Value token
    reaches no query (a PAD hidden from all of them) or only some (query j may see kv tokens 0 to j). Its words
    explain what the mask hides, never which outputs a Key/Value or a Query token reaches without one."""
    pad = S - 1
    hide_pad = torch.ones(L, S, dtype=torch.bool)
    hide_pad[:, pad] = False  # (L, S): no query may see the PAD
    upto = torch.ones(L, S, dtype=torch.bool).tril()  # (L, S): query j may see kv tokens 0..j
    unseen = "、".join(str(j) for j in range(kv))  # the queries that cannot see kv token ``kv``
    return Which(  # {"pad_kv": [...], "upto_kv": [...]}, positions from 0
        "1.2", "ch01", "交叉注意力加了掩码：改一个 Key/Value，哪些位置会变",
        lambda: {"pad_kv": cross_changed_positions("kv", L, S, pad, mask=hide_pad),
                 "upto_kv": cross_changed_positions("kv", L, S, kv, mask=upto)},
        size=L, setting=f"交叉注意力 `layer(q, kv, kv, mask)`：q 有 L = {L} 个 token，kv 有 S = {S} 个 token，"
                        "mask 为 True 的地方可以看。",
        range_why=f"：输出的位置跟着 Query 走，只有 L = {L} 个；Key/Value 的 S = {S} 个位置不是输出的位置",
        asks={"pad_kv": Ask(
            f"kv 的最后一个 token（位置 {pad}，位置从 0 数）是 PAD，mask 让每个 query 都看不到它。"
            "把这个 PAD 换成别的向量，输出的哪些位置会变？",
            "mask 把被挡住的 key 的分数换成一个绝对值极大的负数（例如 -1e9），softmax 之后每个 query 给它的权重都是 0：它的 value 乘的是 0，"
            "它的 key 也影响不了别的 key 的权重。换成什么向量，输出都纹丝不动。",
            f"哪些 query 看得到位置 {pad} 的 key/value？", (
                (list(range(L)), "这个 token 被掩码挡住了：每个 query 给它的权重都是 0，换掉它谁也感觉不到"),
                ([pad], f"把 Key/Value 的位置 {pad} 当成了输出的位置；而且这个 token 被挡住了，哪个输出都不会变"))),
              "upto_kv": Ask(
            f"换一个 mask：query j 只能看 kv 的位置 0 到 j（query {S - 1} 及以后看得到全部 {S} 个）。"
            f"把 kv 里位置 {kv} 的 token 换掉，输出的哪些位置会变？",
            f"位置 {kv} 的 key/value 只有 j ≥ {kv} 的 query 看得到：它们的输出会变；"
            f"query {unseen} 看不到它，输出不变。",
            f"mask 的哪几行在第 {kv} 列是 True？", (
                (list(range(L)), f"query {unseen} 只看得到 kv 的位置 0 到 j，位置 {kv} 不在里面：它们的输出不变"),
                ([kv], f"不只 query {kv}：query j 看的是 0 到 j，j 比 {kv} 大的 query 也看得到位置 {kv}"),
                (list(range(kv + 1)), f"方向反了：query j 看的是 kv 的 0 到 j，看得到位置 {kv} 的是 j ≥ {kv} 的 query"),
                (list(range(kv + 1, L)), f"0 到 j 包括 j 本身：query {kv} 也看得到位置 {kv}")))})


check_changed_positions_cross = predict_which(_cross(*CROSS))
WARMUP_CROSS = _masked_cross(*WARMUP_CROSS_AT)  # the self-check's neighbour: a mask decides which queries see the token


# ---------------------------------------------------------------- 1.3
THRESHOLD = 1e-6


def _outputs(f, x: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    """f(x2) - f(x), (B, L, d_model)."""
    with torch.no_grad():
        return f(x2) - f(x)


def _edited(x: torch.Tensor, edit) -> torch.Tensor:
    """A copy of x (never the caller's x) with ``edit(copy)`` applied."""
    x2 = x.clone()
    edit(x2)
    return x2


def _moved(f, x, x2, threshold=THRESHOLD) -> list[int]:
    """The output positions j where some number of f(x2) differs from f(x) by more than ``threshold``."""
    return positions(_outputs(f, x, x2).abs().amax(dim=(0, 2)) > threshold)


def _changed_positions_reference(f, x: torch.Tensor, k: int) -> list[int]:
    return _moved(f, x, _edited(x, lambda t: t[:, k].add_(1.0)))  # token k of every sentence, every feature


def _position_cases():
    """(description, f, x, k): the checker knows the truth for each by running it. Ordinary layers on random
    inputs first; then inputs built so that each typical wrong experiment (:func:`_wrong_experiments`) gives an
    answer different from the truth."""
    cases = []
    for B, L, d_model, k in [(1, 6, 4, 2), (3, 5, 8, 0), (2, 7, 6, 6)]:
        linear = nn.Linear(d_model, d_model)
        attn = MultiHeadAttention(d_model, 2).eval()
        for name, f in [
            ("torch.roll(x, 1, dims=1)", lambda t: torch.roll(t, 1, dims=1)),  # first: every change is +1
            ("nn.Linear", lambda t, linear=linear: linear(t)),
            ("MultiHeadAttention", lambda t, attn=attn: attn(t, t, t)),
            ("MultiHeadAttention + causal_mask", lambda t, attn=attn: attn(t, t, t, causal_mask(t.shape[1]))),
        ]:
            cases.append((name, f, torch.randn(B, L, d_model), k))
    m = torch.randn(4, 4)
    m = m - m.mean(dim=1, keepdim=True)  # rows summing to 0: every output vector t @ m sums to 0 over its features
    cases.append(("torch.roll(x @ M, 2, dims=1)（M 的每一行加起来是 0）",
                  lambda t: torch.roll(t @ m, 2, dims=1), torch.randn(2, 6, 4), 1))
    w = torch.tensor([0.0, 1.0, 1.0])[:, None, None]  # changing only the first sentence changes nothing
    cases.append(("x * w（第 0 句的权重 w 是 0，第 1、2 句是 1）", lambda t: t * w, torch.randn(3, 5, 4), 3))
    s = torch.tensor([1.0, -1.0])[:, None, None]  # a signed sum over the sentences cancels
    cases.append(("x * s（第 0 句乘 +1，第 1 句乘 −1）", lambda t: t * s, torch.randn(2, 5, 6), 0))
    cases.append(("-2 * x", lambda t: -2 * t, torch.randn(1, 4, 4), 2))  # every change < 0: .abs() is needed
    linear = nn.Linear(4, 4)
    ones = torch.randn(2, 6, 4)
    ones[:, 4] = 1.0  # token k is already all ones
    cases.append(("nn.Linear（这组 x 里位置 k 的 token 本来就全是 1）", lambda t: linear(t), ones, 4))
    zeros = torch.randn(2, 5, 4)
    zeros[:, 1] = 0.0  # token k is all zeros: multiplying it by 2 changes nothing
    cases.append(("nn.Linear（这组 x 里位置 k 的 token 本来全是 0）", lambda t: linear(t), zeros, 1))
    w_feat = torch.tensor([0.0, 1.0, 1.0, 1.0])  # feature 0 is ignored: bumping only it changes nothing
    cases.append(("torch.roll(x * w, 1, dims=1)（w 把第 0 个特征置零）", lambda t: torch.roll(t * w_feat, 1, dims=1),
                  torch.randn(2, 5, 4), 2))
    cases.append(("1e-4 * torch.roll(x, 1, dims=1)（变化量只有 1e-4）", lambda t: 1e-4 * torch.roll(t, 1, dims=1),
                  torch.randn(1, 5, 4), 3))
    signs = torch.randn(2, 5, 8).abs() + 0.5  # tokens 0, 2, 3 all positive: +1 leaves their negative part at 0
    signs[:, [1, 4]] -= 2.0 * signs[:, [1, 4]].amax()  # tokens 1, 4 all negative: +1 moves them
    cases.append((NEGATIVE_PART, lambda t: torch.roll(t.clamp(max=0.0), 1, dims=1), signs, 2))
    return cases


NEGATIVE_PART = "torch.roll(x.clamp(max=0), 1, dims=1)（只留下负数部分；位置 0、2、3 的 token 全是正数）"


SIGNED = ("把变化量带着正负号加在了一起：不同特征维（或不同句子）上的 +a 和 −a 会互相抵消，看起来就像没变；"
          "先取绝对值 .abs() 再汇总（或者用 != 比较每个数）")


def _wrong_experiments(f, x: torch.Tensor, k: int):
    """(answer of a typical wrong experiment, what it did wrong), in the order they are tried."""
    x2 = _edited(x, lambda t: t[:, k].add_(1.0))
    delta = _outputs(f, x, x2)  # (B, L, d_model)
    add = "要写 x2[:, k] = x2[:, k] + 1"
    yield (_moved(f, x, _edited(x, lambda t: t[:, k].copy_(-1.0 - t[:, k].abs()))), f"看起来你把位置 k = {k} 的 token "
           "换成了别的数（比如本章实验里的随机数），而不是在原值上加 1：这里的 f 只留下负数部分，全是正数的 token 加 1 "
           "之后还是正数，输出不变；换成随机数却会让它变。题目问的是“加 1”会让哪些输出位置变，"
           f"{add}")
    yield _moved(lambda t: t, x, x2, 0), "看起来你比较的是输入 x 和改过的 x，而不是两次的输出 f(x) 和 f(x2)"
    yield (_moved(f, x, _edited(x, lambda t: t[:, k].fill_(1.0))), f"看起来你把位置 k = {k} 的 token 设成了 1，而不是在原值上"
           f"加 1：这组 x 里位置 {k} 本来就全是 1，设成 1 等于没改；{add}")
    yield (_moved(f, x, _edited(x, lambda t: t[:, k].mul_(2.0))), f"看起来你把位置 k = {k} 的 token 乘了 2，而不是加 1：这组 x "
           f"里位置 {k} 本来全是 0，乘 2 等于没改；{add}")
    yield (_moved(f, x, _edited(x, lambda t: t[:, k, 0].add_(1.0))), "看起来你只改了 token 的一个特征维（x2[:, k, 0]），"
           "或者只比较了输出的一个特征维：这里的 f 恰好不看第 0 个特征；要给整个 token 的每个特征都加 1"
           "（x2[:, k] = x2[:, k] + 1），再比较输出的每一维")
    yield _moved(f, x, x2, 1e-3), "阈值太大了：这里的变化量只有约 1e-4，用 1e-3 判断就看不出来；题目要的阈值是 1e-6"
    yield (_moved(f, x, _edited(x, lambda t: t[0, k].add_(1.0))), "看起来你只改了第一句话（x2[0, k]），或者只比较了第一句的"
           "输出（delta[0]）；要改每一句话的位置 k（x2[:, k]），再比较每一句的输出")
    for moved in (delta.sum(dim=(0, 2)).abs() > THRESHOLD, delta.sum(dim=2).abs().amax(dim=0) > THRESHOLD,
                  delta.sum(dim=0).abs().amax(dim=1) > THRESHOLD, delta.sum(dim=(0, 2)) != 0):
        yield positions(moved), SIGNED
    yield (positions(delta.amax(dim=(0, 2)) > THRESHOLD),
           "没有取绝对值：输出变小（变化为负）的位置被漏掉了；要比较变化量的绝对值 .abs() 是否超过 1e-6")
    yield positions(delta.sum(dim=(0, 2)) > THRESHOLD), SIGNED
    if x.shape[1] != x.shape[2]:
        yield (positions(delta.abs().amax(dim=(0, 1)) > THRESHOLD), "你在位置这一维上取了最大值，得到的是“哪些特征维变了”；"
               "x 的形状是 (B, L, d_model)，位置是第 1 维，要在第 0 和第 2 维上汇总")


# ---------------------------------------------------------------- 1.3 (the dependency matrix, every k at once)
ONE_K = "看起来只做了一个 k；要的是 {L}×{L} 的 True/False 矩阵，对每个输入位置 k 都做一次实验，结果放进第 k 列"
LISTS = "看起来你返回的是每个 k 的“变化位置列表”"
PREDICTED_ONE_ROW = "看起来只写了一行；要写 {L} 行、每行 {L} 个 True/False（或 1/0），第 j 行第 k 列回答“改输入位置 k，输出位置 j 变不变”"
PREDICTED_LISTS = "看起来你写的是每一行“用到了哪些位置”的列表"


def as_bool_matrix(value, L: int, what: str, one_k: str = ONE_K, lists: str = LISTS) -> torch.Tensor:
    """An (L, L) answer of True/False (or 0/1): a tensor, an array or a list of rows, as a bool tensor; ``one_k``
    and ``lists`` name a 1-d answer and rows of different lengths (a function's result by default)."""
    one_k, lists = one_k.format(L=L), lists.format(L=L)
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value.copy()) if value.dtype.kind in "biuf" else value.tolist()
    if isinstance(value, (list, tuple)):
        rows = [r.tolist() if isinstance(r, (torch.Tensor, np.ndarray)) else r for r in value]
        if rows and not any(isinstance(r, (list, tuple, range)) for r in rows):
            raise Mistake(f"{what} 是一个一维的 list：{one_k}")
        if not all(isinstance(r, (list, tuple, range)) for r in rows):
            raise Mistake(f"{what} 应该是 {L}×{L} 的 True/False 矩阵（张量，或由 {L} 行组成的 list），有的行却不是 list")
        if len(rows) == L and any(len(r) != L for r in rows):
            raise Mistake(f"{what} 的行长短不一（{[len(r) for r in rows]}）：{lists}；"
                          f"要的是 {L}×{L} 的 True/False 矩阵，第 j 行第 k 列回答“改输入位置 k，输出位置 j 变不变”")
        if len(rows) != L or any(len(r) != L for r in rows):
            raise Mistake(f"{what} 应该是 {L}×{L} 的矩阵（L = {L}），却有 {len(rows)} 行")
        value = torch.tensor([[as_flag(v, what) for v in r] for r in rows], dtype=torch.bool).reshape(L, L)
    if not isinstance(value, torch.Tensor):
        raise Mistake(f"{what} 应该是 {L}×{L} 的 True/False 矩阵（张量或由 {L} 行组成的 list），却是 {type(value).__name__}")
    value = plain(value).detach()
    if value.is_complex() or value.dtype.is_floating_point and not torch.isfinite(value).all():
        raise Mistake(f"{what} 里有复数、NaN 或 inf；要的是 True/False（或 0/1）")
    if tuple(value.shape) != (L, L):
        hint = f"：{one_k}" if value.dim() == 1 else ""
        raise Mistake(f"{what} 的形状应该是 ({L}, {L})（L = {L}），实际是 {tuple(value.shape)}{hint}")
    if value.dtype != torch.bool:
        if not ((value == 0) | (value == 1)).all():
            raise Mistake(f"{what} 里有 0 和 1 以外的数；每一格只回答“变不变”：True/False 或 1/0（变化量本身不要）")
        value = value != 0
    return value


def as_flag(v, what: str) -> bool:
    """One cell of a True/False matrix: a bool, or the integer 0/1 (Python, numpy or 0-d torch)."""
    if isinstance(v, (bool, np.bool_)) or (isinstance(v, torch.Tensor) and v.dim() == 0 and v.dtype == torch.bool):
        return bool(v)
    n = as_int(v, f"{what} 的一格")
    if n not in (0, 1):
        raise Mistake(f"{what} 里有 {n}：每一格只回答“变不变”，写 True/False 或 1/0")
    return bool(n)


def _matrix(columns: list, L: int) -> torch.Tensor:
    """(L, L) bool: column k marks the output positions listed in ``columns[k]``."""
    m = torch.zeros(L, L, dtype=torch.bool)
    for k, rows in enumerate(columns):
        m[rows, k] = True
    return m


def _dependency_mistakes(f, x: torch.Tensor):
    """(matrix of a typical wrong experiment, what it did wrong at the first input position where it differs)."""
    L = x.shape[1]
    truth = [_changed_positions_reference(f, x, k) for k in range(L)]
    per_k = [list(_wrong_experiments(f, x, k)) for k in range(L)]  # the same mistakes, in the same order, for every k
    for i in range(len(per_k[0])):
        columns = [per_k[k][i][0] for k in range(L)]
        first = next((k for k in range(L) if columns[k] != truth[k]), None)
        if first is not None:
            yield _matrix(columns, L), per_k[first][i][1]


def _show(m: torch.Tensor) -> str:
    return "[" + ", ".join("".join("1" if v else "0" for v in row) for row in m.tolist()) + "]"


# ---------------------------------------------------------------- 1.3 (predictions first: causal self-attention and roll, L = 4)
PREDICT_L = 4
PREDICTED = {"causal": "自注意力 + 因果掩码（位置 j 只看位置 0 到 j）", "roll": "torch.roll(x, 1, dims=1)"}
EXAMPLE_1_3 = '{"predict": {"causal": D1, "roll": D2}, "matrix": dependency_matrix}'


def predicted_functions(d_model: int = 4) -> dict:
    """The two functions whose dependency matrices the prompt asks to predict, as the chapter would build them."""
    attn = _layer(d_model)
    return {"causal": lambda t: attn(t, t, t, causal_mask(t.shape[1])), "roll": lambda t: torch.roll(t, 1, dims=1)}


def predicted_truth(L: int = PREDICT_L, d_model: int = 4) -> dict:
    """``{"causal": D1, "roll": D2}``, (L, L) bool each, found by running the reference experiment on the real
    functions (never typed in)."""
    x = torch.randn(2, L, d_model)
    return {key: _matrix([_changed_positions_reference(f, x, k) for k in range(L)], L)
            for key, f in predicted_functions(d_model).items()}


def _without(m: torch.Tensor, j: int, k: int) -> torch.Tensor:
    m = m.clone()
    m[j, k] = False
    return m


def _prediction_mistakes(key: str, truth: dict, got: dict):
    """(typical wrong prediction, what it gets wrong) for ``key``, built from the true matrices; ``got``: both
    predictions, to tell two swapped predictions from one copied into the wrong place."""
    L, other = PREDICT_L, "roll" if key == "causal" else "causal"
    eye, ones = torch.eye(L, dtype=torch.bool), torch.ones(L, L, dtype=torch.bool)
    rows_cols = "行是输出位置 j，列是输入位置 k"
    yield truth[other], f"这是 {PREDICTED[other]} 的依赖矩阵，" + (
        "看起来 \"causal\" 和 \"roll\" 两个预测放反了" if torch.equal(got[other], truth[key]) else f"不是 {PREDICTED[key]} 的")
    if key == "causal":
        c = truth["causal"]
        yield (c.T, f"写成了上三角：{rows_cols}。因果掩码让输出位置 j 只看输入位置 0 到 j，所以第 j 行在 k ≤ j 处是 True，"
                    "是下三角（含对角线）；上三角是把行和列放反了")
        yield (ones, "全是 True：这是没有掩码的自注意力。因果掩码让位置 j 只看位置 0 到 j，改 j 后面的 token（k > j），"
                     "位置 j 的输出不会变")
        yield (c & ~eye, "少了对角线：位置 j 看的是位置 0 到 j，包括它自己；改位置 j 的 token，它自己的输出当然会变")
        yield (~c, f"标出的是 k > j 的格子（上三角，不含对角线）。若标的是被因果掩码挡住的位置：D 的 True 说的是“会变”，"
                   f"也就是输出位置 j 用到了输入位置 k，被挡住的位置恰好不会让它变；若是把行和列放反了：{rows_cols}，"
                   "位置 j 看的是 0 到 j（含 j 自己），应是下三角含对角线")
        yield (eye, "只有对角线：那是 nn.Linear 的 D（每个位置只看自己）；加了因果掩码的自注意力里，位置 j 还看得到它前面的 "
                    "0 到 j − 1")
        yield (c | torch.roll(c, 1, dims=1),  # k <= j + 1
               "每一行多标了一格（k = j + 1）：位置从 0 数，位置 j 看的是 0 到 j；看起来你把某处的编号从 1 数了")
        return
    r = truth["roll"]
    wrap = (0, L - 1)  # output 0 holds input L - 1
    back = ("torch.roll(x, 1, dims=1) 把每个 token 往后挪一格：输入位置 k 的 token 去了输出位置 k + 1，"
            "所以输出位置 j 放的是输入位置 j − 1 的 token，D[j, j − 1] 是 True")
    yield (r.T, f"方向反了：你标的是 D[j, j + 1]。{back}（输出位置 0 放的是输入位置 {L - 1} 的）。"
                "“token k 去了哪”要看第 k 列里哪一行是 True，不是第 k 行")
    yield (eye, f"只有对角线：这是 nn.Linear 那样每个位置只看自己；{back}")
    yield (_without(r, *wrap), f"少了绕回的那一格：torch.roll 是循环移位，挪出末尾的 token 回到开头，输出位置 0 放的是输入位置 "
                               f"{L - 1} 的 token，所以 D[0, {L - 1}] 是 True")
    yield (_without(r.T, *reversed(wrap)), f"方向反了，也少了绕回的那一格：{back}；位置 0 放的是位置 {L - 1} 的 token（循环移位）")
    yield ((r.int() @ r.int()) > 0, f"挪了两格（D[j, j − 2]）：{back}；看起来你在从 1 数和从 0 数之间多换算了一次")
    yield ones, "全是 True：roll 不混合位置，每个输出位置只放着一个输入 token，改别的 token 它不会变"
    yield ~ones, "全是 False：roll 不改数值，但 token 换了位置：改输入位置 k，输出位置 k + 1 就会变"


def _check_predictions(predict) -> None:
    """``{"causal": D1, "roll": D2}``: the two 4 x 4 matrices predicted before the experiment."""
    what = 'answer["predict"]'
    if not isinstance(predict, dict) or not set(PREDICTED) <= set(predict):
        got = f"，缺少键 {[k for k in PREDICTED if k not in predict]}" if isinstance(predict, dict) else \
            f"，却收到了 {type(predict).__name__}"
        raise Mistake(f'{what} 应该是字典 {{"causal": D1, "roll": D2}}（两个 {PREDICT_L}×{PREDICT_L} 的预测）{got}')
    if any(predict[k] is Ellipsis for k in PREDICTED):
        raise NotDone()
    names = {key: f'{what}["{key}"]' for key in PREDICTED}
    got = {key: as_bool_matrix(part(predict[key], name), PREDICT_L, f"{name}（L = {PREDICT_L}）", one_k=PREDICTED_ONE_ROW,
                               lists=PREDICTED_LISTS) for key, name in names.items()}
    truth = predicted_truth()
    for key, name in names.items():
        if torch.equal(got[key], truth[key]):
            continue
        where = f"{name} = {_show(got[key])}（每一项是一行，1 = 会变）"
        name_the_match(got[key], _prediction_mistakes(key, truth, got), prefix=f"{where}：")
        j, k = (got[key] != truth[key]).nonzero()[0].tolist()
        raise Mistake(f"{where}：第 {j} 行第 {k} 列（从 0 数）不对：{PREDICTED[key]} 里，给输入位置 {k} 加 1 后，"
                      f"输出位置 {j} " + ("会变" if truth[key][j, k] else "不会变") + "；想一想输出位置 j 用到了哪些输入位置")


def _check_function(fn) -> None:
    """``fn(f, x) -> (L, L)`` True/False: entry [j][k] says whether output position j of ``f`` moves (some number by
    more than 1e-6, in any sentence) when 1 is added to every feature of input token k in every sentence of x."""
    for name, f, x, _ in _position_cases():
        L = x.shape[1]
        what = f"dependency_matrix({name}, x {tuple(x.shape)})"
        got = as_bool_matrix(call(fn, f, x, what="dependency_matrix"), L, f"{what} 的返回值")
        truth = _matrix([_changed_positions_reference(f, x, k) for k in range(L)], L)
        if torch.equal(got, truth):
            continue
        where = f"{what} 返回 {_show(got)}，应为 {_show(truth)}（每一项是一行，1 = 会变）"
        if torch.equal(got, truth.T):
            raise Mistake(f"{where}：行和列放反了。第 j 行第 k 列回答“改输入位置 k，输出位置 j 变不变”：改位置 k 的结果放进第 k 列")
        name_the_match(got, _dependency_mistakes(f, x), prefix=f"{where}：")
        if not got.any() and truth.any():
            raise Mistake(f"{where}：两次输出完全一样，说明“改过的 x”其实没改到，或者两次都用了同一个张量")
        j, k = (got != truth).nonzero()[0].tolist()
        raise Mistake(f"{where}：第 {j} 行第 {k} 列（从 0 数）不对：给输入位置 {k} 加 1 后，输出位置 {j} "
                      + ("会变" if truth[j, k] else "不会变"))


@checker("ch01", "1.3", "依赖矩阵：每个输出位置用到了哪些输入位置")
def check_dependency_matrix(answer):
    """1.3: ``{"predict": {"causal": D1, "roll": D2}, "matrix": dependency_matrix}``. The predictions (4 x 4 each,
    causal self-attention and ``torch.roll(x, 1, dims=1)``) are checked first, their typical mistakes named; then
    the function, as :func:`_check_function` says."""
    if callable(answer) and not isinstance(answer, dict):
        raise Mistake(f"答案应该是字典 {EXAMPLE_1_3}：先写两个预测（L = {PREDICT_L}），再把函数放进 \"matrix\"；"
                      f"收到的是一个{'类' if isinstance(answer, type) else '函数'}")
    answer = dict_answer(answer, ("predict", "matrix"), EXAMPLE_1_3)
    _check_predictions(answer["predict"])
    _check_function(answer["matrix"])
