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
from mha.course.exercises import (check_all_head_weights, check_middle_widths, check_padding_mask, check_zero_weights)
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


# ---------------------------------------------------------------- 9.3 middle widths

def widths_ok(B, L, d_model, n_heads, d_k, d_v):
    h = n_heads
    return {
        "q_proj": (B, L, h * d_k), "v_proj": (B, L, h * d_v),
        "q": (B, h, L, d_k), "k": (B, h, L, d_k), "v": (B, h, L, d_v),
        "scores": (B, h, L, L), "heads": (B, h, L, d_v),
        "concat": (B, L, h * d_v), "output": (B, L, d_model),
    }


def widths_map(convert, keys=None):
    """The right answer with some shapes written another way."""
    return shapes_mapped(widths_ok, convert, keys)


def _widths_sizes(B, L, d_model, n_heads, d_k, d_v):
    return dict(B=B, L=L, d_model=d_model, h=n_heads, d_k=d_k, d_v=d_v,
                hd_k=n_heads * d_k, hd_v=n_heads * d_v, d_model_h=d_model // n_heads)


def widths_with(**changes):
    return shapes_changed(widths_ok, _widths_sizes, **changes)


def widths_by_running_mha(B, L, d_model, n_heads, d_k, d_v):
    out = widths_ok(B, L, d_model, n_heads, d_k, d_v)
    out["q"] = tuple(mha.split_heads(torch.zeros(B, L, n_heads * d_k), n_heads).shape)
    return out


WIDTHS_RIGHT = answers_for(check_middle_widths, [
    widths_ok,
    *shape_styles(widths_ok, "scores"),
    widths_map(np.array),  # a 1-d numpy array of ints
    lambda B, L, d_model, n_heads, d_k, d_v: {**widths_ok(B, L, d_model, n_heads, d_k, d_v), "extra": "ignored"},
])

WIDTHS_WRONG = mistakes_for(check_middle_widths, [
    (widths_with(concat=("B", "L", "d_model")), ["h·d_v"]),
    (widths_with(q_proj=("B", "L", "d_model")), ["h·d_k"]),
    (widths_with(v=("B", "h", "L", "d_k"), heads=("B", "h", "L", "d_k")), ["不是 d_k"]),
    (widths_with(scores=("B", "h", "L", "d_k")), ["和 d_k、d_v 无关"]),
    (widths_with(output=("B", "L", "hd_v")), ["映射回 d_model"]),
    (widths_with(q=("B", "h", "L", "d_model_h")), ["不再是 d_model / h"]),
    (widths_with(k=("B", "L", "h", "d_k")), ["transpose"]),
    (lambda B, L, d, h, d_k, d_v: widths_ok(B, L, d, h, d // h, d // h), ['shapes["q_proj"]']),  # standard widths only
    (lambda *a: widths_ok(1, 4, 6, 2, 2, 4), ["B=2"]),  # a fixed answer
    (shapes_without(widths_ok, "concat"), ["缺少", "concat"]),
    (widths_map(lambda s: None, ["heads"]), ['shapes["heads"]', "是 None"]),
    (widths_map(lambda s: (s[0] + 0.5,) + s[1:], ["v"]), ['shapes["v"]', "应该是整数"]),
    (widths_map(lambda s: (True,) + s[1:], ["v"]), ["布尔值"]),
    (widths_map(lambda s: torch.zeros(s), ["q"]), ["tuple(t.shape)"]),
    (widths_map(str, ["k"]), ['shapes["k"]', "tuple"]),
    (widths_by_running_mha, [SHORTCUT, "mha.split_heads"]),
    (lambda *a: [widths_ok(*a)], ["dict"]),
    (lambda *a: None, ["返回了 None"]),
])


# ---------------------------------------------------------------- 9.2 (reworked) every head, split by hand

def all_heads_ok(q_proj, k_proj, n_heads, key_mask):
    L, d_model = q_proj.shape
    S, d_k = k_proj.shape[0], d_model // n_heads
    q = q_proj.view(L, n_heads, d_k).transpose(0, 1)   # (h, L, d_k)
    k = k_proj.view(S, n_heads, d_k).transpose(0, 1)   # (h, S, d_k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    return torch.softmax(scores.masked_fill(~key_mask, float("-inf")), dim=-1)


def all_heads_loop(qp, kp, h, m):  # renamed arguments, a loop over heads, torch.stack
    d_k = qp.shape[1] // h
    out = []
    for i in range(h):
        s = qp[:, i * d_k:(i + 1) * d_k] @ kp[:, i * d_k:(i + 1) * d_k].T / d_k ** 0.5
        out.append(torch.softmax(s.masked_fill(~m, -1e9), dim=-1))
    return torch.stack(out)


def all_heads_chunk(q_proj, k_proj, n_heads, key_mask):  # torch.chunk + einsum + F.softmax + finfo.min
    q = torch.stack(q_proj.chunk(n_heads, dim=-1))
    k = torch.stack(k_proj.chunk(n_heads, dim=-1))
    s = torch.einsum("hld,hsd->hls", q, k) / math.sqrt(q.shape[-1])
    return F.softmax(s.masked_fill(~key_mask, torch.finfo(s.dtype).min), dim=-1)


def _all_heads_variant(view, scale=lambda d_k, d_model: math.sqrt(d_k), dim=-1, mask=lambda m: m, after=False):
    def fn(q_proj, k_proj, n_heads, key_mask):
        L, d_model = q_proj.shape
        S, d_k = k_proj.shape[0], d_model // n_heads
        q, k = view(q_proj, L, n_heads, d_k), view(k_proj, S, n_heads, d_k)
        s = q @ k.transpose(-2, -1) / scale(d_k, d_model)
        if after:
            return torch.softmax(s, dim=-1).masked_fill(~key_mask, 0.0)
        return torch.softmax(s.masked_fill(~mask(key_mask), -1e9), dim=dim)
    return fn


def _right_view(t, n, h, d_k):
    return t.view(n, h, d_k).transpose(0, 1)


def all_heads_wrong_gradient(q, k, h, m):  # right values, but the gradient to q_proj is scaled
    w = all_heads_ok(q, k, h, m)
    return w + (q.sum() - q.sum().detach()) * 1e-2


ALL_HEADS_RIGHT = answers_for(check_all_head_weights, [
    all_heads_ok,
    all_heads_loop,
    all_heads_chunk,
    lambda q, k, h, m: all_heads_ok(q.float(), k.float(), h, m),  # float32 is fine
])

ALL_HEADS_WRONG = mistakes_for(check_all_head_weights, [
    (_all_heads_variant(lambda t, n, h, d_k: t.reshape(h, n, d_k)), ["少了 transpose"]),
    (_all_heads_variant(lambda t, n, h, d_k: t.view(n, d_k, h).permute(2, 0, 1)), ["隔 h 取一列"]),
    (_all_heads_variant(_right_view, scale=lambda d_k, d_model: 1.0), ["忘了除以 √d_k"]),
    (_all_heads_variant(_right_view, scale=lambda d_k, d_model: math.sqrt(d_model)), ["√d_model"]),
    (_all_heads_variant(_right_view, dim=-2), ["softmax 的轴错了"]),
    (_all_heads_variant(_right_view, mask=lambda m: ~m), ["极性反了"]),
    (_all_heads_variant(_right_view, mask=lambda m: torch.ones_like(m)), ["没有用掩码"]),
    (_all_heads_variant(_right_view, after=True), ["softmax 之后"]),
    (lambda q, k, h, m: all_heads_ok(q, k, h, m).transpose(0, 1), ["(L, h, S)"]),
    (lambda q, k, h, m: all_heads_ok(q, k, h, m).mean(0), ["(L, S)", "不要把头合并"]),
    (lambda q, k, h, m: all_heads_ok(q, k, h, m).transpose(1, 2), ["(h, S, L)"]),
    (lambda q, k, h, m: all_heads_ok(q, k, h, m).detach(), ["不能求梯度"]),
    (lambda q, k, h, m: all_heads_ok(q, k.detach(), h, m), ["梯度传不到 k_proj"]),
    (all_heads_wrong_gradient, ["梯度不对", "q_proj"]),
    (lambda q, k, h, m: mha.masked_softmax(mha.attention_scores(mha.split_heads(q[None], h), mha.split_heads(k[None], h)), m)[0],
     ["不能调用现成的", "mha.split_heads"]),
    (lambda q, k, h, m: F.scaled_dot_product_attention(q, k, k), ["不能调用现成的", "scaled_dot_product_attention"]),
    (lambda q, k, h, m: q @ k, ["运行时抛出了"]),  # a torch error inside the student's code
    (lambda q, k, h, m: None, ["返回了 None"]),
    (raise_value_error, ["ValueError: boom"]),
])


# ---------------------------------------------------------------- the tables, run
test_right_answers_pass = right_answers(PAD_RIGHT, ALL_HEADS_RIGHT, WIDTHS_RIGHT)
# a student's 9.1: the mask counted from the first PAD on (a PAD in the middle of a sentence is missed)
FROM_FIRST_PAD = [(check_padding_mask, lambda ids, p: ((ids == p).long().cumsum(-1) == 0)[:, None, None, :], "第一个 PAD")]
test_wrong_answers_are_named = wrong_answers(PAD_WRONG, ALL_HEADS_WRONG, WIDTHS_WRONG, FROM_FIRST_PAD)
# The stub and garbage answers of these exercises beyond the generic ones (tests/checkers/test_exercises_common.py).
test_stubs_are_not_done = not_done_answers(answers_for(check_middle_widths,
                                                      shape_dict_stubs(widths_ok, 1, 1, 2, 1, 1, 1)))
test_garbage_gets_a_verdict = wrong_answers(every([check_padding_mask, check_all_head_weights,  check_middle_widths],
                                                  RETURNED_GARBAGE + shape_dict_garbage(widths_ok, 1, 1, 2, 1, 1, 1)))


def test_one_head_weights_on_the_worked_example():
    """The reference in the notebook checks its answer against the layer: the checker's key agrees."""
    from mha.course.exercises.ch09 import _one_head_weights_reference

    torch.manual_seed(0)
    layer = mha.MultiHeadAttention(6, 2, dropout=0.0)
    x = torch.randn(1, 4, 6)
    mask = mha.padding_mask(torch.tensor([[1, 2, 3, 0]]), 0)
    with torch.no_grad():
        _, weights = layer(x, x, x, mask, need_weights=True)
        q_proj, k_proj = layer.W_q(x)[0], layer.W_k(x)[0]
        for head in range(2):
            mine = _one_head_weights_reference(q_proj, k_proj, head, 2, mask[0, 0, 0])
            assert torch.allclose(mine, weights[0, head], atol=1e-6)


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
