"""Checkers for chapter 06, 步骤 5：Concat.

* 6.1 predict the shapes after ``transpose(1, 2)`` and after ``view``;
* 6.2 a bug hunt: a merge_heads without its transpose; which properties fail (computed on the buggy
  function), and the fix;
* 6.3 swap two heads inside the concatenated tensor (slices of the last axis, without changing the input).

The answer keys come from :func:`mha.merge_heads` and :func:`mha.split_heads` themselves.
"""
from __future__ import annotations

import functools

import torch

from mha.steps import merge_heads, split_heads
from .answers import as_shape, expect_shape, expect_tensor, same
from .gradients import expect_gradients
from .records import Bug, check_repair
from .running import call
from .verdicts import checker, is_stub, Mistake, NotDone

__all__ = ["check_concat_shapes", "check_merge_bug_repair", "check_swap_heads"]

# ---------------------------------------------------------------- 6.1
CONCAT_CASE = (3, 4, 5, 16)  # heads: (B, h, L, d_k)


_same = functools.partial(same, atol=1e-6, rtol=1e-5)


@checker("ch06", "6.1", "预测 Concat 途中的两个形状")
def check_concat_shapes(answer):
    """``answer``: ``(shape after heads.transpose(1, 2), shape after .contiguous().view(B, L, -1))``."""
    B, h, L, d_k = CONCAT_CASE
    if is_stub(answer):
        raise NotDone()
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        raise Mistake("答案应该是两个形状组成的元组：(transpose 之后的形状, view 之后的形状)")
    first = as_shape(answer[0], "transpose 之后的形状")
    second = as_shape(answer[1], "view 之后的形状")
    t = torch.zeros(CONCAT_CASE).transpose(1, 2)
    want_first, want_second = tuple(t.shape), tuple(t.contiguous().view(B, L, -1).shape)
    if first == (B, h, L, d_k):
        raise Mistake(f"transpose 之后的形状 {first} 和原来一样：transpose(1, 2) 交换第 1 轴（头）和第 2 轴（token）")
    if first == (B, h, d_k, L):
        raise Mistake(f"transpose 之后的形状 {first}：那是 transpose(2, 3) 的结果；这里交换的是第 1、2 轴（头和 token）")
    if first != want_first:
        raise Mistake(f"transpose 之后的形状 {first} 不对。提示：(B, h, L, d_k) 交换第 1、2 轴")
    if second == (B, h, L * d_k):
        raise Mistake(f"view 之后的形状 {second} 把 L 和 d_k 合并了；Concat 合并的是每个 token 的 h 个头：h × d_k")
    if second == (B, L, d_k):
        raise Mistake(f"view 之后的形状 {second} 只剩一个头的宽度；拼接后宽度是 h × d_k = {h * d_k}")
    if second == (B, L, h, d_k):
        raise Mistake(f"{second} 还是四维：view 要把最后两维 (h, d_k) 合成一维 h × d_k")
    if second != want_second:
        raise Mistake(f"view 之后的形状 {second} 不对。提示：(B, L, h, d_k) 的最后两维合并")


# ---------------------------------------------------------------- 6.2
MERGE_CASES = [(1, 2, 3, 4), (2, 4, 5, 3), (3, 3, 2, 5)]  # (B, h, L, d_k): h != d_k, L > 1


def call_merge(fn, x, what, *more, forbid=(merge_heads,)):
    """Call the student's merge (no ``mha.merge_heads`` unless ``forbid`` says otherwise); a ``view`` on a
    non-contiguous tensor is named as such."""
    try:
        return call(fn, x, *more, what=what, forbid=forbid)
    except Mistake as m:
        if "view size is not compatible" in str(m):
            raise Mistake("忘了 .contiguous()：transpose 之后张量在内存里不再连续，直接 .view 会报错；"
                          "先 .contiguous() 再 .view，或者用 .reshape") from None
        raise


# ---------------------------------------------------------------- 6.3
HEAD_CASES = [(2, 3, 4, 5), (1, 4, 6, 2)]  # (B, L, h, d_k), h != d_k


