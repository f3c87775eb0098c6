"""Checkers for chapter 04, step 3: split heads.

* 4.1 ``check_heads_that_move``: which heads and tokens change when one number of x, or of Q', changes.
* 4.2 ``check_split_bug_repair``: a bug hunt: a split that reshapes straight to (B, h, L, d_k); find the shape
  on which it is right anyway, then rescue the right heads from the buggy result alone.
* 4.3 ``check_packed_from_heads``: lecture 003's three small Linears per head (qnet, knet, vnet) packed into one
  Linear laid out as ``nn.MultiheadAttention``'s in_proj: all heads' Q rows, then K, then V.

The answer keys come from :func:`mha.split_heads` itself.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from mha.steps import split_heads
from .answers import as_shape, expect_close, part
from .records import Ask, Bug, check_repair, Which, predict_which
from .running import call
from .verdicts import checker, is_stub, Mistake, NotDone

__all__ = ["check_heads_that_move", "check_split_bug_repair", "check_packed_from_heads"]


# ---------------------------------------------------------------- 4.1 (which heads and tokens one changed number reaches)
X_AT, Q_AT = (0, 2, 5), (0, 2, 9)  # x[0, 2, 5] and Q'[0, 2, 9] of a d_model = 12, n_heads = 3 layer (d_k = 4)


def heads_that_move(d_model: int = 12, h: int = 3) -> dict:
    """Add 1 to ``x[X_AT]`` (before W_q) or to ``Q'[Q_AT]`` (after it); which heads of token 2 and which tokens of
    head 0 (sentence 0) change, by running W_q and :func:`mha.split_heads`."""
    from mha.layer import MultiHeadAttention
    layer, x = MultiHeadAttention(d_model, h), torch.randn(2, 3, d_model)
    with torch.no_grad():
        q = layer.W_q(x)  # (B, L, d_model)
        x2, q2 = x.clone(), q.clone()
        x2[X_AT] += 1.0
        q2[Q_AT] += 1.0
        base, from_x, from_q = (split_heads(t, h)[0] for t in (q, layer.W_q(x2), q2))  # (h, L, d_k)

    def nz(moved):
        return moved.nonzero().flatten().tolist()
    dx, dq = (from_x - base).abs() > 1e-6, (from_q - base).abs() > 1e-6  # (h, L, d_k)
    return {"from_x": nz(dx[:, 2].any(-1)), "tokens": nz(dx[0].any(-1)), "from_q": nz(dq[:, 2].any(-1))}


check_heads_that_move = predict_which(Which(
    "4.1", "ch04", "改一个数，哪些头、哪些 token 会变", heads_that_move, size=3,
    setting="`layer = mha.MultiHeadAttention(12, 3)`（d_k = 4），x 的形状是 (2, 3, 12)，"
            "`heads = mha.split_heads(layer.W_q(x), 3)`，形状 (2, 3, 3, 4)。只看第 0 句。",
    range_why="：n_heads = 3，每句 L = 3 个 token",
    asks={"from_x": Ask(
        "给 `x[0, 2, 5]` 加 1：token 2 的哪些头（代码下标）会变？",
        "每个头的 d_k 个数都是 x 全部 12 个特征学出来的混合，改一个特征，3 个头都会变。",
        "头 i 的 d_k 个数切自 Q′；Q′ 的每个数用到了 x 的哪些特征？", (
            ([1], "以为每个头只看 x 自己的那一段特征（5 // d_k = 1）：分头切的是投影之后的 Q′，而 Q′ 的每个数都是 x 全部 "
                  "d_model 个特征学出来的混合；改 x 的一个特征，每个头都会变"),
            ([2], "以为每个头只看 x 的一部分特征：分头切的是投影之后的 Q′，Q′ 的每个数都混合了 x 的全部特征；"
                  "改 x 的一个特征，每个头都会变"))),
          "tokens": Ask(
        "给 `x[0, 2, 5]` 加 1：头 0 里哪些 token 会变？", "投影和分头都逐 token 计算，只有 token 2 会变。",
        "投影和分头会在 token 之间交换信息吗？", (
            ([0, 1, 2], "投影和分头都逐 token 计算：改 token 2 的输入，只有 token 2 的那一行会变"
                        "（token 之间交换信息要到下一步的注意力）"),
            ([], "头 0 的 d_k 个数也混合了 x 的全部特征，包括被改的第 5 维，所以 token 2 会变"))),
          "from_q": Ask(
        "不动 x，直接给 Q′ 的 `q[0, 2, 9]` 加 1 再分头：token 2 的哪些头会变？", "分头只搬数：Q′ 的第 9 个数进了头 9 // 4 = 2。",
        "代码下标为 i 的头拿 Q′ 的第 i·d_k 到 (i+1)·d_k − 1 个数；这里 d_k = 4", (
            ([0, 1, 2], "分头只搬数、不做计算：Q′ 的一个数只进一个头（头 9 // d_k = 2）"),
            ([0], "把 Q′ 当成了轮流发给各个头（9 % 3 = 0）：一个头拿的是连续的一段，"
                  "代码下标为 i 的头拿第 i·d_k 到 (i+1)·d_k − 1 个数")))}))


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
    if is_stub(answer):
        raise NotDone()
    if not isinstance(answer, dict) or not {"right_anyway", "repair"} <= set(answer):
        raise Mistake('答案应该是字典 {"right_anyway": (B, L, d_model, n_heads), "repair": 函数}，'
                      f"却收到了 {type(answer).__name__}" + ("（缺少键）" if isinstance(answer, dict) else ""))
    shape = as_shape(part(answer["right_anyway"], 'answer["right_anyway"]'), 'answer["right_anyway"]')
    if len(shape) != 4 or min(shape) < 1 or max(shape) > 512:
        raise Mistake(f'answer["right_anyway"] 应该是 (B, L, d_model, n_heads)，四个 1 到 512 之间的整数，却是 {shape}')
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
def _stacked_linear(lin, where: str, n_small: int, d_k: int, d_model: int, name: str, rows: str):
    """The Linear that stacks ``n_small`` small ``nn.Linear(d_model, d_k)``: its (weight, bias), once checked."""
    if not isinstance(lin, nn.Linear):
        raise Mistake(f"{where}应该返回一个 nn.Linear，却返回了 {type(lin).__name__}")
    W, b = lin.weight, lin.bias
    if tuple(W.shape) == (d_k, n_small * d_model) and n_small > 1:
        raise Mistake(f"{where}{name} 的 weight 形状是 {tuple(W.shape)}：你把小 weight 横着拼（dim=1）了。"
                      "weight 是 (out, in)，每个小 Linear 贡献 d_k 个输出维 = d_k 行，要竖着叠（dim=0）")
    if tuple(W.shape) != (n_small * d_k, d_model):
        raise Mistake(f"{where}{name} 的 weight 形状应为 ({rows}, d_model) = {(n_small * d_k, d_model)}，实际是 {tuple(W.shape)}")
    if b is None:
        raise Mistake(f"{where}{name} 没有偏置：小 Linear 都有偏置，把它们按同样的顺序接起来")
    if not W.requires_grad:
        raise Mistake(f"{name} 的 weight 不能训练（requires_grad=False）；复制时用 with torch.no_grad(): 加 .copy_()")
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


@checker("ch04", "4.3", "讲义 003 的每个头三个 Linear → 一个打包的大 Linear")
def check_packed_from_heads(fn):
    """``fn(heads)``: h triples ``(q_lin, k_lin, v_lin)`` of ``nn.Linear(d_model, d_k)`` -> one
    ``nn.Linear(d_model, 3*h*d_k)`` whose output, cut into Q | K | V (``chunk(3, dim=-1)``) and each split into h
    heads, gives ``heads[i][r](x)`` for role r and head i (``nn.MultiheadAttention``'s in_proj layout)."""
    for d_model, n_heads, d_k in PACKED_CASES:
        triples = _triples(d_model, n_heads, d_k)
        where = f"{n_heads} 个头、每个头三个 nn.Linear({d_model}, {d_k}) 时"
        packed = part(call(fn, [tuple(t) for t in triples], what="你的函数"), "你的函数的返回值")
        W, b = _stacked_linear(packed, where, 3 * n_heads, d_k, d_model, "打包的 Linear", "3·h·d_k")
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
