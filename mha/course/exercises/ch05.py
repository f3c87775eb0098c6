"""Checkers for chapter 05, 步骤 4：并行 Attention.

* 5.1 ``check_rows_that_move``: which output rows of causal attention change when a query, a key's mask or a
  value changes;
* 5.2 predict the variance of a dot product when q has variance 4, after the usual scale, and the divisor that
  brings it to 1;
* 5.3 ``check_attention_weights``: attention with a (B, h, L, S) boolean mask that returns ``(output, weights)``,
  for d_v != d_k and L != S; every query sees at least one key (shapes that broadcast and fully masked rows are
  chapter 10's).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from mha.masks import causal_mask, padding_mask_from_lengths
from mha.steps import attention_scores, fused_attention, masked_softmax, attention
from .answers import as_number, expect_close, expect_shape, expect_tensor, is_plain_tensor, name_the_match
from .ch01 import positions
from .gradients import expect_gradients
from .guard import SDPA
from .records import Ask, Which, attend, predict_which
from .running import call
from .verdicts import checker, Mistake

__all__ = ["check_rows_that_move", "check_dot_product_variance_scaled",
           "check_attention_weights"]


# ---------------------------------------------------------------- 5.1 (which output rows change: causal self-attention)
ROWS_L, ASKED = 5, (3, 1, 4)  # (query changed, key hidden, value changed)
# The self-check's warm-up (value changed, key hidden): no causal mask, the last token a PAD that a padding mask
# hides from every query. Every query sees every real key there, so its answers (all rows, no row, all rows) are
# no substitution into the exercise's causal rule, which it never states; it asks no query (its own row either way).
WARMUP_ASKED = (2, 3)


def _mover(keep: torch.Tensor, d: int = 4):
    """``moved(what, at)``: the output rows of ``mha.attention(q, k, v, keep)`` (one sentence, one head, random
    q, k, v) that move when query ``at`` (``what="q"``) or value ``at`` (``"v"``) is replaced, or when key ``at``
    is hidden from every query as well (``"hide"``)."""
    L = keep.size(-1)
    q, k, v = (torch.randn(1, 1, L, d) for _ in range(3))
    with torch.no_grad():
        base = attention(q, k, v, keep)[0]

    def moved(what: str, at: int) -> list[int]:
        q2, v2, keep2 = q.clone(), v.clone(), keep.clone()
        if what == "q":
            q2[..., at, :] = torch.randn(d)
        elif what == "v":
            v2[..., at, :] = torch.randn(d)
        else:
            keep2[..., at] = False
        with torch.no_grad():
            return positions(((attention(q2, k, v2, keep2)[0] - base).abs() > 1e-6)[0, 0].any(-1))
    return moved


def rows_that_move(q_at: int, hidden: int, v_at: int, L: int = ROWS_L, d: int = 4) -> dict:
    """Output rows of ``mha.attention(q, k, v, causal_mask(L))`` (one sentence, one head) that change when query
    ``q_at`` is replaced, when key ``hidden`` is hidden too, or when value ``v_at`` is replaced."""
    moved = _mover(causal_mask(L), d)  # (L, L), True = may attend
    return {"change_q": moved("q", q_at), "mask_key": moved("hide", hidden), "change_v": moved("v", v_at)}


def rows_that_move_padded(v_at: int, hidden: int, L: int = ROWS_L, d: int = 4) -> dict:
    """Output rows of ``mha.attention(q, k, v, padding_mask_from_lengths([L - 1], L))`` (no causal mask; the last
    key, a PAD, hidden from every query) that change when value ``v_at`` is replaced, when the PAD's value is
    replaced, or when key ``hidden`` is hidden too."""
    moved = _mover(padding_mask_from_lengths([L - 1], L), d)  # (1, 1, 1, L)
    return {"change_v": moved("v", v_at), "pad_v": moved("v", L - 1), "mask_key": moved("hide", hidden)}


def _rows(q_at: int, hidden: int, v_at: int) -> Which:
    """Exercise 5.1 for these three changes under the causal mask."""
    every = list(range(ROWS_L))
    return Which(
        "5.1", "ch05", "因果注意力里改一处，哪些输出行会变", lambda: rows_that_move(q_at, hidden, v_at), size=ROWS_L,
        setting=f"一句话、一个头的因果自注意力 `mha.attention(q, k, v, mha.causal_mask({ROWS_L}))`，L = {ROWS_L}，"
                "query t 只看 key 0..t（位置从 0 数）。",
        range_why=f"：L = {ROWS_L}，输出有 {ROWS_L} 行",
        asks={"change_q": Ask(
            f"把 query {q_at} 换成别的向量（k、v 和掩码不变），哪些输出行会变？", f"query {q_at} 只决定 scores 的第 {q_at} 行。",
            "scores 的第 t 行只用到哪个 query？", (
                (every, f"query {q_at} 只出现在 scores 的第 {q_at} 行：别的行的分数用的是它们自己的 query，它们的权重和输出都不变"),
                (every[q_at:], f"把 query 当成了 key：后面的 query 看到的是 key 和 value，换掉 query {q_at} 只改第 {q_at} 行"))),
              "mask_key": Ask(
            f"在因果掩码之外再挡住 key {hidden}（每个 query 都不许看 key {hidden}），哪些输出行会变？",
            f"query t 看 key 0..t：第 {hidden} 行及以后原本都给 key {hidden} 分了权重，现在要重新分配。",
            f"哪些 query 原本看得到 key {hidden}？", (
                ([hidden], f"挡住 key {hidden} 改的是 scores 的第 {hidden} 列：每个原本看得到它的 query"
                           f"（第 {hidden} 行及以后）的权重都要重新分配"),
                (every, f"因果掩码下 query t 只看 key 0..t：query 0 本来就看不到 key {hidden}，不受影响"),
                (every[:hidden + 1], "因果掩码的方向反了：query t 看的是 key 0..t（自己和前面的），"
                                     f"看得到 key {hidden} 的是它自己和后面的 query"),
                (every[hidden + 1:], f"漏了第 {hidden} 行：query {hidden} 也看得到 key {hidden}（它自己），"
                                     f"挡住 key {hidden} 之后它的权重也要重新分配"))),
              "change_v": Ask(
            f"只把 value {v_at} 换成别的向量，哪些输出行会变？", f"query t 看 key 0..t：只有 query {v_at} 及以后看得到 key {v_at}。",
            f"哪些 query 给 value {v_at} 的权重不是 0？", (
                (every, f"因果掩码下只有 query {v_at} 及以后看得到 key {v_at}；别的行给它的权重是 0"),
                ([], f"query {v_at} 给 value {v_at} 的权重不是 0，这一行的加权和会变"),
                (every[:v_at], "因果掩码的方向反了：query t 看的是 key 0..t（自己和前面的）")))})


def _padded_rows(v_at: int, hidden: int) -> Which:
    """The self-check's warm-up for 5.1: the same kind of change without a causal mask, the last token a PAD."""
    every, pad = list(range(ROWS_L)), ROWS_L - 1
    return Which(
        "5.1", "ch05", "padding 掩码下改一处，哪些输出行会变", lambda: rows_that_move_padded(v_at, hidden), size=ROWS_L,
        setting=f"一句话、一个头的自注意力，这次不用因果掩码。L = {ROWS_L}，最后一个 token（位置 {pad}，从 0 数）是 PAD，"
                f"padding 掩码 `keep = mha.padding_mask_from_lengths([{pad}], {ROWS_L})` 对每个 query 都挡住 key {pad}，"
                "`out = mha.attention(q, k, v, keep)[0]`。",
        range_why=f"：L = {ROWS_L}，输出有 {ROWS_L} 行",
        asks={"change_v": Ask(
            f"只把 value {v_at} 换成别的向量（q、k 和掩码不变），哪些输出行会变？",
            f"每个 query 都看得到 key {v_at}，给它的权重都不是 0：{ROWS_L} 行的加权和都用到 value {v_at}，都会变。",
            f"哪些 query 给 value {v_at} 的权重不是 0？", (
                ([v_at], f"value {v_at} 不只进第 {v_at} 行：输出的每一行都是所有看得到的 value 的加权和，"
                         f"这里每个 query 都给 key {v_at} 分了权重"),
                (every[:pad], f"padding 掩码挡的是 key {pad}（scores 的第 {pad} 列），不是 query {pad}："
                              f"PAD 位置的 query 照样看 key 0..{pad - 1}，它那一行也用到 value {v_at}"))),
              "pad_v": Ask(
            f"只把 PAD 的 value（value {pad}）换成别的向量，哪些输出行会变？",
            f"每个 query 给 key {pad} 的权重都是 0：0 乘什么都是 0，value {pad} 换成什么，输出都不变。",
            f"哪些 query 给 value {pad} 的权重不是 0？", (
                ([pad], f"输出第 {pad} 行是 query {pad} 的加权和；掩码对它也挡住了 key {pad}，它给 value {pad} 的权重是 0"),
                (every, f"没有因果掩码，不等于每个 key 都看得见：padding 掩码让每个 query 给 key {pad} 的权重都是 0"))),
              "mask_key": Ask(
            f"q、k、v 都不变，在 padding 掩码之外再挡住 key {hidden}（每个 query 都不许看 key {hidden}），哪些输出行会变？",
            f"每个 query 原本都给 key {hidden} 分了权重；挡住它，每一行的权重都要在剩下的 key 之间重新分配。",
            f"哪些 query 原本看得到 key {hidden}？", (
                ([hidden], f"挡住 key {hidden} 改的是 scores 的第 {hidden} 列，不是第 {hidden} 行："
                           f"原本看得到 key {hidden} 的 query 都要重新分配权重"),
                (every[:pad], f"PAD 位置的 query {pad} 也在算：掩码只挡住 key {pad}，它原本也给 key {hidden} 分了权重")))})


