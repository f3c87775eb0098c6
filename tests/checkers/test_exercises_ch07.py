"""Exercise checkers of chapter 07, table-driven: right answers in every style pass; every wrong, forbidden
or broken answer gets a verdict that names what happened (never the checker's own error). The stub answers
of these exercises are the generic ones; they, and the generic garbage, are tried in
tests/checkers/test_exercises_common.py."""
import copy
import math

import numpy as np
import torch

import mha
from exercise_support import answers_for, mistakes_for, raise_value_error, right_answers, wrong_answers
from mha.course.exercises import check_changed_outputs, check_head_matrix
from mha.course.exercises import (results)
from mha.course.exercises import check_remove_head

RIGHT = 512 * 512 + 512


# ---------------------------------------------------------------- 7.1


# ---------------------------------------------------------------- 7.2
def merge(heads):
    B, h, L, d_k = heads.shape
    return heads.transpose(1, 2).contiguous().view(B, L, h * d_k)  # (B, L, d_model)


def output_reference(heads, W_o):
    return W_o(merge(heads))  # (B, L, d_model)


def output_loop(heads, W_o):
    return W_o(torch.cat([heads[:, i] for i in range(heads.shape[1])], dim=-1))


def output_float64_inside(h, linear):  # renamed arguments, float64 inside
    concat = h.permute(0, 2, 1, 3).reshape(h.shape[0], h.shape[2], -1).double()
    return (concat @ linear.weight.double().T + linear.bias.double()).float()


def _mutating(heads, W_o):
    heads.mul_(2)
    return W_o(merge(heads))


def _mutating_weight(heads, W_o):
    W_o.weight.data.mul_(1.0).add_(1.0)
    return W_o(merge(heads))


def _transposing_in_place(heads, W_o):
    x = heads.transpose_(1, 2)
    return W_o(x.reshape(x.shape[0], x.shape[1], -1))


def _no_grad(heads, W_o):
    with torch.no_grad():
        return W_o(merge(heads))


def _no_return(heads, W_o):
    W_o(merge(heads))


# ---------------------------------------------------------------- 7.3
def contributions_reference(heads, W_o):
    d_k = heads.shape[-1]
    W_O = W_o.weight.T  # (d_model, d_model), the W^O of the formula
    parts = [heads[:, i] @ W_O[i * d_k:(i + 1) * d_k] for i in range(heads.shape[1])]  # each (B, L, d_model)
    return torch.stack(parts, dim=1)  # (B, h, L, d_model)


def contributions_einsum(heads, W_o):
    B, h, L, d_k = heads.shape
    blocks = W_o.weight.view(-1, h, d_k)  # (d_model, h, d_k): column block i is W^O_i transposed
    return torch.einsum("bhld,ohd->bhlo", heads, blocks)


def contributions_float64(x, layer):  # renamed arguments, a float64 answer
    d_k = x.shape[-1]
    W_O = layer.weight.T.double()
    return torch.stack([x[:, i].double() @ W_O[i * d_k:(i + 1) * d_k] for i in range(x.shape[1])], dim=1)


def _rows(heads, W_o):
    d_k = heads.shape[-1]
    return torch.stack([heads[:, i] @ W_o.weight[i * d_k:(i + 1) * d_k] for i in range(heads.shape[1])], dim=1)


def _same_block(heads, W_o):
    d_k = heads.shape[-1]
    return torch.stack([heads[:, i] @ W_o.weight.T[:d_k] for i in range(heads.shape[1])], dim=1)


def _via_merge(heads, W_o):
    contributions_reference(heads, W_o)
    mha.merge_heads(heads)
    return contributions_reference(heads, W_o)


def _mutating_contributions(heads, W_o):
    heads[:, 0] = 0
    return contributions_reference(heads, W_o)


def _no_grad_contributions(heads, W_o):
    with torch.no_grad():
        return contributions_reference(heads, W_o)


# ---------------------------------------------------------------- the reworked 7.1 (d_v), 7.2 (back to the concat), 7.3 (a head off)
def _off(heads, W_o, i):
    x = heads.clone()
    x[:, i] = 0
    B, h, L, d = x.shape
    return W_o(x.transpose(1, 2).reshape(B, L, h * d))


def _minus_contribution(heads, W_o, i):
    B, h, L, d = heads.shape
    return W_o(heads.transpose(1, 2).reshape(B, L, h * d)) - heads[:, i] @ W_o.weight.T[i * d:(i + 1) * d]