# ---------------------------------------------------------------- 6.2 (bug hunt: no transpose)
def merge_heads_buggy(x: torch.Tensor) -> torch.Tensor:
    """The bug of exercise 6.2: (B, h, L, d_k) reshaped straight to (B, L, h·d_k), without the transpose."""
    B, h, L, d_k = x.shape
    return x.reshape(B, L, h * d_k)


PROPERTIES = {
    "shape": "返回的形状是 (B, L, h·d_k)",
    "undoes_split": "merge(split_heads(x, h)) 还原出 x",
    "per_token": "输出的第 t 行只用到各个头的第 t 个 token",
    "same_numbers": "输出里的数和输入是同一批数（只是换了位置）",
}


def _properties_that_fail(merge) -> set:
    """Which of :data:`PROPERTIES` ``merge`` breaks, measured on an input with h != d_k and L > 1."""
    B, h, L, d_k = 2, 3, 4, 5
    x = torch.randn(B, L, h * d_k)
    heads = split_heads(x, h)  # (B, h, L, d_k)
    out = merge(heads)
    fails = set()
    if tuple(out.shape) != (B, L, h * d_k):
        fails.add("shape")
    if out.shape != x.shape or not torch.equal(out, x):
        fails.add("undoes_split")
    marked = torch.zeros(B, h, L, d_k)
    marked[:, :, 1] = 1.0  # token 1 of every head
    rows = merge(marked).reshape(B, L, -1).abs().sum(-1)[0]  # (L,)
    if rows.nonzero().flatten().tolist() != [1]:
        fails.add("per_token")
    if not torch.equal(out.flatten().sort().values, heads.flatten().sort().values):
        fails.add("same_numbers")
    return fails


def _fails_answer(answer, second: str) -> None:
    """The answer is a dict with ``"fails"`` and ``second``; ``"fails"`` names exactly the properties of
    :data:`PROPERTIES` that :func:`merge_heads_buggy` breaks."""
    if is_stub(answer):
        raise NotDone()
    if not isinstance(answer, dict) or not {"fails", second} <= set(answer):
        raise Mistake(f'答案应该是字典 {{"fails": [...], "{second}": 函数}}' + ("，缺少键" if isinstance(answer, dict) else
                                                                         f"，却收到了 {type(answer).__name__}"))
    fails = answer["fails"]
    if fails is Ellipsis:
        raise NotDone()
    if isinstance(fails, str):
        fails = [fails]
    if not isinstance(fails, (list, tuple, set, frozenset)) or not all(isinstance(f, str) for f in fails):
        raise Mistake(f'answer["fails"] 应该是性质名字的列表，例如 ["shape"]，可选的有 {list(PROPERTIES)}')
    unknown = [f for f in fails if f not in PROPERTIES]
    if unknown:
        raise Mistake(f'answer["fails"] 里有不认识的名字 {unknown}；可选的有 {list(PROPERTIES)}')
    truth = _properties_that_fail(merge_heads_buggy)
    said = set(fails)
    for key in sorted(said - truth):
        raise Mistake(f"“{PROPERTIES[key]}”其实成立：{'形状总是对的，所以这个 bug 很难发现' if key == 'shape' else '只是换了位置，数还是那些数' if key == 'same_numbers' else '再试一试'}")
    for key in sorted(truth - said):
        raise Mistake(f"还漏了一条不成立的性质：“{PROPERTIES[key]}”。用 merge_heads_buggy 试一试，例如 h ≠ d_k、L > 1 的输入")


# ---------------------------------------------------------------- 6.3 (swap two heads in the concat)
SWAP_CASES = [(2, 3, 4, 5, 0, 2), (1, 4, 3, 2, 2, 0), (2, 2, 6, 3, 1, 1)]  # (B, L, h, d_k, i, j)


