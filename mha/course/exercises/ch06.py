"""Checkers for chapter 06, 步骤 5：Concat.

* 6.1 where one number of the Concat comes from: which ``heads[b, i, t, m]`` feeds ``concat[b, t, j]`` (right and
  buggy merge);
* 6.2 a bug hunt: a merge_heads without its transpose; which properties fail (computed on the buggy
  function), and the fix;
* 6.3 swap two heads inside the concatenated tensor (slices of the last axis, without changing the input).
"""
from __future__ import annotations

import torch

from mha.steps import merge_heads, split_heads
from .answers import as_shape, expect_shape, expect_tensor, name_the_match
from .gradients import expect_gradients
from .records import Bug, as_names, check_repair, dict_answer
from .running import call
from .verdicts import checker, Mistake

__all__ = ["check_concat_source", "check_merge_bug_repair", "check_swap_heads"]

# ---------------------------------------------------------------- 6.1 (where does one number of the Concat come from)
SOURCE_CASES = [(5, 4, 16), (3, 2, 5), (4, 3, 2)]  # (L, h, d_k): h != d_k, L != h
SOURCE_WARMUP = (6, 3, 4, 4, 6)  # (L, h, d_k, t, j) of the self-check, which asks about merge_interleaved


def merge_interleaved(x: torch.Tensor) -> torch.Tensor:
    """The self-check's merge (not the lecture's): (B, h, L, d_k) permuted to (B, L, d_k, h), then the last two
    axes joined, so that the heads take turns along a row. Its source map is neither answer of exercise 6.1."""
    B, h, L, d_k = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, L, d_k * h)  # (B, L, d_k, h) -> (B, L, d_model)


def source_map(merge, L: int, h: int, d_k: int) -> dict:
    """``{(t, j): (i, t', m)}``: ``merge(heads)[b, t, j] == heads[b, i, t', m]``, traced with numbered heads."""
    numbered = torch.arange(h * L * d_k, dtype=torch.float64).view(1, h, L, d_k)  # each number says where it sits
    out = merge(numbered)[0]  # (L, h * d_k)
    return {(t, j): tuple(int(n) for n in torch.unravel_index(out[t, j].long(), (h, L, d_k)))
            for t in range(L) for j in range(h * d_k)}