check_rows_that_move = predict_which(_rows(*ASKED))
WARMUP = _padded_rows(*WARMUP_ASKED)


# ---------------------------------------------------------------- 5.2 (the inputs do not have variance 1)
VARIANCE_D_K = 100  # the warm-up's d_k: its answer (100) is no part of the graded answer (256, 4, 16)

# How close a variance must be to the theory (the exercise's 256 and 4). The prompt asks for the exact values, and
# they pass; a measurement passes only when it is careful. The sample variance of N draws of q·k
# (a sum of 64 products, nearly normal) has a relative standard error of about
# sqrt(2 / N) — 1.4 % for N = 10 000 draws — so a measurement with ten thousand draws or more lands
# within 5 % with probability above 99.9 %. Numbers 6 % or more off, like (240, 0.9), are a rough
# guess or a tiny experiment, not the variance: they fail with a message saying they are close.
VARIANCE_RTOL = 0.05
SCALED_QUESTION = {"d_k": 64, "var_q": 4.0, "var_k": 1.0}


@checker("ch05", "5.2", "输入的方差不是 1 时，点积的方差和该除的数")
def check_dot_product_variance_scaled(answer):
    """``answer = (Var(q·k), Var(q·k / sqrt(d_k)), c)`` for d_k = 64, q entries of variance 4, k entries of
    variance 1 (independent, mean 0); c is the number q·k must be divided by to get variance 1."""
    if (isinstance(answer, np.ndarray) or is_plain_tensor(answer)) and tuple(answer.shape) == (3,):
        answer = list(answer)
    if not isinstance(answer, (tuple, list)) or len(answer) != 3:
        raise Mistake("答案应该是三个数组成的元组：(缩放前的方差, 除以 √d_k 之后的方差, 让方差回到 1 要除的数)")
    raw, scaled, divisor = (as_number(v, name) for v, name in zip(answer, ("缩放前的方差", "除以 √d_k 之后的方差", "要除的数")))
    q = SCALED_QUESTION
    d, vq, vk = q["d_k"], q["var_q"], q["var_k"]
    want_raw = d * vq * vk  # Var(Σ q_j k_j) = Σ Var(q_j) Var(k_j)
    want_scaled, want_div = want_raw / d, math.sqrt(want_raw)
    near = lambda x, want: abs(x - want) <= VARIANCE_RTOL * abs(want)  # noqa: E731
    for got, want, what, named in [
        (raw, want_raw, f"缩放前的方差 {raw:g} 不对。提示：q·k = Σ q_j k_j，{d} 个独立项，每一项的方差是 Var(q_j)·Var(k_j)", [
            (d, f"缩放前填了 {raw:g} = d_k：那是各分量方差都为 1 时的答案；这里 q 的分量方差是 {vq:g}，"
                f"每一项 q_j k_j 的方差是 Var(q_j)·Var(k_j) = {vq * vk:g}"),
            (d * math.sqrt(vq), f"缩放前填了 {raw:g}：用了 q 的标准差 {math.sqrt(vq):g}；每一项的方差是方差之积 Var(q_j)·Var(k_j)")]),
        (scaled, want_scaled, f"除以 √d_k 之后的方差 {scaled:g} 不对。提示：Var(X / c) = Var(X) / c²，这里 c = √{d}", [
            (1.0, f"除以 √d_k 之后的方差不是 1：√d_k 只除掉了项数 d_k 带来的增长，分量本身的方差 {vq * vk:g} 还在"),
            (want_raw / math.sqrt(d), f"除以 √d_k 之后的方差填了 {scaled:g}：方差只除了 √d_k；除以 c 时方差除以 c²，"
                                      f"这里是除以 d_k = {d}")]),
        (divisor, want_div, f"要除的数 {divisor:g} 不对。提示：让 Var(q·k / c) = Var(q·k) / c² 等于 1", [
            (want_raw, f"要除的数填了 {divisor:g}：那是方差本身；除以 c 时方差除以 c²，所以 c 是方差的平方根"),
            (math.sqrt(d), f"要除的数填了 √d_k = {divisor:g}：那只够让方差为 1 的输入回到 1；这里还要除掉 √({vq * vk:g})")])]:
        if not near(got, want):
            name_the_match(got, named, same=near)
            raise Mistake(what)


