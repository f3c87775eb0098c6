"""Checkers for chapter 04, step 3: split heads.

* 4.1 ``check_heads_that_move``: which heads and tokens change when one entry of W_q.weight, one number of x or a
  slice of Q' across a head boundary changes.
* 4.2 ``check_split_bug_repair``: a bug hunt: a split that reshapes straight to (B, h, L, d_k); find the shape
  on which it is right anyway, then rescue the right heads from the buggy result alone.
* 4.3 ``check_packed_from_heads``: lecture 003's three small Linears per head (qnet, knet, vnet) packed into one
  Linear laid out as ``nn.MultiheadAttention``'s in_proj: all heads' Q rows, then K, then V.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from mha.layer import MultiHeadAttention
from mha.steps import split_heads
from .answers import as_shape, expect_close, part
from .ch01 import positions
from .records import Ask, Bug, check_repair, dict_answer, Which, predict_which
from .running import call
from .verdicts import checker, Mistake

__all__ = ["check_heads_that_move", "check_split_bug_repair", "check_packed_from_heads"]


# ---------------------------------------------------------------- 4.1 (which heads and tokens one change reaches)
D, H, L = 12, 4, 5  # mha.MultiHeadAttention(12, 4): d_k = 3; x (2, 5, 12); only sentence 0 is asked about
ASKED = {"w_at": (9, 1), "x_at": (2, 1), "head": 3, "cut": (2, 7, 10)}  # cut: q[0, token, a:b]
WARMUP_ASKED = {"column": 2, "bias": 4, "other": (1, 1, 6), "head": 2}  # the self-check's neighbouring questions
SETTING = (f"`layer = mha.MultiHeadAttention({D}, {H})`（d_k = {D // H}），x 的形状是 (2, {L}, {D})，"
           f"`heads = mha.split_heads(layer.W_q(x), {H})`，形状 (2, {H}, {L}, {D // H})。只看下标 0 的句子，下标都从 0 数。")


def heads_that_move(w_at, x_at, head, cut) -> dict:
    """By running W_q and :func:`mha.split_heads` (sentence 0): the heads that move when 1 is added to
    ``W_q.weight[w_at]``, the tokens of ``head`` that move when 1 is added to ``x[0, x_at]``, and the heads of
    token ``cut[0]`` that move when 1 is added to ``Q'[0, cut[0], cut[1]:cut[2]]``."""
    layer, x = MultiHeadAttention(D, H), torch.randn(2, L, D)
    with torch.no_grad():
        q = layer.W_q(x)  # (B, L, d_model)
        x2, q2 = x.clone(), q.clone()
        x2[(0, *x_at)] += 1.0
        q2[0, cut[0], cut[1]:cut[2]] += 1.0
        from_x, from_q = layer.W_q(x2), q2
        layer.W_q.weight[w_at] += 1.0
        base, from_w, from_x, from_q = (split_heads(t, H)[0] for t in (q, layer.W_q(x), from_x, from_q))  # (h, L, d_k)
    w, x, q = ((t - base).abs() > 1e-6 for t in (from_w, from_x, from_q))  # (h, L, d_k) each
    return {"weight": positions(w.flatten(1).any(-1)), "tokens": positions(x[head].any(-1)), "slice": positions(q[:, cut[0]].any(-1))}


