"""Checkers for chapter 05, 步骤 4：并行 Attention.

* 5.1 predict the shape of the scores ``Q K^T / sqrt(d_k)`` when L != S;
* 5.2 predict the variance of a dot product when q has variance 4, after the usual scale, and the divisor that
  brings it to 1 (``check_dot_product_variance`` grades the earlier task, unit variances);
* 5.3 implement scaled dot-product attention with a mask (no ``mha``, no ``F.scaled_dot_product_attention``).

Decision for 5.3 (documented in the notebook too): a query row whose keys are
*all* masked may come out as zeros (what :func:`mha.attention`
returns) or as the plain average of the values (what the lecture's
``masked_fill(mask == 0, -1e9)`` gives). NaN is not accepted: it spreads through
every later layer and turns the loss into NaN.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from mha.masks import causal_mask, padding_mask_from_lengths
from mha.steps import attention_scores, fused_attention, masked_softmax, attention
from ._core import (SDPA, Mistake, torch_mha, NotDone, as_number, as_shape, call, checker, expect_close,
                    expect_gradients, expect_shape, expect_tensor, is_plain_tensor, is_stub)

__all__ = ["check_scores_shape", "check_dot_product_variance", "check_attention", "check_dot_product_variance_scaled"]


# ---------------------------------------------------------------- 5.1
SCORES_CASE = dict(B=3, n_heads=4, L=5, S=7, d_model=64)  # d_k = 16


def scores_mistakes() -> list:
    """5.1's typical wrong shapes for SCORES_CASE, each with why it is wrong: ``[(shapes, explanation)]``.

    The checker names them; the self-check on the page offers the first shape of each as a wrong choice.
    """
    B, h, L, S = (SCORES_CASE[k] for k in ("B", "n_heads", "L", "S"))
    d_k = SCORES_CASE["d_model"] // h
    return [
        (((B, h, L, d_k),), "是 weights @ V 之后每个头输出的形状 (B, h, L, d_k)；"
                            "scores 的最后一维数的是 key 有几个（S），d_k 在 Q Kᵀ 里被求和消掉了"),
        (((B, h, S, L),), "把 L 和 S 放反了：scores 的一行属于一个 query，一列属于一个 key，所以是 (B, h, L, S)"),
        (((B, h, L, L), (B, h, S, S)), f"是一个方阵，但这里 query 有 L={L} 个、key 有 S={S} 个，"
                                        "scores 不一定是方阵（交叉注意力里 L ≠ S）"),
        (((B, L, S), (B, S, L)), "少了头这一维：每个头都有自己的一张分数表"),
        (((B, L, h, S), (h, B, L, S)), "的轴顺序不对：分头之后头的轴紧跟在 batch 后面，(B, h, ...)"),
        (((B, h, d_k, d_k),), "是 Kᵀ Q 那一类的形状；Q Kᵀ 是 (L, d_k) @ (d_k, S)，被消掉的是 d_k"),
    ]


@checker("ch05", "5.1", "预测 scores 的形状")
def check_scores_shape(answer):
    """``answer``: the shape of ``Q K^T / sqrt(d_k)`` for SCORES_CASE, as a tuple."""
    B, h, L, S = (SCORES_CASE[k] for k in ("B", "n_heads", "L", "S"))
    d_k = SCORES_CASE["d_model"] // h
    if is_stub(answer):
        raise NotDone()
    shape = as_shape(answer, "scores 的形状")
    right = tuple(attention_scores(torch.zeros(B, h, L, d_k), torch.zeros(B, h, S, d_k)).shape)  # (B, h, L, S)
    if shape == right:
        return
    for shapes, why in scores_mistakes():
        if shape in shapes:
            raise Mistake(f"{shape} {why}")
    raise Mistake(f"{shape} 不对。提示：每个头里 Q 是 (L, d_k)，Kᵀ 是 (d_k, S)，"
                  f"再带上前面的 (B, h) 两维；这里 B={B}, h={h}, L={L}, S={S}, d_k={d_k}")


# ---------------------------------------------------------------- 5.2
VARIANCE_D_K = 256

# How close a variance must be to the theory (256, 1). The prompt asks for the exact values, and
# they pass; a measurement passes only when it is careful. The sample variance of N draws of q·k
# (a sum of 256 products, nearly normal: kurtosis ≈ 3.02) has a relative standard error of about
# sqrt(2 / N) — 1.4 % for N = 10 000 draws — so a measurement with ten thousand draws or more lands
# within 5 % with probability above 99.9 %. Numbers 6 % or more off, like (240, 0.9), are a rough
# guess or a tiny experiment, not the variance: they fail with a message saying they are close.
VARIANCE_RTOL = 0.05
NEAR_MISS = 0.25  # within this (but not VARIANCE_RTOL) the verdict says "close, but not the value"


def _near(x: float, want: float, rtol: float) -> bool:
    return abs(x - want) <= rtol * abs(want)


def _two_numbers(answer) -> list:
    """``(a, b)`` as a list of two items; a 1-d numpy array or tensor of two numbers is fine too."""
    if (isinstance(answer, np.ndarray) or is_plain_tensor(answer)) and tuple(answer.shape) == (2,):
        answer = list(answer)  # the size is checked first: list() of a huge array would exhaust the memory
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        raise Mistake("答案应该是两个数组成的元组：(缩放前的方差, 缩放后的方差)")
    return list(answer)


@checker("ch05", "5.2", "预测点积的方差（缩放前 / 缩放后）", listed=False)
def check_dot_product_variance(answer):
    """``answer``: ``(var_unscaled, var_scaled)`` of ``q · k`` and ``q · k / sqrt(d_k)`` for d_k = 256.

    q and k have independent entries of mean 0 and variance 1.
    """
    if is_stub(answer):
        raise NotDone()
    first, second = _two_numbers(answer)
    raw = as_number(first, "缩放前的方差")
    scaled = as_number(second, "缩放后的方差")
    d = VARIANCE_D_K
    want_raw, want_scaled = float(d), d / math.sqrt(d) ** 2  # Var(Σ q_j k_j) = d_k; Var(X / c) = Var(X) / c²

    if not _near(raw, want_raw, VARIANCE_RTOL):
        if _near(raw, math.sqrt(d), 0.1):
            raise Mistake(f"缩放前填了 {raw:g}：那是标准差 √d_k。方差是 d_k 个方差为 1 的乘积项之和，所以是 d_k")
        if _near(raw, 1.0, 0.1):
            raise Mistake("缩放前的方差并不是 1：d_k 个独立项相加，方差也跟着相加，所以随 d_k 增长")
        if _near(raw, want_raw, NEAR_MISS):
            raise Mistake(f"缩放前的方差 {raw:g} 接近，但不是准确值（差了 {abs(raw / want_raw - 1):.0%}）："
                          f"这道题要推出理论值，不靠估计或小实验。提示：q·k = Σ q_j k_j，{d} 个独立项，每一项的方差是 1")
        raise Mistake(f"缩放前的方差 {raw:g} 不对。提示：q·k = Σ q_j k_j，每一项的方差是 1，一共 {d} 项")
    if not _near(scaled, want_scaled, VARIANCE_RTOL):
        if _near(scaled, math.sqrt(d), 0.1):
            raise Mistake(f"缩放后填了 {scaled:g}：除以 √d_k 时方差要除以 (√d_k)² = d_k，而不是除以 √d_k")
        if _near(scaled, 1.0 / d, 0.1):
            raise Mistake(f"缩放后填了 {scaled:g}：这相当于除以了 d_k 而不是 √d_k（方差被多除了一次 d_k）")
        if _near(scaled, d, 0.1):
            raise Mistake("缩放后的方差没有变小：除以 √d_k 正是为了把方差拉回 1")
        if _near(scaled, want_scaled, NEAR_MISS):
            raise Mistake(f"缩放后的方差 {scaled:g} 接近，但不是准确值（差了 {abs(scaled / want_scaled - 1):.0%}）："
                          f"这道题要推出理论值。提示：Var(X / c) = Var(X) / c²，这里 c = √{d}")
        raise Mistake(f"缩放后的方差 {scaled:g} 不对。提示：Var(X / c) = Var(X) / c²，这里 c = √{d}")


# ---------------------------------------------------------------- 5.2 (the inputs do not have variance 1)
SCALED_QUESTION = {"d_k": 64, "var_q": 4.0, "var_k": 1.0}


@checker("ch05", "5.2", "输入的方差不是 1 时，点积的方差和该除的数")
def check_dot_product_variance_scaled(answer):
    """``answer = (Var(q·k), Var(q·k / sqrt(d_k)), c)`` for d_k = 64, q entries of variance 4, k entries of
    variance 1 (independent, mean 0); c is the number q·k must be divided by to get variance 1."""
    if is_stub(answer):
        raise NotDone()
    if (isinstance(answer, np.ndarray) or is_plain_tensor(answer)) and tuple(answer.shape) == (3,):
        answer = list(answer)
    if not isinstance(answer, (tuple, list)) or len(answer) != 3:
        raise Mistake("答案应该是三个数组成的元组：(缩放前的方差, 除以 √d_k 之后的方差, 让方差回到 1 要除的数)")
    raw, scaled, divisor = (as_number(v, name) for v, name in zip(answer, ("缩放前的方差", "除以 √d_k 之后的方差", "要除的数")))
    q = SCALED_QUESTION
    d, vq, vk = q["d_k"], q["var_q"], q["var_k"]
    want_raw = d * vq * vk  # Var(Σ q_j k_j) = Σ Var(q_j) Var(k_j)
    want_scaled, want_div = want_raw / d, math.sqrt(want_raw)
    if not _near(raw, want_raw, VARIANCE_RTOL):
        if _near(raw, d, 0.05):
            raise Mistake(f"缩放前填了 {raw:g} = d_k：那是各分量方差都为 1 时的答案；这里 q 的分量方差是 {vq:g}，"
                          f"每一项 q_j k_j 的方差是 Var(q_j)·Var(k_j) = {vq * vk:g}")
        if _near(raw, d * math.sqrt(vq), 0.05):
            raise Mistake(f"缩放前填了 {raw:g}：用了 q 的标准差 {math.sqrt(vq):g}；每一项的方差是方差之积 Var(q_j)·Var(k_j)")
        raise Mistake(f"缩放前的方差 {raw:g} 不对。提示：q·k = Σ q_j k_j，{d} 个独立项，每一项的方差是 Var(q_j)·Var(k_j)")
    if not _near(scaled, want_scaled, VARIANCE_RTOL):
        if _near(scaled, 1.0, 0.05):
            raise Mistake(f"除以 √d_k 之后的方差不是 1：√d_k 只除掉了项数 d_k 带来的增长，分量本身的方差 {vq * vk:g} 还在")
        raise Mistake(f"除以 √d_k 之后的方差 {scaled:g} 不对。提示：Var(X / c) = Var(X) / c²，这里 c = √{d}")
    if not _near(divisor, want_div, VARIANCE_RTOL):
        if _near(divisor, want_raw, 0.05):
            raise Mistake(f"要除的数填了 {divisor:g}：那是方差本身；除以 c 时方差除以 c²，所以 c 是方差的平方根")
        if _near(divisor, math.sqrt(d), 0.05):
            raise Mistake(f"要除的数填了 √d_k = {divisor:g}：那只够让方差为 1 的输入回到 1；这里还要除掉 √({vq * vk:g})")
        raise Mistake(f"要除的数 {divisor:g} 不对。提示：让 Var(q·k / c) = Var(q·k) / c² 等于 1")


# ---------------------------------------------------------------- 5.3
def _softmax_attention(q, k, v, mask=None, scale=None, dim=-1, fill=-1e9, when="before"):
    """A parametrised attention used to build the wrong variants the checker recognises."""
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1)
    if scale is not None:
        scores = scores / scale(d_k)
    if mask is not None and when == "before":
        scores = scores.masked_fill(~mask, fill)
    weights = torch.softmax(scores, dim=dim)
    if mask is not None and when == "after":
        weights = weights.masked_fill(~mask, fill)
    return weights @ v


def _matches(out, candidate) -> bool:
    """Same shape and values as ``candidate`` (float32 or float64 answers alike; NaN matches NaN)."""
    return (is_plain_tensor(out) and out.is_floating_point() and out.shape == candidate.shape
            and torch.allclose(out.detach().double(), candidate.detach().double(), atol=1e-4, rtol=1e-3, equal_nan=True))


SQRT = math.sqrt
ATTENTION_SHAPE = (2, 3, 4, 6, 5)  # (B, h, L, S, d_k): L != S != d_k
OTHER_SHAPE = (3, 2, 3, 5, 8)  # a second shape, so nothing may be hard-coded


def _qkv(B, h, L, S, d_k):
    q = torch.randn(B, h, L, d_k) * 2.0
    k = torch.randn(B, h, S, d_k) * 2.0
    v = torch.randn(B, h, S, d_k)
    return q, k, v


def _run(fn, q, k, v, mask):
    """Run the student's attention: no shortcut, no input changed in place, a result."""
    return call(fn, q, k, v, mask, what="你的 attention 函数", forbid=(SDPA, torch_mha(), attention, fused_attention, masked_softmax, attention_scores))