def head_matrix(layer, i):
    d_k = layer.d_k
    return layer.W_v.weight.T[:, i * d_k:(i + 1) * d_k] @ layer.W_o.weight.T[i * d_k:(i + 1) * d_k]


def _blk(layer, i):
    return slice(i * layer.d_k, (i + 1) * layer.d_k)


def by_slices(layer, s):
    """W_v.weight's rows ``s`` and W_o.weight's columns ``s``: head i's share when ``s`` is its block."""
    return layer.W_v.weight[s].T @ layer.W_o.weight[:, s].T


def head_matrix_by_experiment(layer, i):
    """Honest: push the identity through W_v (no bias), keep head i, merge, W_o without its bias."""
    with torch.no_grad():
        eye = torch.eye(layer.d_model)
        v = mha.split_heads((layer.W_v(eye) - layer.W_v.bias)[None], layer.n_heads)
        keep = torch.zeros(layer.n_heads, 1, 1)
        keep[i] = 1
        return layer.W_o(mha.merge_heads(v * keep))[0] - layer.W_o.bias


def changed_ref(t, i, L, d, h, with_w_o):
    out = torch.zeros(L, d, dtype=torch.bool)
    if with_w_o:
        out[t] = True
    else:
        out[t, i * (d // h):(i + 1) * (d // h)] = True
    return out


def changed_by_experiment(t, i, L, d, h, with_w_o):
    heads = torch.randn(1, h, L, d // h)
    moved = heads.clone()
    moved[0, i, t] += 1.0
    W_o = torch.nn.Linear(d, d)
    run = (lambda x: W_o(mha.merge_heads(x))) if with_w_o else mha.merge_heads
    with torch.no_grad():
        return ((run(moved) - run(heads)).abs() > 1e-6)[0].int()  # 0/1 integers count too


def _changed_patch(**patch):
    def fn(t, i, L, d, h, with_w_o):
        out = changed_ref(t, i, L, d, h, with_w_o)
        key = "with" if with_w_o else "without"
        return patch[key](t, i, L, d, h) if key in patch else out
    return fn


def _block(t, i, L, d, h, shift=0):
    out = torch.zeros(L, d, dtype=torch.bool)
    out[t, (i + shift) * (d // h):(i + shift + 1) * (d // h)] = True
    return out


def _columns(t, L, d, cols):
    out = torch.zeros(L, d, dtype=torch.bool)
    out[t, list(cols)] = True
    return out


def _memory_order(t, i, L, d, h, rows=False):
    """heads[0, i, t] read in (h, L, d_k) memory order as (L, d_model): the block at (i·L + t)·d_k (rows: its rows)."""
    flat = torch.zeros(L * d, dtype=torch.bool)
    flat[(i * L + t) * (d // h):(i * L + t + 1) * (d // h)] = True
    return flat.view(L, d).any(1, keepdim=True).expand(L, d) if rows else flat.view(L, d)


RIGHT_NEW = [
    (check_head_matrix, {"matrix": head_matrix, "max_rank": 64}),
    (check_head_matrix, {"matrix": lambda l, i: by_slices(l, _blk(l, i)), "max_rank": 64}),
    (check_head_matrix, {"matrix": head_matrix_by_experiment, "max_rank": np.int64(64)}),
    (check_changed_outputs, changed_ref),
    (check_changed_outputs, changed_by_experiment),
]
WRONG_NEW = [
    (check_head_matrix, {"matrix": lambda l, i: head_matrix(l, i).T, "max_rank": 64}, "转置了"),
    (check_head_matrix, {"matrix": lambda l, i: l.W_v.weight[:, i * l.d_k:(i + 1) * l.d_k] @ l.W_o.weight[i * l.d_k:(i + 1) * l.d_k],
                         "max_rank": 64}, "weight 当成了 W"),
    (check_head_matrix, {"matrix": lambda l, i: l.W_v.weight.T @ l.W_o.weight.T, "max_rank": 64}, "所有头"),
    (check_head_matrix, {"matrix": lambda l, i: head_matrix(l, i) * 1.01, "max_rank": 64}, ["数值不对", "单位矩阵"]),
    (check_head_matrix, {"matrix": lambda l, i: l.W_v.weight[:, _blk(l, i)] @ l.W_o.weight[:, _blk(l, i)].T, "max_rank": 64},
     "W_v.weight 取成了列"),
    (check_head_matrix, {"matrix": lambda l, i: l.W_v.weight[_blk(l, i)].T @ l.W_o.weight[_blk(l, i)], "max_rank": 64},
     "W_o.weight 取成了行"),
    (check_head_matrix, {"matrix": lambda l, i: by_slices(l, _blk(l, i - 1)), "max_rank": 64}, "上一个头"),  # i counted from 1
    (check_head_matrix, {"matrix": lambda l, i: by_slices(l, slice(i, None, l.n_heads)), "max_rank": 64}, "每隔 n_heads"),
    (check_head_matrix, {"matrix": lambda l, i: l.W_v.weight.T[:, :64] @ torch.randn(64, 512), "max_rank": 64},
     ["运行时抛出了", "参数 layer"]),  # chapter cell 24 with its 512-wide globals
    (check_head_matrix, {"matrix": lambda l, i: head_matrix(l, i) + l.W_o.bias, "max_rank": 64}, ["W_o 的偏置", "不算偏置"]),
    (check_head_matrix, {"matrix": lambda l, i: head_matrix(l, i)[:, :l.d_k], "max_rank": 64}, "形状应该是"),
    (check_head_matrix, {"matrix": head_matrix, "max_rank": 512}, "满秩"),
    (check_head_matrix, {"matrix": head_matrix, "max_rank": 8}, "头数"),
    (check_head_matrix, {"matrix": head_matrix, "max_rank": 4096}, "d_k²"),
    (check_head_matrix, {"matrix": head_matrix, "max_rank": 63}, "最窄"),
    (check_head_matrix, {"matrix": head_matrix}, "缺少键"),
    (check_changed_outputs, _changed_patch(**{"with": _block}), "全部列都变"),
    (check_changed_outputs, _changed_patch(**{"with": lambda t, i, L, d, h: torch.ones(L, d, dtype=torch.bool)}), "单独作用"),
    (check_changed_outputs, _changed_patch(without=lambda t, i, L, d, h: changed_ref(t, i, L, d, h, True)), "别的列不动"),
    (check_changed_outputs, _changed_patch(without=lambda t, i, L, d, h: _block(t, i, L, d, h).any(0).expand(L, d)), "不搬 token"),
    (check_changed_outputs, _changed_patch(without=lambda t, i, L, d, h: _block(t, i, L, d, h, 1)), "从 1 数了"),
    (check_changed_outputs, lambda t, i, L, d, h, w: ~changed_ref(t, i, L, d, h, w), "极性反了"),
    (check_changed_outputs, lambda t, i, L, d, h, w: _memory_order(t, i, L, d, h, w), ["内存顺序", "transpose(1, 2)"]),
    (check_changed_outputs, _changed_patch(**{"with": lambda t, i, L, d, h: _memory_order(t, i, L, d, h, True)}),
     ["内存顺序", "transpose(1, 2)"]),
    (check_changed_outputs, lambda t, i, L, d, h, w: changed_ref(t, i, L, d, h, w)[:, :1], "形状应该是"),
    (check_changed_outputs, _changed_patch(without=lambda t, i, L, d, h: torch.zeros(L, d, dtype=torch.bool)), ["不对", "只搬数"]),
    (check_changed_outputs, _changed_patch(without=lambda t, i, L, d, h: _block(t, i, L, d, h, -1)), "从 1 数的头号"),
    (check_changed_outputs, _changed_patch(without=lambda t, i, L, d, h: _block(t, t, L, d, h)),  # review r3 L4
     ["把 t 和 i 弄混了", "token t 决定哪一行"]),
    (check_changed_outputs, _changed_patch(without=lambda t, i, L, d, h: _columns(t, L, d, range(i, d, h))), ["轮流", "i::n_heads"]),
    (check_changed_outputs, _changed_patch(without=lambda t, i, L, d, h: _columns(t, L, d, range(i * h, (i + 1) * h))),
     "当成了 n_heads"),
]


# ---------------------------------------------------------------- 7.3 as the book asks it now: only q_in, kv and the layer are known
def _head_i(q_in, kv, layer, i, values=None):
    out, weights = layer(q_in, kv, kv, need_weights=True)  # (B, L, d_model), (B, h, L, S)
    v = mha.split_heads(layer.W_v(kv) if values is None else values, layer.n_heads)  # (B, h, S, d_k)
    return out, weights[:, i] @ v[:, i]  # (B, L, d_k)


def _w_o_block(layer, i):
    d_k = layer.d_k
    return layer.W_o.weight.T[i * d_k:(i + 1) * d_k]  # W^O_i   (d_k, d_model)


def remove_by_block(q_in, kv, layer, i):
    out, head_i = _head_i(q_in, kv, layer, i)
    return out - head_i @ _w_o_block(layer, i)


def remove_by_columns(q_in, kv, layer, i):  # the columns of W_o.weight, then F.linear without bias
    out, head_i = _head_i(q_in, kv, layer, i)
    d_k = layer.d_k
    return out - torch.nn.functional.linear(head_i, layer.W_o.weight[:, i * d_k:(i + 1) * d_k])


def remove_by_recomputing(q_in, kv, layer, i):  # every head from scratch, head i zeroed, through W^O
    q = mha.split_heads(mha.project(q_in, layer.W_q), layer.n_heads)
    k, v = (mha.split_heads(mha.project(kv, W), layer.n_heads) for W in (layer.W_k, layer.W_v))
    heads, _ = mha.attention(q, k, v)  # (B, h, L, d_k)
    keep = torch.ones(layer.n_heads, 1, 1)
    keep[i] = 0
    _ = mha.fmt(heads[0, 0, 0, :2], 2)  # the book's helpers are allowed
    return layer.W_o(mha.merge_heads(heads * keep))


def remove_float64(q_in, kv, layer, i):
    out, head_i = _head_i(q_in, kv, layer, i)
    return out.double() - head_i.double() @ _w_o_block(layer, i).double()


RIGHT_7_3_NOW = answers_for(check_remove_head, [remove_by_block, remove_by_columns, remove_by_recomputing, remove_float64])


def _remove_with(q_in, kv, layer, i, values=None, block=None, bias=False, sign=-1):
    out, head_i = _head_i(q_in, kv, layer, i, values)
    M = _w_o_block(layer, i) if block is None else block
    return out + sign * (head_i @ M) - (layer.W_o.bias if bias else 0)


def _remove_mutating(q_in, kv, layer, i):
    q_in.mul_(1.0)  # a leaf that requires grad: torch refuses, the verdict names it
    return remove_by_block(q_in, kv, layer, i)


def _remove_mutating_kv(q_in, kv, layer, i):
    kv.mul_(1.0)  # torch does not say which leaf: the verdict names both inputs that need grad
    return remove_by_block(q_in, kv, layer, i)


def _remove_zeroing_w_o(q_in, kv, layer, i):  # switch the head off by zeroing its columns of W_o.weight in place
    d_k = layer.d_k
    with torch.no_grad():
        layer.W_o.weight[:, i * d_k:(i + 1) * d_k] = 0
    return layer(q_in, kv, kv)


def _remove_no_grad(q_in, kv, layer, i):
    with torch.no_grad():
        return remove_by_block(q_in, kv, layer, i)


def _remove_next_head(q_in, kv, layer, i):  # the student's M2: i + 1, as if i counted from 1
    return remove_by_recomputing(q_in, kv, layer, (i + 1) % layer.n_heads)


def _remove_zero_then_restore(q_in, kv, layer, i):  # student r4 M2: zero W_o's columns, run, set them back
    d_k, saved = layer.d_k, layer.W_o.weight.detach().clone()
    with torch.no_grad():
        layer.W_o.weight[:, i * d_k:(i + 1) * d_k] = 0
    out = layer(q_in, kv, kv)
    with torch.no_grad():
        layer.W_o.weight.copy_(saved)
    return out


class _MaskedHead(torch.nn.Module):
    def __init__(self, linear, i, d_k):
        super().__init__()
        self.linear, self.i, self.d_k = linear, i, d_k

    def forward(self, x):
        x = x.clone()
        x[..., self.i * self.d_k:(self.i + 1) * self.d_k] = 0
        return self.linear(x)


def _remove_by_swapping_w_o(q_in, kv, layer, i):  # student r4 M2: a new W_o module, never swapped back
    layer.W_o = _MaskedHead(layer.W_o, i, layer.d_k)
    return layer(q_in, kv, kv)


def _remove_on_a_copy(q_in, kv, layer, i):  # the honest version of the two above
    layer = copy.deepcopy(layer)
    with torch.no_grad():
        layer.W_o.weight[:, i * layer.d_k:(i + 1) * layer.d_k] = 0
    return layer(q_in, kv, kv)


RIGHT_7_3_NOW += answers_for(check_remove_head, [_remove_on_a_copy])


def _self_attention(q_in, kv, layer, i):  # copied from the chapter's self-attention: q_in everywhere
    return remove_by_block(q_in, q_in, layer, i)


WRONG_7_3_NOW = mistakes_for(check_remove_head, [
    (lambda q_in, kv, layer, i: _remove_with(q_in, kv, layer, i, bias=True), "偏置也被减掉了"),
    (lambda q_in, kv, layer, i: _remove_with(q_in, kv, layer, i, sign=1), "符号反了"),
    (lambda q_in, kv, layer, i: _head_i(q_in, kv, layer, i)[1] @ _w_o_block(layer, i), "头 0 自己的贡献"),
    (lambda q_in, kv, layer, i: layer(q_in, kv, kv), "输出没有变"),
    (lambda q_in, kv, layer, i: _remove_with(q_in, kv, layer, i, block=layer.W_o.weight[i * layer.d_k:(i + 1) * layer.d_k]),
     "W_o.weight 的第 [i·d_k, (i+1)·d_k) 行"),
    (lambda q_in, kv, layer, i: _remove_with(q_in, kv, layer, i, block=_w_o_block(layer, (i + 1) % layer.n_heads)),
     "W^O 的第 1 块"),
    (lambda q_in, kv, layer, i: _remove_with(q_in, kv, layer, i, values=kv), "没投影的 kv 当 Value"),
    (lambda q_in, kv, layer, i: _remove_with(q_in, kv, layer, i, values=kv @ layer.W_v.weight.T), "漏了 W_v 的偏置"),
    (lambda q_in, kv, layer, i: _remove_with(q_in, kv, layer, i, values=layer.W_k(kv)), "W_k 投影出的 Key"),
    (lambda q_in, kv, layer, i: _remove_with(q_in, kv, layer, i, values=layer.W_v(q_in)), "Value 是从 q_in 投影的"),
    (lambda q_in, kv, layer, i: layer(q_in, kv, kv) - layer(q_in, kv, kv)[..., i * layer.d_k:(i + 1) * layer.d_k]
     @ _w_o_block(layer, i), "把输出 out 的第 i 段当成了头 i 的结果"),
    (_self_attention, "算成了 q_in 自己的自注意力"),
    (_remove_next_head, ["你关掉的是头 1，不是头 0", "不用加 1"]),
    (lambda q_in, kv, layer, i: remove_by_block(q_in, kv, layer, (i - 1) % layer.n_heads), ["你关掉的是头", "不用减 1"]),
    (lambda q_in, kv, layer, i: remove_by_block(q_in, kv, layer, i) * 1.5, "结果不对"),
    (lambda q_in, kv, layer, i: remove_by_block(q_in, kv, layer, i)[..., :-1], "形状应该是"),
    (_remove_no_grad, "不能求梯度"),
    (lambda q_in, kv, layer, i: remove_by_block(q_in, kv.detach(), layer, i) + 0 * kv.sum(), "对 kv 的梯度"),
    (lambda q_in, kv, layer, i: remove_by_block(q_in, kv, layer, i).int(), "dtype"),
    (_remove_mutating, "原地改了传进来的参数 q_in、参数 kv 中的一个"),
    (_remove_mutating_kv, "原地改了传进来的参数 q_in、参数 kv 中的一个"),
    (_remove_zeroing_w_o, "修改了输入"),
    (_remove_zero_then_restore, ["原地改动了传进来的参数 layer.W_o.weight", "之后又改了回来"]),
    (_remove_by_swapping_w_o, ["换成了别的对象", "layer.W_o"]),
    (lambda x, layer, i: x, "参数和题目给的不一样"),
])

test_right_answers_pass = right_answers(RIGHT_NEW, RIGHT_7_3_NOW)
test_wrong_answers_are_named = wrong_answers(WRONG_NEW, WRONG_7_3_NOW)


def test_results_registry_lists_chapter():
    assert set(results("ch07")) == {"7.1", "7.2", "7.3"}