def _moving(w_at, x_at, head, cut) -> Which:
    """Exercise 4.1 for the changes ``w_at``, ``x_at``, ``head``, ``cut`` (the self-check asks other ones)."""
    (r, c), (t, f), (s, a, b), d_k = w_at, x_at, cut, D // H
    near = list(range(a, b))

    def heads(rule):
        return sorted({rule(n) for n in near})
    return Which(
        "4.1", "ch04", "改一个数，哪些头、哪些 token 会变", lambda: heads_that_move(w_at, x_at, head, cut), size=H,
        setting=SETTING,
        range_why=f"：n_heads = {H}，每句 L = {L} 个 token",
        asks={"weight": Ask(
            f"x 不动，给 `layer.W_q.weight[{r}, {c}]` 加 1，重新投影、分头：哪些头会变？",
            f"weight 是 (out, in)：它的下标 {r} 的行只算 Q′ 的下标 {r} 的数，这个数进了代码下标 {r} // {d_k} = {r // d_k} 的头。",
            "weight 是 (out, in)：这个数只参与 Q′ 的哪一个数？那个数分到哪个头？", (
                ([c // d_k], f"看的是列 {c}：weight 是 (out, in)，weight[{r}, {c}] 把输入特征 {c} 接到输出特征 {r}；"
                             f"分头切的是输出 Q′，Q′ 的下标 {r} 的数属于代码下标 {r} // d_k 的头（这一层 d_k = {d_k}，不是正文的 64；"
                             "输入特征不属于哪个头，每个头都读全部输入）"),
                (list(range(H)), f"改 x 的一个特征，每个头都会变；可 weight 的一个数只连着 Q′ 的一个数（下标 {r} 的那个），只进一个头"),
                ([r % H], f"把 Q′ 当成了轮流发给各个头（{r} % {H} = {r % H}）：一个头拿的是连续的一段，"
                          "代码下标为 i 的头拿下标 i·d_k 到 (i+1)·d_k − 1 的数"),
                ([r // H], f"除以了 n_heads（{r} // {H} = {r // H}）：每个头宽 d_k = {d_k}，Q′ 的下标 {r} 的数属于代码下标 {r} // d_k 的头"))),
              "tokens": Ask(
            f"weight 不动，给 `x[0, {t}, {f}]` 加 1，重新投影、分头：代码下标 {head} 的头里哪些 token 会变？",
            f"投影和分头都逐 token 计算，只有 token {t} 会变。", "投影和分头会在 token 之间交换信息吗？", (
                (list(range(L)), f"投影和分头都逐 token 计算：改 token {t} 的输入，只有 token {t} 的那一行会变"
                                 "（token 之间交换信息要到下一步的注意力）"),
                ([], f"以为每个头只看 x 自己的那一段特征（代码下标 {head} 的头那一段是下标 {head * d_k}–{(head + 1) * d_k - 1}，"
                     f"不含下标 {f}）：分头切的是投影之后的 Q′，Q′ 的每个数都混合了 x 的全部特征，所以这个头里 token {t} 会变"),
                ([f], f"{f} 是特征的下标，不是 token：改的是 token {t}")), size=L),
              "slice": Ask(
            f"x、weight 都不动，直接给 Q′ 的 `q[0, {s}, {a}:{b}]` 加 1 再分头：token {s} 的哪些头会变？",
            f"分头只搬数：下标 {a}–{b - 1} 的数分别进了代码下标 {', '.join(str(n // d_k) for n in near)} 的头。",
            f"代码下标为 i 的头拿 Q′ 的下标 i·d_k 到 (i+1)·d_k − 1 的数；这里 d_k = {d_k}", (
                (list(range(H)), "分头只搬数、不做计算：Q′ 的一个数只进一个头（下标 n 的数进头 n // d_k）"),
                (heads(lambda n: n % H), f"把 Q′ 当成了轮流发给各个头（下标 n 的数进头 n % {H}）：一个头拿的是连续的一段，"
                                         "代码下标为 i 的头拿下标 i·d_k 到 (i+1)·d_k − 1 的数"),
                (heads(lambda n: n // H), f"除以了 n_heads（下标 n 的数进头 n // {H}）：每个头宽 d_k = {d_k}，下标 n 的数进头 n // d_k"),
                ([a // d_k], f"只算了切片的开头：{a}:{b} 是下标 {a} 到 {b - 1} 的数，跨过了头的边界")))})


check_heads_that_move = predict_which(_moving(**ASKED))


def warm_up_moves(column, bias, other, head) -> dict:
    """By running W_q and :func:`mha.split_heads` (sentence 0), each change made on the original layer and x: the
    heads that move when 1 is added to the whole column ``W_q.weight[:, column]``, the tokens (in any head) that move
    when 1 is added to ``W_q.bias[bias]``, and the tokens of ``head`` that move when 1 is added to ``x[other]``."""
    layer, x = MultiHeadAttention(D, H), torch.randn(2, L, D)
    x2 = x.clone()
    x2[other] += 1.0
    with torch.no_grad():
        W, b = layer.W_q.weight, layer.W_q.bias
        W2, b2 = W.clone(), b.clone()
        W2[:, column] += 1.0
        b2[bias] += 1.0
        q = (F.linear(*args) for args in ((x, W, b), (x, W2, b), (x, W, b2), (x2, W, b)))  # (B, L, d_model) each
        base, from_w, from_b, from_x = (split_heads(t, H)[0] for t in q)  # (h, L, d_k)
    w, b, o = ((t - base).abs() > 1e-6 for t in (from_w, from_b, from_x))  # (h, L, d_k) each
    return {"column": positions(w.flatten(1).any(-1)), "bias": positions(b.any(-1).any(0)),
            "other": positions(o[head].any(-1))}


def _neighbours(column, bias, other, head) -> Which:
    """The self-check's warm-up of exercise 4.1: three neighbouring questions, none the exercise's with other
    numbers (a whole column of W_q.weight, one number of W_q.bias, a number of the other sentence). Its words
    explain its own cases and never the rules the exercise asks for."""
    (b, t, f), d_k = other, D // H
    return Which(
        "4.1", "ch04", "改一个数，哪些头、哪些 token 会变", lambda: warm_up_moves(column, bias, other, head), size=H,
        setting=SETTING, range_why=f"：n_heads = {H}，每句 L = {L} 个 token",
        asks={"column": Ask(
            f"x 不动，给 `layer.W_q.weight` 的整个第 {column} 列 `weight[:, {column}]` 都加 1，重新投影、分头：哪些头会变？",
            f"weight 是 (out, in)：第 {column} 列把输入特征 {column} 接到全部 {D} 个输出特征上。整列加 1，Q′ 的每一个数都加上了"
            f"这个 token 的 `x[0, t, {column}]`，所以每个头都变。",
            f"weight 是 (out, in)：第 {column} 列连着 Q′ 的哪些数？", (
                ([column // d_k], f"以为 x 的特征也分给了各个头、特征 {column} 只归一个头：分头切的是投影之后的 Q′；"
                      f"第 {column} 列把输入特征 {column} 接到了 Q′ 的每一个数上"),
                ([column], f"把列的下标 {column} 当成了头的下标：{column} 是输入特征的下标，weight 的列对着输入"))),
              "bias": Ask(
            f"x、weight 都不动，给 `layer.W_q.bias[{bias}]` 加 1，重新投影、分头：哪些 token 会变（哪个头里变都算）？",
            f"Q′ = x W_qᵀ + b，同一个 b 加到每个 token 的投影上：每个 token 的 Q′[0, t, {bias}] 都加了 1，所以每个 token 都变。",
            "偏置 b 的形状是 (d_model,)，它加到哪些 token 的投影上？", (
                ([bias], f"把偏置的下标 {bias} 当成了 token：偏置按输出特征排（长度 d_model = {D}），{bias} 是输出特征的下标"),
                ([], "以为偏置是常数、和输入无关，就不算“变”：它是 Q′ 的一部分，改了它 Q′ 的数就变了"),
                ([0], "以为偏置只加在第一个 token 上：b 的形状是 (d_model,)，广播时加到每个 token 的投影上")), size=L),
              "other": Ask(
            f"weight 不动，给 `x[{b}, {t}, {f}]`（下标 {b} 的句子）加 1，重新投影、分头：下标 0 的句子里，代码下标 {head} 的头"
            "哪些 token 会变？",
            f"x 的第一个下标是句子：这个数在下标 {b} 的句子里。W_q 和 split_heads 对批里的每句话分别计算，"
            "下标 0 的句子一个数也不变。",
            f"`x[{b}, {t}, {f}]` 的三个下标各是什么？", (
                ([t], f"以为改的是下标 0 的句子：`x[{b}, {t}, {f}]` 的第一个下标是句子，这个数在下标 {b} 的句子里"),
                (list(range(L)), "以为同一批的句子会互相影响：W_q 和 split_heads 对批里的每句话分别计算，句子之间不交换信息")),
            size=L)})


WARMUP = _neighbours(**WARMUP_ASKED)


# ---------------------------------------------------------------- 4.2 (bug hunt: no transpose)
def split_heads_buggy(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The bug of exercise 4.2: straight to (B, h, L, d_k), without the (B, L, h, d_k) view and the transpose."""
    B, L, d_model = x.shape
    return x.reshape(B, n_heads, L, d_model // n_heads)


@checker("ch04", "4.2", "找 bug：split_heads 少了 transpose，再把算错的头救回来")
def check_split_bug_repair(answer):
    """``answer = {"right_anyway": (B, L, d_model, n_heads), "repair": fn}``: a shape with n_heads >= 2 on which
    :func:`split_heads_buggy` happens to be right, and ``fn(wrong, n_heads)`` that turns ``wrong =
    split_heads_buggy(x, n_heads)`` (B, h, L, d_k) into the right heads ``split_heads(x, n_heads)``, without x."""
    dict_answer(answer, ("right_anyway", "repair"), '{"right_anyway": (B, L, d_model, n_heads), "repair": 函数}')
    shape = as_shape(answer["right_anyway"], 'answer["right_anyway"]', 4, 512, "(B, L, d_model, n_heads)")
    B, L, d_model, n_heads = shape
    if d_model % n_heads:
        raise Mistake(f'answer["right_anyway"] = {shape}：n_heads = {n_heads} 要整除 d_model = {d_model}')
    if n_heads < 2:
        raise Mistake(f'answer["right_anyway"] = {shape}：只有一个头时怎么切都一样；找一个 n_heads ≥ 2 的形状')
    x = torch.randn(B, L, d_model)
    if not torch.equal(split_heads_buggy(x, n_heads), split_heads(x, n_heads)):
        raise Mistake(f'answer["right_anyway"] = {shape}：在这个形状上 split_heads_buggy 是错的。想一想 reshape 按内存顺序'
                      "依次填满 (h, L, d_k)：什么时候“先填第 1 个头的所有 token”和“每个 token 先切成 h 段”是同一回事？")
    repair = part(answer["repair"], 'answer["repair"]')
    check_repair(lambda wrong, h: call(repair, wrong, h, what='answer["repair"]'), map(_split_bug, REPAIR_CASES))


REPAIR_CASES = [(1, 3, 2, 4), (2, 5, 4, 3), (3, 4, 3, 2)]  # (B, L, h, d_k): L != h != d_k, L > 1


# ---------------------------------------------------------------- 4.3 (lecture 003's qnet/knet/vnet per head -> one packed Linear)
def _packed_linear(lin, where: str, n_small: int, d_k: int, d_model: int):
    """The Linear that stacks ``n_small`` = 3·h small ``nn.Linear(d_model, d_k)``: its (weight, bias), once checked."""
    if not isinstance(lin, nn.Linear):
        raise Mistake(f"{where}应该返回一个 nn.Linear，却返回了 {type(lin).__name__}")
    W, b = lin.weight, lin.bias
    if tuple(W.shape) == (d_k, n_small * d_model):
        raise Mistake(f"{where}打包的 Linear 的 weight 形状是 {tuple(W.shape)}：你把小 weight 横着拼（dim=1）了。"
                      "weight 是 (out, in)，每个小 Linear 贡献 d_k 个输出维 = d_k 行，要竖着叠（dim=0）")
    if tuple(W.shape) != (n_small * d_k, d_model):
        raise Mistake(f"{where}打包的 Linear 的 weight 形状应为 (3·h·d_k, d_model) = {(n_small * d_k, d_model)}，"
                      f"实际是 {tuple(W.shape)}")
    if b is None:
        raise Mistake(f"{where}打包的 Linear 没有偏置：小 Linear 都有偏置，把它们按同样的顺序接起来")
    if not W.requires_grad:
        raise Mistake("打包的 Linear 的 weight 不能训练（requires_grad=False）；复制时用 with torch.no_grad(): 加 .copy_()")
    return W, b


def _split_bug(case) -> Bug:
    B, L, h, d_k = case
    x = torch.randn(B, L, h * d_k)
    wrong = split_heads_buggy(x, h).detach().clone().requires_grad_()  # (B, h, L, d_k), its own memory
    w = wrong.detach()
    return Bug(wrong, split_heads(x, h), f"x 的形状 {(B, L, h * d_k)}、n_heads={h} 时", [
        (w.view(B, L, h, d_k), f"返回了 (B, L, h, d_k) = {(B, L, h, d_k)}：已经按 token 读回来了，还差 transpose(1, 2) "
                               "把头轴放到 token 轴前面"),
        (w, "返回的还是 wrong 本身（或者先拼回、再分头，又回到了 wrong）：wrong 的轴 1 不是真正的头。"
            "想一想：reshape 没有搬动任何数，wrong 和 x 在内存里的顺序完全一样"),
        (w.transpose(1, 2).reshape(B, h, L, d_k), "你把 wrong 的轴 1、2 当成了头和 token 去交换：可 wrong 的轴 1 不是头。"
                                                  "先按内存顺序把它读回 (B, L, h, d_k)（每个 token 的 h 段），再 transpose")],
        shape_hint="(B, h, L, d_k)，和正确分头的形状一样",
        hint="wrong 的数在内存里还是 x 的顺序：把它 view 成 (B, L, h, d_k)，再 transpose(1, 2)", args=(h,))


PACKED_CASES = [(6, 2, 3), (8, 3, 2), (4, 2, 5), (10, 1, 4)]  # (d_model, n_heads, d_k): d_k need not be d_model / h
ROLES = ("Q", "K", "V")


def _triples(d_model: int, n_heads: int, d_k: int) -> list:
    """[(q_lin, k_lin, v_lin)] per head, with weights and biases far from nn.Linear's small initial ones."""
    triples = [tuple(nn.Linear(d_model, d_k) for _ in range(3)) for _ in range(n_heads)]
    with torch.no_grad():
        for lin in (lin for t in triples for lin in t):
            lin.weight.normal_(), lin.bias.normal_()
    return triples


@checker("ch04", "4.3", "《多头自注意力》的每个头三个 Linear → 一个打包的大 Linear")
def check_packed_from_heads(fn):
    """``fn(heads)``: h triples ``(q_lin, k_lin, v_lin)`` of ``nn.Linear(d_model, d_k)`` -> one
    ``nn.Linear(d_model, 3*h*d_k)`` whose output, cut into Q | K | V (``chunk(3, dim=-1)``) and each split into h
    heads, gives ``heads[i][r](x)`` for role r and head i (``nn.MultiheadAttention``'s in_proj layout)."""
    for d_model, n_heads, d_k in PACKED_CASES:
        triples = _triples(d_model, n_heads, d_k)
        where = f"{n_heads} 个头、每个头三个 nn.Linear({d_model}, {d_k}) 时"
        packed = call(fn, [tuple(t) for t in triples], what="你的函数")  # never None nor ...: call() says so
        W, b = _packed_linear(packed, where, 3 * n_heads, d_k, d_model)
        x = torch.randn(2, 3, d_model)
        with torch.no_grad():
            want = torch.stack([torch.stack([t[r](x) for t in triples], dim=1) for r in range(3)])  # (3, B, h, L, d_k)
            y = F.linear(x, W, b)  # (B, L, 3 h d_k)
            got = y.view(2, 3, 3, n_heads, d_k).permute(2, 0, 3, 1, 4)  # Q | K | V, each split into heads
            per_head = y.view(2, 3, n_heads, 3, d_k).permute(3, 0, 2, 1, 4)  # [q_1 k_1 v_1 | q_2 k_2 v_2 | ...]
            no_bias = torch.stack([torch.stack([x @ t[r].weight.T for t in triples], dim=1) for r in range(3)])
            if n_heads > 1 and torch.allclose(per_head, want, atol=1e-5):
                raise Mistake(f"{where}你按头排了 [头 1 的 Q、K、V | 头 2 的 Q、K、V | ……]；这道题要的是打包布局："
                              "先是所有头的 Q，再是所有头的 K，最后是所有头的 V")
            weights_only = F.linear(x, W).view(2, 3, 3, n_heads, d_k).permute(2, 0, 3, 1, 4)
            if torch.allclose(weights_only, no_bias, atol=1e-5) and not torch.allclose(got, want, atol=1e-5):
                raise Mistake(f"{where}weight 对了，但 bias 没有复制过来（新建的 nn.Linear 的 bias 是随机的）："
                              "bias 要和 weight 按同样的顺序拼，再 .copy_() 进去")
            for order in ((1, 0, 2), (0, 2, 1), (2, 1, 0), (1, 2, 0), (2, 0, 1)):
                if torch.allclose(got, want[list(order)], atol=1e-5):
                    raise Mistake(f"{where}Q、K、V 三份的顺序是 {'、'.join(ROLES[r] for r in order)}：应该是 Q、K、V")
            if n_heads > 1 and torch.allclose(got, want.flip(2), atol=1e-5):
                raise Mistake(f"{where}每一份里头的顺序反了：代码下标为 i 的头是这一份的第 i 段行")
        for r, role in enumerate(ROLES):
            expect_close(got[r], want[r], f"{where}打包 Linear 里 {role} 那一份分头后的输出",
                         hint="weight = torch.cat([所有头的 q 的 weight, 所有头的 k 的 weight, 所有头的 v 的 weight], dim=0)，bias 同理")