def _random_mask(B, h, L, S) -> torch.Tensor:
    """A (B, h, L, S) bool mask, different per batch, head and query; every query sees at least one key."""
    mask = torch.rand(B, h, L, S) < 0.5
    return mask.scatter(-1, torch.randint(S, (B, h, L, 1)), True)


@checker("ch05", "5.3", "实现带掩码的缩放点积注意力")
def check_attention(fn):
    """``fn(q, k, v, mask)`` -> output (B, h, L, d_k); mask is bool (True = may attend) or None.

    Must not call ``mha``, ``F.scaled_dot_product_attention`` or ``nn.MultiheadAttention``, must
    not change its inputs, and gradients must flow back to q, k and v.
    """
    B, h, L, S, d_k = ATTENTION_SHAPE
    q, k, v = _qkv(B, h, L, S, d_k)
    expected_shape = (B, h, L, d_k)

    # 1) no mask: scale, softmax axis, weights vs output
    out = _run(fn, q, k, v, None)
    ref, ref_w = attention(q, k, v)
    if isinstance(out, tuple) and len(out) == 2:
        raise Mistake("返回了一个 tuple（也许是 (output, weights)）；这个练习只要输出 output = weights @ V")
    if _matches(out, ref_w):
        raise Mistake(f"返回的是注意力权重 weights {tuple(ref_w.shape)}，而不是输出 weights @ V {expected_shape}")
    variants = [
        (dict(scale=None), "忘了除以 √d_k：scores 应该是 Q Kᵀ / √d_k"),
        (dict(scale=lambda d: d), "除以的是 d_k，应该除以 √d_k"),
        (dict(scale=lambda d: 1 / SQRT(d)), "乘了 √d_k，应该是除以 √d_k"),
        (dict(scale=SQRT, dim=-2), "softmax 沿错了轴（dim=-2，对 query 归一化）：应该沿最后一维（key 轴）做，"
                                   "让每个 query 的一行权重加起来等于 1"),
        (dict(scale=SQRT, dim=1), "softmax 沿错了轴（dim=1，头的轴）：应该沿最后一维（key 轴）做"),
    ]
    for kwargs, message in variants:
        if _matches(out, _softmax_attention(q, k, v, **kwargs)):
            raise Mistake(message)
    if _matches(out, q @ k.transpose(-2, -1) / SQRT(d_k) @ v):
        raise Mistake("忘了 softmax：分数要先经过 softmax 变成权重，再去加权 V")
    out = expect_tensor(out, "你的 attention 函数的返回值")
    expect_shape(out, expected_shape, "你的 attention 函数的返回值",
                 hint="(B, h, L, S) 的权重乘上 (B, h, S, d_k) 的 V，得到 (B, h, L, d_k)")
    expect_close(out, ref, "不带掩码时的输出", hint="softmax(Q Kᵀ / √d_k) @ V")

    # 2) padding mask (B, 1, 1, S): every sequence has real and padded keys
    mask = padding_mask_from_lengths([4, 2], S)  # (B, 1, 1, S)
    out = _run(fn, q, k, v, mask)
    ref, _ = attention(q, k, v, mask)
    if _matches(out, _softmax_attention(q, k, v, None, scale=SQRT)):
        raise Mistake("没有用上 mask：带掩码和不带掩码的输出一样")
    if _matches(out, _softmax_attention(q, k, v, ~mask, scale=SQRT)):
        raise Mistake("掩码方向反了：mask 里 True（或 1）表示“可以看”，要屏蔽的是 False（0）的位置，"
                      "例如 scores.masked_fill(~mask, -1e9) 或 masked_fill(mask == 0, -1e9)")
    for fill in (0.0, -1e9, float("-inf")):
        if _matches(out, _softmax_attention(q, k, v, mask, scale=SQRT, fill=fill, when="after")):
            raise Mistake("在 softmax 之后才用掩码：被屏蔽的位置要在 softmax 之前把分数填成很小的数，"
                          "这样剩下的权重才会重新加起来等于 1")
    out = expect_tensor(out, "带 padding 掩码时的输出")
    expect_shape(out, expected_shape, "带 padding 掩码时的输出")
    expect_close(out, ref, "带 padding 掩码 (B, 1, 1, S) 时的输出",
                 hint="在 softmax 之前把 mask 为 False 的分数填成很小的数")

    # 3) causal mask (L, S) broadcast over batch and heads
    mask = causal_mask(L, S)  # (L, S)
    out = _run(fn, q, k, v, mask)
    ref, _ = attention(q, k, v, mask)
    if _matches(out, _softmax_attention(q, k, v, ~mask, scale=SQRT)):
        raise Mistake("掩码方向反了：mask 里 True 表示“可以看”，要屏蔽的是 False 的位置")
    out = expect_tensor(out, "带因果掩码时的输出")
    expect_shape(out, expected_shape, "带 (L, S) 因果掩码时的输出", hint="mask 要能广播到 (B, h, L, S)")
    expect_close(out, ref, "带 (L, S) 因果掩码时的输出", hint="mask 要能广播到 (B, h, L, S)")

    # 4) a full (B, h, L, S) mask, different for every batch, head and query
    mask = _random_mask(B, h, L, S)
    out = expect_tensor(_run(fn, q, k, v, mask), "带 (B, h, L, S) 掩码时的输出")
    ref, _ = attention(q, k, v, mask)
    expect_shape(out, expected_shape, "带 (B, h, L, S) 掩码时的输出")
    expect_close(out, ref, "带 (B, h, L, S) 掩码（每个句子、每个头、每个 query 各不相同）时的输出",
                 hint="mask 直接和 (B, h, L, S) 的 scores 对齐，不要假设它是 (B, 1, 1, S)")

    # 5) a fully masked sequence: zeros (mha) or the plain mean of V (lecture's -1e9) are fine, NaN is not
    mask = padding_mask_from_lengths([3, 0], S)  # second sequence: no key at all
    out = _run(fn, q, k, v, mask)
    ref, _ = attention(q, k, v, mask)
    if (is_plain_tensor(out) and out.is_floating_point() and out.shape == ref.shape
            and not torch.isfinite(out[1]).all()):
        raise Mistake("一整行都被屏蔽时输出了 NaN：用 -inf 填分数会让 softmax 算 0/0。"
                      "改用一个有限的很小的数，例如 -1e9 或 torch.finfo(scores.dtype).min，"
                      "或者事后用 torch.nan_to_num 把 NaN 换成 0")
    out = expect_tensor(out, "整行被屏蔽时的输出")
    expect_shape(out, expected_shape, "整行被屏蔽时的输出")
    expect_close(out[0], ref[0], "有真实 key 的那条序列的输出")
    uniform = v[1].mean(dim=-2, keepdim=True).expand_as(ref[1])
    if not (_matches(out[1], ref[1]) or _matches(out[1], uniform)):
        raise Mistake("一条序列的 key 全被屏蔽时，输出应该是全 0（mha 的做法）或 V 的平均值（用 -1e9 填分数的结果）")

    # 6) another shape (L < S, another d_k) with an (L, S) causal mask: nothing may be hard-coded
    B2, h2, L2, S2, d_k2 = OTHER_SHAPE
    q2, k2, v2 = _qkv(B2, h2, L2, S2, d_k2)
    mask = causal_mask(L2, S2)  # (L, S); every query sees at least one key
    out = expect_tensor(_run(fn, q2, k2, v2, mask), "另一组形状时的输出")
    ref, _ = attention(q2, k2, v2, mask)
    where = f"另一组形状 (B, h, L, S, d_k) = {OTHER_SHAPE} 时的输出"
    expect_shape(out, ref.shape, where, hint="形状和 d_k 都要从输入里读出来，不要写死")
    expect_close(out, ref, where, hint="形状和 √d_k 都要从输入里读出来（q.size(-1)），不要写死")

    # 7) a layer trains through attention: the gradient must reach q, k and v
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    mask = padding_mask_from_lengths([4, 2], S)
    out = expect_tensor(_run(fn, q, k, v, mask), "q、k、v 需要梯度时的输出")
    ref, _ = attention(q, k, v, mask)
    expect_shape(out, expected_shape, "q、k、v 需要梯度时的输出")
    expect_close(out, ref, "q、k、v 需要梯度时的输出")
    expect_gradients(out, {"q": q, "k": k, "v": v}, "你的 attention 函数的输出")
