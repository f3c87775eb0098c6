"""Chapter 09 checkers, table-driven: every right answer style passes, stubs are "not done",
every wrong or forbidden answer fails with a verdict that names it, nothing reaches the
checker's own error branch (``verdict`` asserts that). The generic stub and garbage answers are
tried on every checker in tests/checkers/test_exercises_common.py."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import mha
from mha.course.exercises import check_masked_mean, check_pad_change, check_padding_mask, check_zero_weights
from exercise_support import (RETURNED_GARBAGE, answers_for, every, fails_with, mistakes_for, not_done_answers,
                              passes, raise_value_error, right_answers, shape_dict_garbage, shape_dict_stubs,
                              shape_styles, shapes_changed, shapes_mapped, shapes_without, wrong_answers)

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
    # the caller's ids changed in place, named with the student's own argument name
    (pad_mutates, [MUTATED, "参数 ids"]),
    (lambda ids, p: None, ["返回了 None", "return"]),
    (raise_value_error, ["ValueError: boom"]),
])


# ---------------------------------------------------------------- 9.2 one head's weights

def weights_ok(q_proj, k_proj, head, n_heads, key_mask):
    d_k = q_proj.shape[-1] // n_heads
    q_i = q_proj[:, head * d_k:(head + 1) * d_k]
    k_i = k_proj[:, head * d_k:(head + 1) * d_k]
    scores = q_i @ k_i.T / math.sqrt(d_k)
    return torch.softmax(scores.masked_fill(~key_mask, -1e9), dim=-1)


def weights_einsum_view(Q, K, i, h, keep):  # renamed args, view into heads, einsum
    L, d = Q.shape
    q = Q.view(L, h, d // h)[:, i]
    k = K.reshape(K.shape[0], h, d // h)[:, i]
    s = torch.einsum("ld,sd->ls", q, k) / (d // h) ** 0.5
    return torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1).nan_to_num(0.0)


def weights_float64(q_proj, k_proj, head, n_heads, key_mask):  # float64 inside and out
    return weights_ok(q_proj.double(), k_proj.double(), head, n_heads, key_mask)


def weights_loop(q_proj, k_proj, head, n_heads, key_mask):  # row by row
    rows = [weights_ok(q_proj[l:l + 1], k_proj, head, n_heads, key_mask)[0] for l in range(q_proj.shape[0])]
    return torch.stack(rows)


def weights_where(q_proj, k_proj, head, n_heads, key_mask):
    d_k = q_proj.shape[-1] // n_heads
    cols = slice(head * d_k, (head + 1) * d_k)
    s = q_proj[:, cols] @ k_proj[:, cols].transpose(0, 1) / math.sqrt(d_k)
    return F.softmax(torch.where(key_mask, s, torch.tensor(float("-inf"))), dim=1)


def _cols(q, k, head, n):
    d_k = q.shape[-1] // n
    return q[:, head * d_k:(head + 1) * d_k], k[:, head * d_k:(head + 1) * d_k], d_k


def w_no_scale(q, k, head, n, m):
    q_i, k_i, d_k = _cols(q, k, head, n)
    return torch.softmax((q_i @ k_i.T).masked_fill(~m, -1e9), dim=-1)


def w_dmodel_scale(q, k, head, n, m):
    q_i, k_i, d_k = _cols(q, k, head, n)
    return torch.softmax((q_i @ k_i.T / math.sqrt(q.shape[-1])).masked_fill(~m, -1e9), dim=-1)


def w_axis0(q, k, head, n, m):
    q_i, k_i, d_k = _cols(q, k, head, n)
    return torch.softmax((q_i @ k_i.T / math.sqrt(d_k)).masked_fill(~m, -1e9), dim=0)


def w_polarity(q, k, head, n, m):
    q_i, k_i, d_k = _cols(q, k, head, n)
    return torch.softmax((q_i @ k_i.T / math.sqrt(d_k)).masked_fill(m, -1e9), dim=-1)


def w_zero_after(q, k, head, n, m):
    q_i, k_i, d_k = _cols(q, k, head, n)
    return torch.softmax(q_i @ k_i.T / math.sqrt(d_k), dim=-1).masked_fill(~m, 0.0)


def w_no_mask(q, k, head, n, m):
    q_i, k_i, d_k = _cols(q, k, head, n)
    return torch.softmax(q_i @ k_i.T / math.sqrt(d_k), dim=-1)


def w_interleaved(q, k, head, n, m):
    d_k = q.shape[-1] // n
    s = q[:, head::n] @ k[:, head::n].T / math.sqrt(d_k)
    return torch.softmax(s.masked_fill(~m, -1e9), dim=-1)


def w_no_grad(q, k, head, n, m):
    with torch.no_grad():
        return weights_ok(q, k, head, n, m)


def w_detached_k(q, k, head, n, m):
    return weights_ok(q, k.detach(), head, n, m)


def w_numpy(q, k, head, n, m):  # computed in numpy, handed back as a tensor: no gradient
    q_i, k_i, d_k = _cols(q.detach().numpy(), k.detach().numpy(), head, n)
    s = np.where(m.numpy(), q_i @ k_i.T / math.sqrt(d_k), -1e9)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return torch.from_numpy(e / e.sum(axis=-1, keepdims=True))


def w_scales_in_place(q_proj, k_proj, head, n_heads, key_mask):
    q_proj /= math.sqrt(q_proj.shape[-1] // n_heads)
    q_i, k_i, _ = _cols(q_proj, k_proj, head, n_heads)
    return torch.softmax((q_i @ k_i.T).masked_fill(~key_mask, -1e9), dim=-1)


def w_mask_in_place(q, k, head, n, key_mask):
    key_mask[-1] = False
    return weights_ok(q, k, head, n, key_mask)


def w_mha_steps(q, k, head, n, m):
    q_i, k_i, _ = _cols(q, k, head, n)
    return mha.masked_softmax(mha.attention_scores(q_i, k_i), m)


def w_sdpa(q, k, head, n, m):
    q_i, k_i, _ = _cols(q, k, head, n)
    return F.scaled_dot_product_attention(q_i, k_i, torch.eye(k.shape[0]), attn_mask=m)  # V = I gives the weights


def w_torch_mha(q, k, head, n, m):
    nn.MultiheadAttention(q.shape[-1], n)
    return weights_ok(q, k, head, n, m)


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


MEAN_WRONG = mistakes_for(check_masked_mean, [
    (lambda o, m: o.mean(1), "PAD 的行也算进了平均"),
    (lambda o, m: (o * m[:, 0, 0, :, None]).sum(1) / o.shape[1], "除以了 L"),
    (lambda o, m: (o * m[:, 0, 0, :, None]).sum(1), "没有除以"),
    (_mean_by_length, "按长度"),
    (lambda o, m: mean_ok(o, m).detach(), "不能求梯度"),
    (_mean_in_place, MUTATED),
    (lambda o, m: o.mul_(m[:, 0, 0, :, None]).sum(1), "先 .clone() 一份"),   # in place on the input itself
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
