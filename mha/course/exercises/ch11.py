"""Checkers for chapter 11, why several heads (the look-back toy task).

* 11.1 the plateau's baseline: the accuracy of a model that gets one answer right and guesses the rest,
  as a function of the vocabulary V and the number of answers n (not the chapter's V = 8, n = 2 only);
* 11.2 predict an ablation: zero the head of the trained 2-head model that looks 1 step back; how
  accurate are the two answers now? The checker trains that model (seed 0, 200 steps, about two
  seconds) and measures it;
* 11.3 why not too many heads: the multiplications of all heads' scores and the largest rank one head's
  (L, S) score matrix can have, for any B, L, S, d_model, h.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from .answers import as_int, as_number, as_parts, name_the_match
from .running import call
from .verdicts import Mistake, checker

__all__ = ["check_plateau", "check_ablation_prediction", "check_head_costs"]


# ---------------------------------------------------------------- 11.1 the plateau's baseline

PLATEAU_CASES = [(8, 2), (10, 3), (5, 2), (26, 4), (3, 1), (100, 5)]


def plateau_reference(V: int, n: int) -> float:
    """One answer always right, the other n - 1 uniform guesses (right 1/V of the time each)."""
    return (1 + (n - 1) / V) / n


@checker("ch11", "11.1", "平台在哪里：答对一个、其余靠猜的准确率")
def check_plateau(fn):
    """``fn(V, n) -> float``: accuracy over all n answers when one is always right and the others are
    guessed uniformly among V tokens. Tried on several (V, n); within 1e-6."""
    for V, n in PLATEAU_CASES:
        got = as_number(call(fn, V, n, what="你的函数"), f"V={V}, n={n} 时的准确率")
        want = plateau_reference(V, n)
        if abs(got - want) <= 1e-6:
            continue
        if 1 < got <= 100 and abs(got / 100 - want) <= 1e-6:
            raise Mistake(f"V={V}, n={n}：你给的是百分数 {got:g}；要的是 0 到 1 之间的比例 {want:.4f}")
        name_the_match(got, [
            (1 / n, f"你给了 1/n = {1 / n:.4f}，把猜的那些答案都当成了全错；瞎猜也有 1/V 的机会猜对"),
            (1 / V, f"你给了 1/V = {1 / V:.4f}，这是每个答案都靠猜的准确率（最好的不看内容的答案），不是“答对一个”的平台"),
            ((1 + 1 / V) / 2, "你的公式只对两个答案成立；有 n 个答案时，一个全对，其余 n − 1 个各对 1/V"),
            ((1 + (n - 1) / 2) / n, "猜一个 token 猜对的概率是 1/V，不是 1/2（词表里有 V 个 token）"),
            (1 / n + 1 / V, "对 n 个答案取平均时，猜的那 n − 1 个每个贡献 (1/V)/n，合起来是 (n − 1)/(V n)，不是 1/V"),
            (1 / V + (1 - 1 / V) * 3 / 4, "这是本章一个头的猜想上限（手造的解），不是“一个全对、其余靠猜”的平台"),
            ((1 + (n - 1) / (V - 1)) / n, "猜是在全部 V 个 token 里猜（对的那个也在其中），猜对的概率是 1/V，不是 1/(V − 1)"),
        ], prefix=f"V={V}, n={n}：", same=lambda g, w: abs(g - w) <= 1e-6 and abs(w - want) > 1e-6)
        raise Mistake(f"V={V}, n={n} 时应该是 {want:.4f}，你给了 {got:.4f}。提示：n 个答案平均；一个全对（1），其余每个猜对的概率 1/V")


# ---------------------------------------------------------------- 11.2 predict an ablation

TOLERANCE = 0.1


@functools.lru_cache(maxsize=1)
def ablation_reference() -> tuple:
    """Train the chapter's 2-head model (seed 0, 200 steps), zero the head that looks 1 step back and
    measure both answers on 512 held-out sequences: ``(acc x[t-1], acc x[t-3], head index)``. The page
    prints the 1-head model's pair (x[t-1] right, x[t-3] a guess); this ablation reverses it."""
    from ..numerals.model import zero_head_hook
    from ..toy_task import ToyConfig, answer_accuracy, head_offsets, make_batch, train

    cfg = ToyConfig(steps=200)
    model = train(cfg, 2, seed=0).model
    x, y, valid = make_batch(cfg, 512, torch.Generator().manual_seed(2024))
    with torch.no_grad():
        _, w = model(x)  # (B, 2, T, T)
        head = int(head_offsets(w, min_t=max(cfg.offsets))[:, 1].argmax())  # the head that looks 1 back
        hook = model.attn.W_o.register_forward_pre_hook(zero_head_hook(head, model.attn.d_k))
        try:
            logits, _ = model(x)
        finally:
            hook.remove()
    acc1, acc3 = answer_accuracy(logits, y, valid)
    return acc1, acc3, head


def _two_numbers(answer):
    if isinstance(answer, (torch.Tensor, np.ndarray)) and answer.ndim == 1:
        answer = answer.tolist()  # two numbers measured by an experiment
    names = ("答 x[t-1] 的准确率", "答 x[t-3] 的准确率")
    parts = as_parts(answer, 2, f"答案应该是两个数 ({', '.join(names)})", verb="收到了")
    numbers = [as_number(a, name) for a, name in zip(parts, names)]
    for value, name in zip(numbers, names):
        if not 0 <= value <= 1:
            raise Mistake(f"{name} 应该在 0 和 1 之间（是比例，不是百分数），你给了 {value:g}")
    return numbers