# ---------------------------------------------------------------- 5.3 (d_v != d_k, weights too, (B, h, L, S) masks)
def _matches(out, candidate) -> bool:
    """Same shape and values as ``candidate`` (float32 or float64 answers alike; NaN matches NaN)."""
    return (is_plain_tensor(out) and out.is_floating_point() and out.shape == candidate.shape
            and torch.allclose(out.detach().double(), candidate.detach().double(), atol=1e-4, rtol=1e-3, equal_nan=True))


# (B, h, L, S, d_k, d_v): L != S, d_k != d_v, and sqrt(d_k) != sqrt(d_v), so every width has to be read
# from the right tensor. The second shape changes every size, so nothing may be hard-coded.
WEIGHTS_SHAPES = [(2, 3, 4, 6, 5, 7), (3, 2, 3, 5, 8, 2)]
WEIGHTS_FORBID = (SDPA, torch.nn.MultiheadAttention, attention, fused_attention, masked_softmax, attention_scores)


def _qkv_dv(B, h, L, S, d_k, d_v, requires_grad=False):
    q, k, v = torch.randn(B, h, L, d_k) * 2.0, torch.randn(B, h, S, d_k) * 2.0, torch.randn(B, h, S, d_v)
    return tuple(t.requires_grad_(requires_grad) for t in (q, k, v))