@checker("ch06", "6.3", "在 Concat 的结果里交换两个头")
def check_swap_heads(fn):
    """``fn(concat (B, L, h·d_k), i, j, n_heads)``: a new tensor with the d_k columns of heads i and j exchanged;
    ``concat`` itself must not change; gradients reach it."""
    for B, L, h, d_k, i, j in SWAP_CASES:
        concat = torch.randn(B, L, h * d_k, requires_grad=True)
        where = f"concat {(B, L, h * d_k)}、i={i}、j={j}、n_heads={h}"
        out = expect_tensor(call(fn, concat, i, j, h, what="swap_heads"), "返回值")  # the prompt forbids nothing
        heads = concat.detach().view(B, L, h, d_k).clone()
        heads[:, :, [i, j]] = heads[:, :, [j, i]]
        want = heads.reshape(B, L, h * d_k)
        expect_shape(out, want.shape, f"{where} 时的返回值", hint="交换头不改变形状")
        if torch.allclose(out.detach(), want):
            expect_gradients(out, {"concat": concat}, f"{where} 时的返回值")
            continue
        tokens = concat.detach().clone()
        if max(i, j) < L:
            tokens[:, [i, j]] = tokens[:, [j, i]]
            if torch.allclose(out.detach(), tokens):
                raise Mistake(f"{where} 时你交换的是第 {i}、{j} 个 token（第 1 个轴），不是头：头在最后一个轴上，"
                              "第 i 个头是 [i*d_k, (i+1)*d_k) 这几列")
        overwritten = concat.detach().view(B, L, h, d_k).clone()
        overwritten[:, :, i] = overwritten[:, :, j]  # the second copy reads the already overwritten head
        both_j = overwritten.reshape(B, L, h * d_k)
        overwritten = concat.detach().view(B, L, h, d_k).clone()
        overwritten[:, :, j] = overwritten[:, :, i]
        both_i = overwritten.reshape(B, L, h * d_k)
        if i != j and (torch.allclose(out.detach(), both_j) or torch.allclose(out.detach(), both_i)):
            raise Mistake(f"{where} 时两个头变成了同一个：先把一段复制过去，再复制回来时读到的已经是被覆盖的值；"
                          "先 clone 一份原来的头 i（或一次性用索引 [j, i] 取出）再交换")
        raise Mistake(f"{where} 时结果不对：头 i 的 d_k 列和头 j 的 d_k 列要互换，别的列不动")


# ---------------------------------------------------------------- 6.2 (reworked): which properties fail, and the rescue
REPAIR_CASES = [(1, 2, 3, 4), (2, 4, 5, 3), (3, 3, 2, 5)]  # (B, h, L, d_k): h != d_k, L > 1, L != h


@checker("ch06", "6.2", "找 bug：merge_heads 少了 transpose，再把拼错的结果救回来")
def check_merge_bug_repair(answer):
    """``answer = {"fails": [property keys], "repair": fn}``: which of :data:`PROPERTIES` :func:`merge_heads_buggy`
    breaks, and ``fn(wrong, n_heads)`` that turns ``wrong = merge_heads_buggy(heads)`` (B, L, h·d_k) into the right
    Concat ``merge_heads(heads)`` without the heads."""
    _fails_answer(answer, "repair")
    repair = answer["repair"]
    if repair is Ellipsis:
        raise NotDone()
    check_repair(lambda wrong, h: call_merge(repair, wrong, 'answer["repair"]', h, forbid=()), map(_merge_bug, REPAIR_CASES))


def _merge_bug(case) -> Bug:
    B, h, L, d_k = case
    heads = torch.randn(B, h, L, d_k)
    wrong = merge_heads_buggy(heads).detach().clone().requires_grad_()  # (B, L, h·d_k), its own memory
    w = wrong.detach()
    return Bug(wrong, merge_heads(heads), f"heads 的形状 {(B, h, L, d_k)} 时", [
        (w, "返回的还是 wrong 本身（或者先分头、再拼回，又回到了 wrong）：wrong 的一行不是一个 token。"
            "想一想：reshape 没有搬动任何数，wrong 在内存里还是 heads 的顺序"),
        (w.view(B, L, h, d_k).transpose(1, 2).reshape(B, L, h * d_k),
         "你把 wrong 读成了 (B, L, h, d_k)：可 wrong 的数在内存里是 heads 的顺序 (B, h, L, d_k)，要按这个顺序读回来，再做正确的 Concat")],
        shape_hint="(B, L, h·d_k)，和正确 Concat 的形状一样",
        hint="wrong 的数在内存里还是 heads 的顺序：view 成 (B, h, L, d_k)，再 transpose(1, 2) 后合并最后两维", args=(h,))