SOURCE_WRONGS = [  # (name, (t, j, L, h, d_k) -> the (i, t', m) a typical mistake gives, why)
    ("interleaved", lambda t, j, L, h, d_k: (j % h, t, j // h),
     "把一行读成了 (d_k, h)：头不是隔 h 列交错放的，每个头占连续的 d_k 列 [i·d_k, (i+1)·d_k)"),
    ("swapped", lambda t, j, L, h, d_k: (j % d_k, t, j // d_k), "i 和 m 放反了：j // d_k 是头的代码下标，j % d_k 是头里那一维的下标"),
    ("from 1", lambda t, j, L, h, d_k: (j // d_k + 1, t, j % d_k + 1),
     "头 i 和维 m 从 1 数了（token 没变）：代码下标都从 0 数，i = 0 就是第 1 个头"),
]
BUGGY_IS_RIGHT = ("这是正确 Concat 的来源；merge_heads_buggy 没有 transpose，它的一行装的不是一个 token。"
                  "reshape 只按内存顺序重新切：先算出 (t, j) 在一句话里排第几个数，再按 heads 的 (h, L, d_k) 顺序拆开")


@checker("ch06", "6.1", "Concat 里的一个数来自哪个头、哪个 token")
def check_concat_source(answer):
    """``answer = {"right": fn, "buggy": fn}``, each ``fn(t, j, L, n_heads, d_k) -> (i, t', m)``: the number at
    ``concat[b, t, j]`` is ``heads[b, i, t', m]``, for :func:`mha.merge_heads` ("right") and for
    :func:`merge_heads_buggy` ("buggy"). Nothing is forbidden: tracing numbers through the merges is fine."""
    dict_answer(answer, ("right", "buggy"), '{"right": 函数, "buggy": 函数}')
    for key, merge in (("right", merge_heads), ("buggy", merge_heads_buggy)):
        for L, h, d_k in SOURCE_CASES:
            truth, got = source_map(merge, L, h, d_k), {}
            size = f"L={L}、n_heads={h}、d_k={d_k}"
            for t, j in truth:
                out = call(answer[key], t, j, L, h, d_k, what=f'answer["{key}"]')
                out = out.tolist() if isinstance(out, torch.Tensor) and out.dim() == 1 else out  # tensor([i, t, m])
                got[t, j] = as_shape(out, f'{size} 时 answer["{key}"]({t}, {j}, ...) 的返回值 (i, t, m)')
                if len(got[t, j]) != 3:
                    raise Mistake(f'{size} 时 answer["{key}"]({t}, {j}, ...) 应该返回三个下标 (i, t, m)，却返回了 {got[t, j]}')
            if got == truth:
                continue
            (t, j), = [next(k for k in truth if got[k] != truth[k])]
            what = f'{size} 时 answer["{key}"]({t}, {j}, ...) = {got[t, j]}'
            if key == "buggy" and got == source_map(merge_heads, L, h, d_k):
                raise Mistake(f"{what}：{BUGGY_IS_RIGHT}")
            for _, wrong, why in SOURCE_WRONGS if key == "right" else ():  # their whys describe the right merge
                if all(got[k] == wrong(*k, L, h, d_k) for k in truth):
                    raise Mistake(f"{what}：{why}")
            if all(n - m in (0, 1) for k in truth for n, m in zip(got[k], truth[k])):
                raise Mistake(f"{what}：下标要从 0 数，你的答案像是从 1 数的（应该是 {truth[t, j]}）：代码里的 i、t、m 都从 0 数")
            raise Mistake(f"{what} 不对，应该是 {truth[t, j]}。" + (
                "提示：代码下标为 i 的头占 Concat 的 [i·d_k, (i+1)·d_k) 列，token 不动" if key == "right" else
                "提示：buggy 没有搬动任何数，concat 的一句话和 heads 的一句话在内存里是同一串数"))


# ---------------------------------------------------------------- 6.2 (bug hunt: no transpose)
def call_merge(fn, x, what, *more):
    """Call the student's merge; a ``view`` on a non-contiguous tensor is named as such."""
    try:
        return call(fn, x, *more, what=what)
    except Mistake as m:
        if "view size is not compatible" in str(m):
            raise Mistake("忘了 .contiguous()：transpose 之后张量在内存里不再连续，直接 .view 会报错；"
                          "先 .contiguous() 再 .view，或者用 .reshape") from None
        raise


def merge_heads_buggy(x: torch.Tensor) -> torch.Tensor:
    """The bug of exercise 6.2: (B, h, L, d_k) reshaped straight to (B, L, h·d_k), without the transpose."""
    B, h, L, d_k = x.shape
    return x.reshape(B, L, h * d_k)


PROPERTIES = {
    "shape": "返回的形状是 (B, L, h·d_k)",
    "undoes_split": "merge(split_heads(x, h)) 还原出 x",
    "per_token": "输出的第 t 行只用到各个头的第 t 个 token",
    "same_numbers": "输出里的数和输入是同一批数（只是换了位置）",
    "right_if_one_head": "h = 1 时，结果和正确的 Concat 一样",
    "right_if_one_token": "L = 1 时，结果和正确的 Concat 一样",
}


def _properties_that_fail(merge) -> set:
    """Which of :data:`PROPERTIES` ``merge`` breaks, measured on an input with h != d_k and L > 1."""
    B, h, L, d_k = 2, 3, 4, 5
    x = torch.randn(B, L, h * d_k)
    heads = split_heads(x, h)  # (B, h, L, d_k)
    out = merge(heads)
    marked = torch.zeros(B, h, L, d_k)
    marked[:, :, 1] = 1.0  # token 1 of every head
    rows = merge(marked).reshape(B, L, -1).abs().sum(-1)[0]  # (L,)
    one_head, one_token = torch.randn(B, 1, L, d_k), torch.randn(B, h, 1, d_k)
    holds = {"shape": tuple(out.shape) == (B, L, h * d_k),
             "undoes_split": out.shape == x.shape and torch.equal(out, x),
             "per_token": rows.nonzero().flatten().tolist() == [1],
             "same_numbers": torch.equal(out.flatten().sort().values, heads.flatten().sort().values),
             "right_if_one_head": torch.equal(merge(one_head), merge_heads(one_head)),
             "right_if_one_token": torch.equal(merge(one_token), merge_heads(one_token))}
    return {key for key, held in holds.items() if not held}


FAILS_WHY = {"shape": "形状总是对的，所以这个 bug 很难发现", "same_numbers": "只是换了位置，数还是那些数",
             "right_if_one_head": "只有一个头时，(B, 1, L, d_k) 和 (B, L, 1, d_k) 在内存里是同一串数，不 transpose 也一样",
             "right_if_one_token": "只有一个 token 时，(B, h, 1, d_k) 和 (B, 1, h, d_k) 在内存里是同一串数，不 transpose 也一样"}


# ---------------------------------------------------------------- 6.3 (swap two heads in the concat)
SWAP_CASES = [(2, 3, 4, 5, 0, 2), (1, 4, 3, 2, 2, 0), (2, 2, 6, 3, 1, 1)]  # (B, L, h, d_k, i, j)


def _swap_wrongs(concat, i, j, h):
    """Typical wrong swaps: tokens swapped instead of heads, or one head copied over the other."""
    B, L, d = concat.shape
    if max(i, j) < L:
        tokens = concat.clone()
        tokens[:, [i, j]] = tokens[:, [j, i]]
        yield tokens, (f"你交换的是第 {i}、{j} 个 token（第 1 个轴），不是头：头在最后一个轴上，"
                       "第 i 个头是 [i*d_k, (i+1)*d_k) 这几列")
    for dst, src in ((i, j), (j, i)):
        both = concat.view(B, L, h, d // h).clone()
        both[:, :, dst] = both[:, :, src]  # the second copy reads the already overwritten head
        if i != j:
            yield both.reshape(B, L, d), ("两个头变成了同一个：先把一段复制过去，再复制回来时读到的已经是被覆盖的值；"
                                          "先 clone 一份原来的头 i（或一次性用索引 [j, i] 取出）再交换")


@checker("ch06", "6.3", "在 Concat 的结果里交换两个头")
def check_swap_heads(fn):
    """``fn(concat (B, L, h·d_k), i, j, n_heads)``: a new tensor with the d_k columns of heads i and j exchanged;
    ``concat`` itself must not change; gradients reach it."""
    for B, L, h, d_k, i, j in SWAP_CASES:
        concat = torch.randn(B, L, h * d_k, requires_grad=True)
        where = f"concat {(B, L, h * d_k)}、i={i}、j={j}、n_heads={h} 时"
        out = expect_tensor(call(fn, concat, i, j, h, what="swap_heads"), "返回值")  # the prompt forbids nothing
        heads = concat.detach().view(B, L, h, d_k).clone()
        heads[:, :, [i, j]] = heads[:, :, [j, i]]
        want = heads.reshape(B, L, h * d_k)
        expect_shape(out, want.shape, f"{where}的返回值", hint="交换头不改变形状")
        if out.untyped_storage().data_ptr() == concat.untyped_storage().data_ptr():
            raise Mistake(f"{where}返回的是 concat 本身（或它的一个视图），不是新张量：以后改动一个，另一个也跟着变；"
                          "i == j 时也要返回一份拷贝，例如 concat.clone()")
        if not torch.allclose(out.detach(), want):
            name_the_match(out.detach(), _swap_wrongs(concat.detach(), i, j, h), prefix=where, same=torch.allclose)
            raise Mistake(f"{where}结果不对：头 i 的 d_k 列和头 j 的 d_k 列要互换，别的列不动")
        expect_gradients(out, {"concat": concat}, f"{where}的返回值")


# ---------------------------------------------------------------- 6.2 (reworked): which properties fail, and the rescue
REPAIR_CASES = [(1, 2, 3, 4), (2, 4, 5, 3), (3, 3, 2, 5)]  # (B, h, L, d_k): h != d_k, L > 1, L != h


@checker("ch06", "6.2", "找 bug：merge_heads 少了 transpose，再把拼错的结果救回来")
def check_merge_bug_repair(answer):
    """``answer = {"fails": [property keys], "repair": fn}``: which of :data:`PROPERTIES` :func:`merge_heads_buggy`
    breaks, and ``fn(wrong, n_heads)`` that turns ``wrong = merge_heads_buggy(heads)`` (B, L, h·d_k) into the right
    Concat ``merge_heads(heads)`` without the heads."""
    dict_answer(answer, ("fails", "repair"), '{"fails": [...], "repair": 函数}')
    said, truth = as_names(answer["fails"], PROPERTIES, 'answer["fails"]'), _properties_that_fail(merge_heads_buggy)
    for key in sorted(said - truth):
        raise Mistake(f"“{PROPERTIES[key]}”其实成立：{FAILS_WHY.get(key, '再试一试')}")
    for key in sorted(truth - said):
        raise Mistake(f"还漏了一条不成立的性质：“{PROPERTIES[key]}”。用 merge_heads_buggy 试一试，例如 h ≠ d_k、L > 1 的输入")
    repair = answer["repair"]
    check_repair(lambda wrong, h: call_merge(repair, wrong, 'answer["repair"]', h), map(_merge_bug, REPAIR_CASES))


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