def _weights_masks(B, h, L, S):
    """``[(what, mask)]``: no mask and three (B, h, L, S) boolean masks (True = may attend), each row with at
    least one visible key: padding with a PAD in the middle, causal with L != S, and one that differs between
    heads and queries."""
    pad = torch.ones(B, 1, 1, S, dtype=torch.bool)
    pad[0, ..., 1] = False  # a PAD in the middle of sentence 1
    pad[1:, ..., S - 2:] = False  # the others end with two PADs
    mixed = torch.rand(B, h, L, S) < 0.5
    mixed[..., 0] |= ~mixed.any(dim=-1)  # a query that saw nothing sees key 0
    mixed[0, 0, 0], mixed[0, 1, 0] = True, False  # heads differ
    mixed[0, 1, 0, -1] = True
    return [("不带掩码", None),
            ("padding 掩码（句中也有 PAD）", pad.expand(B, h, L, S).clone()),
            ("因果掩码（L ≠ S）", causal_mask(L, S).expand(B, h, L, S).clone()),
            ("每个头、每个 query 都不同的掩码", mixed)]


def _two_tensors(out, where):
    """The answer is ``(output, weights)``: two tensors (plain, finite)."""
    if isinstance(out, torch.Tensor):
        raise Mistake(f"{where}只返回了一个张量；这道题要返回两个：(output, weights)")
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise Mistake(f"{where}应该返回 (output, weights) 两个张量，却返回了 {type(out).__name__}"
                      + (f"（长度 {len(out)}）" if isinstance(out, (tuple, list)) else ""))
    for name, t in zip(("output", "weights"), out):  # NaN is named here, before any other check looks at the values
        if is_plain_tensor(t) and t.is_floating_point() and torch.isnan(t).any():
            raise Mistake(f"{where}的 {name} 里有 NaN：这里每个 query 至少看得到一个 key，正确的算法不会出 NaN；"
                          "看看被挡住的分数填的是什么（NaN？），有没有 -inf 乘 0 或 -inf 减 -inf")
    return expect_tensor(out[0], f"{where}的 output"), expect_tensor(out[1], f"{where}的 weights")


