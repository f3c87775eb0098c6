"""Chapter 09 checkers, table-driven: every right answer style passes, stubs are "not done",
every wrong or forbidden answer fails with a verdict that names it, nothing reaches the
checker's own error branch (``verdict`` asserts that). The generic stub and garbage answers are
tried on every checker in tests/checkers/test_exercises_common.py."""
import numpy as np
import torch

import mha
from mha.course.exercises import check_masked_mean, check_pad_change, check_padding_mask, check_zero_weights
from exercise_support import (RETURNED_GARBAGE, answers_for, every, mistakes_for, not_done_answers, raise_value_error,
                              right_answers, wrong_answers)

SHORTCUT = "不能调用现成的"
MUTATED = "修改了输入"


# ---------------------------------------------------------------- 9.1 padding mask

def pad_ok(ids, pad_id):
    return (ids != pad_id)[:, None, None, :]


def pad_loop(token_ids, pad):  # renamed arguments, a Python loop
    B, S = token_ids.shape
    out = torch.zeros(B, 1, 1, S, dtype=torch.bool)
    for b in range(B):
        for s in range(S):
            out[b, 0, 0, s] = bool(token_ids[b, s] != pad)
    return out


def pad_mutates(ids, pad_id):
    ids[ids == pad_id] = -1
    return (ids != -1)[:, None, None, :]


PAD_RIGHT = answers_for(check_padding_mask, [
    pad_ok,
    lambda ids, p: (ids != p).unsqueeze(1).unsqueeze(2),
    lambda ids, p: ids.ne(p).view(ids.shape[0], 1, 1, ids.shape[1]),
    lambda ids, p: ~(ids == p).reshape(ids.shape[0], 1, 1, -1),
    pad_loop,
])

PAD_WRONG = mistakes_for(check_padding_mask, [  # (answer, words the verdict must contain)
    (lambda ids, p: (ids == p)[:, None, None, :], ["极性反了"]),
    (lambda ids, p: (ids > p)[:, None, None, :], ["token_ids > pad_id", "!="]),
    (lambda ids, p: (ids < p)[:, None, None, :], ["token_ids < pad_id", "!="]),
    (lambda ids, p: (ids != 0)[:, None, None, :], ["写死", "pad_id"]),
    (lambda ids, p: (ids > 0)[:, None, None, :], ["写死"]),
    (lambda ids, p: ids != p, ["(B, S)"]),
    (lambda ids, p: (ids != p)[:, :, None, None], ["头的轴和 query 的轴都写成 1"]),
    (lambda ids, p: (ids != p).long()[:, None, None, :], ["dtype", "torch.bool"]),
    (lambda ids, p: (ids != p).float()[:, None, None, :], ["dtype"]),
    (lambda ids, p: torch.ones(ids.shape[0], 1, 1, ids.shape[1], dtype=torch.bool), ["位置不对"]),
    # forbidden shortcut, however it is reached
    (lambda ids, p: mha.padding_mask(ids, p), [SHORTCUT, "mha.padding_mask"]),
    (lambda ids, p: mha.padding_mask(ids, p).clone(), [SHORTCUT, "padding_mask"]),
    (lambda ids, p: mha.padding_mask(ids, p) & True, [SHORTCUT, "比较运算和索引", "自己搭出掩码"]),  # a mask's hint
    # the caller's ids changed in place, named with the student's own argument name
    (pad_mutates, [MUTATED, "参数 ids"]),
    (lambda ids, p: None, ["返回了 None", "return"]),
    (raise_value_error, ["ValueError: boom"]),
])


# ---------------------------------------------------------------- 9.2 the mean over real tokens
def mean_ok(out, pad_mask):
    keep = pad_mask[:, 0, 0, :, None].to(out.dtype)  # (B, L, 1)
    return (out * keep).sum(1) / keep.sum(1)


def mean_loop(out, pad_mask):  # a loop over sentences, boolean indexing, a debugging print
    rows = []
    for b in range(out.shape[0]):
        rows.append(out[b][pad_mask[b, 0, 0]].mean(0))
    return torch.stack(rows)


MEAN_RIGHT = answers_for(check_masked_mean, [
    mean_ok,
    mean_loop,
    lambda o, m: torch.einsum("bl,bld->bd", m.flatten(1).double(), o.double()) / m.flatten(1).sum(1, keepdim=True),
])


def _mean_in_place(out, pad_mask):
    out.data.mul_(pad_mask[:, 0, 0, :, None])
    return out.sum(1) / pad_mask.flatten(1).sum(1, keepdim=True)