@checker("ch11", "11.2", "预测一次消融：去掉回看 1 步的那个头")
def check_ablation_prediction(answer):
    """``answer = (acc_x1, acc_x3)``: the predicted accuracies of the two answers after the output of the
    head that looks 1 step back is set to zero (the 2-head model, seed 0, 200 steps). Accepted within
    0.1 of what the checker measures on 512 sequences."""
    first, second = _two_numbers(answer)
    acc1, acc3, _ = ablation_reference()
    ok1, ok3 = abs(first - acc1) <= TOLERANCE, abs(second - acc3) <= TOLERANCE
    if ok1 and ok3:
        return
    if not ok1 and first < 0.05:
        raise Mistake(f"x[t-1] 的准确率不会是 {first:g}：读出层拿不到 x[t-1] 的信息，但它照样要给出一个 token，"
                      "随机 token 里猜中的机会是 1/V = 1/8")
    if not ok1 and first > 0.5:  # also the page's 1-head pair, or the two numbers swapped
        raise Mistake(f"x[t-1] 的准确率不会还有 {first:g}：去掉的是回看 1 步的头，只有它把 x[t-1] 送进了 Concat；"
                      "另一个头只带着 x[t-3]，而 x[t-1] 和 x[t-3] 是独立抽出来的")
    if not ok3 and second < 0.8:
        raise Mistake(f"x[t-3] 的准确率不会跌到 {second:g}：回看 3 步的头没有被动，Concat 里它那一段原样还在，"
                      "读出层照样能读出 x[t-3]")
    raise Mistake(f"实测和你的预测差得超过 {TOLERANCE}：想想每个答案在置零之后还能从哪个头得到信息，"
                  "没有信息的答案相当于在 V = 8 个 token 里猜")


# ---------------------------------------------------------------- 11.3 why not too many heads

COST_CASES = [(2, 4, 4, 512, 8), (1, 2, 3, 64, 4), (3, 5, 7, 96, 96), (2, 16, 16, 32, 1), (4, 100, 80, 256, 2)]


def head_costs_reference(B, L, S, d_model, h) -> tuple:
    d_k = d_model // h
    return B * h * L * S * d_k, min(d_k, L, S)


@checker("ch11", "11.3", "头越多越好吗：算分数的乘法次数和每个头分数矩阵的秩")
def check_head_costs(fn):
    """``fn(B, L, S, d_model, h) -> (multiplications, max_rank)``: the scalar multiplications of all h
    heads' ``Q_i K_i^T`` together, and the largest rank one head's (L, S) score matrix can have."""
    for B, L, S, d_model, h in COST_CASES:
        out = as_parts(call(fn, B, L, S, d_model, h, what="你的函数"), 2, "应该返回两个整数 (乘法次数, 最大的秩)")
        case = f"B={B}, L={L}, S={S}, d_model={d_model}, h={h}"
        mults, rank = as_int(out[0], f"{case} 的乘法次数"), as_int(out[1], f"{case} 的秩")
        want_mults, want_rank = head_costs_reference(B, L, S, d_model, h)
        d_k = d_model // h
        if (mults, rank) == (want_rank, want_mults) != (want_mults, want_rank):
            raise Mistake(f"{case}：两个数的顺序反了：先返回乘法次数，再返回最大的秩")
        if mults != want_mults:
            name_the_match(mults, [
                (want_mults * h, f"乘法次数多乘了一个 h。每个头的点积只有 d_k = {d_k} 维，h 个头合起来是 h·d_k = d_model，"
                                 "所以总数 B·L·S·d_model 和 h 无关"),
                (B * h * L * S, f"每个分数是一个 d_k = {d_k} 维的点积，要 d_k 次乘法；你只数了分数的个数 B·h·L·S"),
                (B * L * S * d_k, "你只算了一个头；h 个头各算一张 (L, S) 的分数表"),
                (2 * want_mults, "只数乘法：d_k 维的点积是 d_k 次乘法，加法不算"),
                (want_mults + B * h * L * S, "除以 √d_k 不算在内：只数 Q_iK_iᵀ 的点积里的乘法"),
                (want_mults * h * h, f"d_k = d_model / h = {d_k}，不是 d_model·h"),
            ], prefix=f"{case}：", same=int.__eq__)
            raise Mistake(f"{case}：乘法次数应该是 {want_mults}，你给了 {mults}。"
                          "提示：h 个头，每个头 L·S 个分数，每个分数是 d_k 维的点积，还有 B 个样本")
        if rank != want_rank:
            name_the_match(rank, [
                (d_model, f"每个头的 Q_i 是 (L, d_k)、K_i 是 (S, d_k)，Q_i K_iᵀ 的秩不超过 d_k = {d_k}，不是 d_model"),
                (d_k, f"秩也不会超过矩阵的行数 L 和列数 S；这里 (L, S) = {(L, S)}，最大的秩是 min(d_k, L, S) = {want_rank}"),
            ], prefix=f"{case}：", same=lambda g, w: g == w != want_rank)
            raise Mistake(f"{case}：最大的秩应该是 {want_rank}，你给了 {rank}。提示：(L, d_k) 乘 (d_k, S) 的秩受三个数限制")
