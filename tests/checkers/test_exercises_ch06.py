"""Exercise checkers of chapter 06, table-driven: every correct style passes, stubs are "not done",
every wrong, forbidden or broken answer gets a verdict that names what happened (never the checker's own error).
The generic stub and garbage answers are tried on every checker in tests/checkers/test_exercises_common.py."""
import math

import numpy as np
import torch

import mha
from mha.course.exercises import (check_concat_source, check_merge_bug_repair, check_swap_heads, results)
from mha.course.exercises.ch06 import merge_heads_buggy
from mha.steps import merge_heads as imported_merge_heads
from exercise_support import answers_for, mistakes_for, verdict_allowing_prints, every, not_done_answers, raise_value_error, right_answers, wrong_answers


# ---------------------------------------------------------------- references
def merge_reference(x):
    B, h, L, d_k = x.shape
    x = x.transpose(1, 2).contiguous()  # (B, L, h, d_k)
    return x.view(B, L, h * d_k)  # (B, L, d_model)


def head_reference(concat, i, n_heads):
    d_k = concat.shape[-1] // n_heads
    return concat[..., i * d_k:(i + 1) * d_k]  # (B, L, d_k)


def _merge_loop(x):
    return torch.cat([x[:, i] for i in range(x.shape[1])], dim=-1)


CHECKERS = [check_concat_source]


def src_right(t, j, L, h, d_k):
    return j // d_k, t, j % d_k


def src_buggy(t, j, L, h, d_k):
    p = t * h * d_k + j
    return p // (L * d_k), p // d_k % L, p % d_k