def _mean_by_length(out, pad_mask):
    n = pad_mask.flatten(1).sum(1)
    return torch.stack([out[b, :int(n[b])].mean(0) for b in range(out.shape[0])])


def _mean_before_first_pad(out, pad_mask):  # stops at the first PAD: a PAD in the middle cuts the sentence
    n = pad_mask.flatten(1).int().cumprod(-1).sum(1)
    return torch.stack([out[b, :int(n[b])].mean(0) for b in range(out.shape[0])])


MEAN_WRONG = mistakes_for(check_masked_mean, [
    (lambda o, m: o.mean(1), "PAD 的行也算进了平均"),
    (lambda o, m: (o * m[:, 0, 0, :, None]).sum(1) / o.shape[1], "除以了 L"),
    (lambda o, m: (o * m[:, 0, 0, :, None]).sum(1), "没有除以"),
    (_mean_by_length, "按长度"),
    (_mean_before_first_pad, "第一个 PAD 之前"),
    (lambda o, m: mean_ok(o, ~m), "极性反了"),  # the mean over the PAD rows
    (lambda o, m: mean_ok(o, m).detach(), "不能求梯度"),
    (_mean_in_place, MUTATED),
    (lambda o, m: o.mul_(m[:, 0, 0, :, None]).sum(1), ["传进来的参数 o", "先 .clone() 一份"]),  # in place on the input
    (lambda o, m: mean_ok(o, m)[:, None], "形状应该是"),
    (lambda o, m: mean_ok(o, m) * 1.01, "数值不对"),
    (lambda o, m: (o * m).sum(1), "运行时抛出了"),  # (B, 1, 1, L) against (B, L, d) does not line up
])


# ---------------------------------------------------------------- 9.3 predict: only PAD's word vector changes
PAD_ROWS_RIGHT = answers_for(check_pad_change, [
    {"weights_rows": [3], "output_rows": [3]},
    {"weights_rows": torch.tensor([3]), "output_rows": (3,)},
])
PAD_ROWS_NOT_DONE = answers_for(check_pad_change, [{"weights_rows": [3], "output_rows": ...}])
PAD_ROWS_WRONG = mistakes_for(check_pad_change, [
    ({"weights_rows": [], "output_rows": [3]}, ["weights_rows", "照常算"]),
    ({"weights_rows": [3], "output_rows": [0, 1, 2, 3]}, ["output_rows", "挡住"]),
    ({"weights_rows": [4], "output_rows": [3]}, "从 0 数"),
    ({"weights_rows": [0, 3], "output_rows": [3]}, "提示"),
    ({"weights_rows": [3], "output_rows": [0, 1, 2]}, ["output_rows", "正好反了"]),
    ({"weights_rows": [0, 1, 2], "output_rows": [3]}, ["weights_rows", "正好反了"]),
    ({"weights_rows": [3]}, "缺少键"),
    ({"weights_rows": "3", "output_rows": [3]}, "列表"),
])


# ---------------------------------------------------------------- the tables, run
test_right_answers_pass = right_answers(PAD_RIGHT, MEAN_RIGHT, PAD_ROWS_RIGHT)
# a student's 9.1: the mask counted from the first PAD on (a PAD in the middle of a sentence is missed)
FROM_FIRST_PAD = [(check_padding_mask, lambda ids, p: ((ids == p).long().cumsum(-1) == 0)[:, None, None, :], "第一个 PAD")]
test_wrong_answers_are_named = wrong_answers(PAD_WRONG, MEAN_WRONG, PAD_ROWS_WRONG, FROM_FIRST_PAD)
test_stubs_are_not_done = not_done_answers(PAD_ROWS_NOT_DONE)
test_garbage_gets_a_verdict = wrong_answers(every([check_padding_mask, check_masked_mean], RETURNED_GARBAGE))


# ---------------------------------------------------------------- 9.4 (predict the zero weights)
test_zero_weights_right = right_answers([(check_zero_weights, 16), (check_zero_weights, 16.0), (check_zero_weights, np.int64(16))])
test_zero_weights_wrong = wrong_answers([
    (check_zero_weights, 8, "只数了一个头"),
    (check_zero_weights, 24, "只挡 key"),
    (check_zero_weights, 4, "只数了一次"),
    (check_zero_weights, 0, "不对"),
    (check_zero_weights, 16.5, "整数"),
    (check_zero_weights, "16", "整数"),
])