def _call_dv(fn, q, k, v, mask):
    return call(fn, q, k, v, mask, what="你的 attention 函数", forbid=WEIGHTS_FORBID)


def _name_weights_mistake(out, weights, q, k, v, mask, where):
    """Name the typical mistakes, judged on the weights (and the output) of one case."""
    d_k, d_v = q.size(-1), v.size(-1)
    ref_out, ref_w = attention(q, k, v, mask)
    if weights.shape == ref_out.shape and out.shape == ref_w.shape and ref_w.shape != ref_out.shape:
        raise Mistake(f"{where}：output 和 weights 的顺序反了：先返回 output {tuple(ref_out.shape)}，再返回 weights {tuple(ref_w.shape)}")
    expect_shape(weights, ref_w.shape, f"{where}的 weights", hint="(B, h, L, S)：每个 query 一行，每个 key 一列")
    expect_shape(out, ref_out.shape, f"{where}的 output",
                 hint=f"(B, h, L, S) 的权重乘 (B, h, S, d_v) 的 V，最后一维是 d_v = {d_v}，不是 d_k = {d_k}")
    if all(torch.allclose(a.detach().double(), b.detach().double(), atol=1e-5, rtol=1e-4)
           for a, b in ((weights, ref_w), (out, ref_out))):  # expect_close's tolerance: the answer passes this case
        return
    wrongs = [(dict(scale=math.sqrt(d_v)), f"除以了 √d_v：缩放看的是 Query 和 Key 的宽度 d_k = q.size(-1) = {d_k}，"
                                           f"不是 V 的宽度 d_v = {d_v}"),
              (dict(scale=1.0), "忘了除以 √d_k"), (dict(scale=float(d_k)), "除以的是 d_k，应该除以 √d_k")]
    if mask is None:
        wrongs += [(dict(dim=dim), f"softmax 沿错了轴（dim={dim}，{axis}）：要沿最后一维（Key 轴，dim=-1）做，"
                                   "让每个 Query 的一行权重加起来等于 1") for dim, axis in ((-2, "Query 轴"), (1, "头的轴"))]
    else:
        inverted = "掩码方向反了：True 表示“可以看”，要挡住的是 False 的位置"
        wrongs += [(dict(invert=True), inverted), (dict(invert=True, zero=False), inverted),
                   (dict(use_mask=False), "没有用上掩码：weights 和不带掩码时一样"),
                   (dict(fill=False), "在 softmax 之后才挡：被挡住的权重是 0 了，可剩下的一行加起来不到 1；"
                                      "要在 softmax 之前把被挡住的分数换成一个很小的数")]
        small = {0.0: "填成了 0（scores * mask 也是这样）：e^0 = 1", -10.0: "填了 −10：e^−10 ≈ 4.5e-5"}
        wrongs += [(dict(fill_value=value, zero=zero),
                    f"被挡住的分数{what}，不是 0。填的数不够小：0 或 −10 不会让 e^score 变成 0，被挡住的 key 仍在 softmax "
                    "的分母里占一份，分走了别的 key 的权重；要填一个小到 e^score 在浮点数里就等于 0 的数")
                   for value, what in small.items() for zero in (False, True)]
    name_the_match(weights, ((attend(q.detach(), k.detach(), v.detach(), mask, **{"zero": True, **switches})[1], why)
                             for switches, why in wrongs), prefix=f"{where}：", same=_matches)
    if _matches(weights, ref_w.transpose(-2, -1)):
        raise Mistake(f"{where}：weights 被转置了：一行属于一个 query，一列属于一个 key")