def src_traced(merge):
    """An honest experiment: number the heads, merge, read the number back (prints allowed)."""
    def fn(t, j, L, h, d_k):
        numbered = torch.arange(h * L * d_k).view(1, h, L, d_k)
        n = int(merge(numbered)[0, t, j])
        return [n // (L * d_k), n // d_k % L, n % d_k]
    return fn


RIGHT = [
    # 6.1: by formula, by tracing numbered heads through the merges, numpy integers
    (check_concat_source, {"right": src_right, "buggy": src_buggy}),
    (check_concat_source, {"right": src_traced(mha.merge_heads), "buggy": src_traced(merge_heads_buggy)}),
    (check_concat_source, {"right": lambda t, j, L, h, d: np.array([j // d, t, j % d]),
                           "buggy": lambda t, j, L, h, d: tuple(map(int, np.unravel_index(t * h * d + j, (h, L, d))))}),
    (check_concat_source, {"right": lambda t, j, L, h, d: torch.tensor([j // d, t, j % d]), "buggy": src_buggy}),
]


test_right_answers_pass = right_answers(RIGHT)

test_stubs_are_not_done = not_done_answers([
    (check_concat_source, {"right": ..., "buggy": ...}),
    (check_concat_source, {"right": src_right, "buggy": ...}),
])

# Garbage only these exercises' checkers get (the generic garbage is in tests/checkers/test_exercises_common.py).
GARBAGE = [
    "(3, 5, 64)", (3, 5, 64), ((3, 5, 4, 16),), ("a", "b"), ((3.5,), (1,)), raise_value_error,
    lambda *a: torch.full((2, 3, 4), math.nan),
    lambda x: merge_reference(x).long(),
    lambda x: merge_reference(x)[..., :-1],
    lambda x: merge_reference(x).numpy(),
    lambda c, i, h: head_reference(c, i, h)[0],
    lambda c, i, h: head_reference(c, i, h).tolist(),
    lambda: 1,
]
test_garbage_gets_a_verdict = wrong_answers(every(CHECKERS, GARBAGE))


# ---------------------------------------------------------------- wrong answers, each named
def _transpose_in_place(x):
    x.transpose_(1, 2)
    return x.reshape(x.shape[0], x.shape[1], -1)


def _scale_in_place(x):
    x.mul_(2.0)
    return merge_reference(x) / 2


def _no_grad_merge(x):
    with torch.no_grad():
        return merge_reference(x)


def _zeroes_concat(c, i, h):
    out = head_reference(c, i, h).clone()
    c.zero_()
    return out


def _width(c, h):
    return c.shape[-1] // h


def _forgot_return(*args):
    args[0] if args else None


SHORTCUT = "不能调用现成的"

WRONG = [
    # 6.1: each typical mistake named
    (check_concat_source, {"right": lambda t, j, L, h, d: (j % h, t, j // h), "buggy": src_buggy}, ["(d_k, h)", "交错"]),
    (check_concat_source, {"right": lambda t, j, L, h, d: (j % d, t, j // d), "buggy": src_buggy}, "放反了"),
    (check_concat_source, {"right": lambda t, j, L, h, d: (j // d + 1, t, j % d + 1), "buggy": src_buggy},
     ["头 i 和维 m 从 1 数了", "token 没变"]),
    (check_concat_source, {"right": lambda t, j, L, h, d: (j // d + 1, t, j % d), "buggy": src_buggy}, ["从 0 数", "从 1 数的"]),
    (check_concat_source, {"right": lambda t, j, L, h, d: (j // d + 1, t + 1, j % d + 1), "buggy": src_buggy},
     ["从 0 数", "从 1 数的"]),  # every index from 1: once a generic column hint
    (check_concat_source, {"right": src_right, "buggy": lambda t, j, L, h, d: tuple(n + 1 for n in src_buggy(t, j, L, h, d))},
     ["从 0 数", "从 1 数的"]),
    (check_concat_source, {"right": src_right, "buggy": src_right}, ["正确 Concat 的来源", "没有 transpose"]),
    # review r10 M1: the right merge's mistakes are not named for the buggy half (their whys describe the right merge)
    (check_concat_source, {"right": src_right, "buggy": lambda t, j, L, h, d: (j % h, t, j // h)},
     ['answer["buggy"]', "不对", "buggy 没有搬动任何数"]),
    (check_concat_source, {"right": src_buggy, "buggy": src_buggy}, "不对"),
    (check_concat_source, {"right": lambda t, j, L, h, d: (j // d, t), "buggy": src_buggy}, "三个下标"),
    (check_concat_source, {"right": lambda t, j, L, h, d: None, "buggy": src_buggy}, "return"),
    (check_concat_source, {"right": src_right}, "缺少键"),
    (check_concat_source, (src_right, src_buggy), "字典"),
    # 6.2: wrong merges
    # 6.2: the input must not change
    # 6.2: shortcuts into mha are named, however they are reached
    # 6.2: a step of a layer must let the gradient through
    # 6.3
]


# ---------------------------------------------------------------- the reworked 6.2 (bug hunt) and 6.3 (swap two heads)
def merge_fixed(x):
    B, h, L, d_k = x.shape
    return x.transpose(1, 2).reshape(B, L, h * d_k)


def swap_ref(concat, i, j, h):
    B, L, d = concat.shape
    order = list(range(h))
    order[i], order[j] = order[j], order[i]
    return concat.view(B, L, h, d // h)[:, :, order].reshape(B, L, d)


def swap_overwrites(concat, i, j, h):
    d_k, out = concat.shape[-1] // h, concat.clone()
    out[..., i * d_k:(i + 1) * d_k] = out[..., j * d_k:(j + 1) * d_k]
    out[..., j * d_k:(j + 1) * d_k] = out[..., i * d_k:(i + 1) * d_k]
    return out


def swap_in_place(concat, i, j, h):
    d_k = concat.shape[-1] // h
    keep = concat[..., i * d_k:(i + 1) * d_k].clone()
    concat.data[..., i * d_k:(i + 1) * d_k] = concat[..., j * d_k:(j + 1) * d_k]
    concat.data[..., j * d_k:(j + 1) * d_k] = keep
    return concat * 1


FAILS = ["undoes_split", "per_token"]
RIGHT_NEW = [
             (check_swap_heads, swap_ref),
             (check_swap_heads, lambda c, i, j, h: mha.merge_heads(  # the prompt forbids nothing (issue 27)
                 mha.split_heads(c, h)[:, [j if t == i else i if t == j else t for t in range(h)]])),
             (check_swap_heads, lambda c, i, j, h: torch.cat([c[..., (j if t == i else i if t == j else t) * (c.shape[-1] // h):][..., :c.shape[-1] // h]
                                                               for t in range(h)], -1))]
WRONG_NEW = [
    (check_swap_heads, swap_overwrites, "变成了同一个"),
    (check_swap_heads, lambda c, i, j, h: c[:, [j if t == i else i if t == j else t for t in range(c.shape[1])]], "token"),
    (check_swap_heads, swap_in_place, "修改了输入"),
    (check_swap_heads, lambda c, i, j, h: c.clone(), "结果不对"),
    (check_swap_heads, lambda c, i, j, h: c if i == j else swap_ref(c, i, j, h), ["concat 本身", "新张量"]),  # review r6 L2
    (check_swap_heads, lambda c, i, j, h: swap_ref(c, i, j, h).detach(), "梯度"),
]


# ---------------------------------------------------------------- 6.2 reworked: which properties fail, and the rescue
def repair_ref(wrong, h):
    B, L, d = wrong.shape
    return wrong.view(B, h, L, d // h).transpose(1, 2).reshape(B, L, d)  # wrong holds the heads in their own order


def _repair_no_grad(wrong, h):
    with torch.no_grad():
        return repair_ref(wrong, h)


def _repair_in_place(wrong, h):
    wrong.data.add_(1.0)  # changes the caller's tensor
    return repair_ref(wrong, h) - 1.0


RIGHT_REPAIR = answers_for(check_merge_bug_repair, [
    {"fails": FAILS, "repair": repair_ref},
    {"fails": ("per_token", "undoes_split"), "repair": lambda w, h: mha.merge_heads(w.view(w.shape[0], h, w.shape[1], -1))},
    {"fails": FAILS, "repair": lambda w, h: merge_fixed(w.reshape(w.shape[0], h, w.shape[1], -1))},
    {"fails": FAILS, "repair": lambda w, h: repair_ref(w.double(), h)},
])
NOT_DONE_REPAIR = answers_for(check_merge_bug_repair, [{"fails": ..., "repair": repair_ref}, {"fails": FAILS, "repair": ...}])
WRONG_REPAIR = mistakes_for(check_merge_bug_repair, [
    ({"fails": ["shape", *FAILS], "repair": repair_ref}, "其实成立"),
    ({"fails": ["per_token"], "repair": repair_ref}, "漏了"),
    ({"fails": [*FAILS, "right_if_one_head"], "repair": repair_ref}, ["其实成立", "只有一个头"]),
    ({"fails": [*FAILS, "right_if_one_token"], "repair": repair_ref}, ["其实成立", "只有一个 token"]),
    ({"fails": FAILS, "repair": lambda w, h: w}, "wrong 本身"),
    ({"fails": FAILS, "repair": lambda w, h: mha.merge_heads(mha.split_heads(w, h))}, "wrong 本身"),
    ({"fails": FAILS, "repair": lambda w, h: mha.split_heads(w, h).reshape(w.shape)}, "读成了 (B, L, h, d_k)"),
    ({"fails": FAILS, "repair": lambda w, h: w.view(w.shape[0], h, w.shape[1], -1).transpose(1, 2).view(w.shape)},
     "忘了 .contiguous()"),
    ({"fails": FAILS, "repair": lambda w, h: w.view(w.shape[0], h, w.shape[1], -1).transpose(1, 2)}, "形状应该是"),
    ({"fails": FAILS, "repair": lambda w, h: repair_ref(w, h) * 1.001}, "数值不对"),
    ({"fails": FAILS, "repair": _repair_no_grad}, "不能求梯度"),
    ({"fails": FAILS, "repair": _repair_in_place}, ["修改了输入", "参数 wrong"]),
    ({"fails": FAILS}, "缺少键"),
])

test_wrong_answers_are_named = wrong_answers(WRONG, WRONG_NEW, WRONG_REPAIR)
test_new_right_answers_pass = right_answers(RIGHT_NEW, RIGHT_REPAIR)
test_new_stubs_are_not_done = not_done_answers(NOT_DONE_REPAIR)


def test_repair_that_prints_with_mha_fmt_passes(capsys):
    def printing(w, h):
        print(mha.fmt(w[0, 0, :3], 2))  # debugging prints with the book's own helper are allowed
        return repair_ref(w, h)
    ok, last = verdict_allowing_prints(capsys, check_merge_bug_repair, {"fails": FAILS, "repair": printing})
    assert ok is True and "✅" in last, last


def test_results_registry_lists_chapter():
    assert set(results("ch06")) == {"6.1", "6.2", "6.3"}