@checker("ch05", "5.3", "带掩码的注意力：d_v ≠ d_k，同时返回权重")
def check_attention_weights(fn):
    """``fn(q, k, v, mask=None) -> (output, weights)``: q (B, h, L, d_k), k (B, h, S, d_k), v (B, h, S, d_v);
    mask None or a (B, h, L, S) boolean tensor, True = may attend, with at least one visible key per query.
    Gradients reach q, k and v with the right values. Forbidden: :data:`WEIGHTS_FORBID`, as the prompt says."""
    for shape in WEIGHTS_SHAPES:
        B, h, L, S, d_k, d_v = shape
        q, k, v = _qkv_dv(*shape)
        for what, mask in _weights_masks(B, h, L, S):
            where = f"(B, h, L, S, d_k, d_v) = {shape}、{what}时"
            got = _call_dv(fn, q, k, v, mask)
            out, weights = _two_tensors(got, where)
            _name_weights_mistake(out, weights, q, k, v, mask, where)
            ref_out, ref_w = attention(q, k, v, mask)
            expect_close(weights, ref_w, f"{where}的 weights", hint="softmax(Q Kᵀ / √d_k)，被挡住的位置恰好是 0")
            expect_close(out, ref_out, f"{where}的 output", hint="output = weights @ V")

    # a layer trains through attention: the gradients reach q, k and v, with the reference's values
    shape = WEIGHTS_SHAPES[0]
    q, k, v = _qkv_dv(*shape, requires_grad=True)
    mask = _weights_masks(*shape[:4])[-1][1]  # different for every head and query
    where = "q、k、v 需要梯度时"
    out, weights = _two_tensors(_call_dv(fn, q, k, v, mask), where)
    ref_out, ref_w = attention(q, k, v, mask)
    expect_close(out, ref_out, f"{where}的 output")
    expect_gradients(out, {"q": q, "k": k, "v": v}, "你的 attention 函数的 output")
    g_out, g_w = torch.randn_like(ref_out), torch.randn_like(ref_w)
    grads = torch.autograd.grad((out * g_out).sum() + (weights * g_w).sum(), (q, k, v))  # all reached: see above
    want = torch.autograd.grad((ref_out * g_out).sum() + (ref_w * g_w).sum(), (q, k, v))
    for name, g, w in zip("qkv", grads, want):
        expect_close(g, w, f"{name} 的梯度", hint="weights 和 output 都要留在计算图里，用 masked_fill 而不是原地赋值")
