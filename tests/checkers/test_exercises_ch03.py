"""Tests for the chapter 03 checkers: correct answers in many styles pass, shortcuts and wrong answers
get a verdict that names what happened (table-driven; the stub and garbage answers of these exercises
are the generic ones, tried on every checker in tests/checkers/test_exercises_common.py)."""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import mha
from mha.course.exercises import (check_count_parameters_general, check_cross_projection_shapes, check_packed_head_k, results)
from exercise_support import answers_for, mistakes_for, raise_value_error, right_answers, wrong_answers

# ---------------------------------------------------------------- references
def projection_shape_ref(B, L, d_model, n_heads):
    return (B, L, d_model)


def count_parameters_ref(d_model, n_heads, bias=True):
    return 4 * (d_model * d_model + (d_model if bias else 0))


def project_ref(x, linear):
    out = x @ linear.weight.T
    if linear.bias is not None:
        out = out + linear.bias
    return out


def cross_shapes_ref(B, L, S, d_model, n_heads):
    return {"q": (B, L, d_model), "k": (B, S, d_model), "v": (B, S, d_model)}


def general_count_ref(d, h, d_k, d_v, bias):
    lin = lambda n_in, n_out: n_in * n_out + (n_out if bias else 0)  # noqa: E731
    return 2 * lin(d, h * d_k) + lin(d, h * d_v) + lin(h * d_v, d)


def packed_ref(x, W, b):
    bs = b.chunk(3) if b is not None else (0, 0, 0)
    return tuple(x @ w.T + bb for w, bb in zip(W.chunk(3), bs))


# ---------------------------------------------------------------- 3.1


# ---------------------------------------------------------------- 3.2
def _count_loop(width, heads, bias=True):  # renamed arguments, a loop over the four Linears
    total = 0
    for _ in ("W_q", "W_k", "W_v", "W_o"):
        total += width * width
        if bias:
            total += width
    return total


def _counts_course_layer(d, h, bias=True):
    return sum(p.numel() for p in mha.MultiHeadAttention(d, h, bias=bias).parameters())


class _MyLayer(mha.MultiHeadAttention):
    pass


def _counts_linears(d, h, bias=True):
    return 4 * sum(p.numel() for p in nn.Linear(d, d, bias=bias).parameters())


def _counts_torch_layer(d, h, bias=True):
    return sum(p.numel() for p in nn.MultiheadAttention(d, h, bias=bias).parameters())


def test_3_2_reference_formula_matches_the_layer():
    for d, h in [(512, 8), (6, 2), (12, 3)]:
        for bias in (True, False):
            assert _counts_course_layer(d, h, bias) == count_parameters_ref(d, h, bias)


# ---------------------------------------------------------------- 3.3
def _einsum(x, linear):
    out = torch.einsum("bli,oi->blo", x, linear.weight)
    return out if linear.bias is None else out + linear.bias


def _loops(inputs, layer):  # renamed arguments, one token at a time
    rows = []
    for b in range(inputs.shape[0]):
        rows.append(torch.stack([torch.mv(layer.weight, inputs[b, t]) for t in range(inputs.shape[1])]))
    out = torch.stack(rows)
    return out + layer.bias if layer.bias is not None else out


def _float64_inside(x, linear):
    out = x.double() @ linear.weight.double().T
    if linear.bias is not None:
        out = out + linear.bias.double()
    return out  # a float64 answer is as right as a float32 one


def _reshape_2d(x, linear):
    B, L, d_in = x.shape
    out = torch.matmul(x.reshape(B * L, d_in), linear.weight.t()).reshape(B, L, -1)
    return out + (linear.bias if linear.bias is not None else torch.zeros(()))


def _no_transpose(x, linear):
    return x @ linear.weight + (linear.bias if linear.bias is not None else 0)


def _no_transpose_float64(x, linear):
    return x.double() @ linear.weight.double() + (linear.bias.double() if linear.bias is not None else 0)


def _mutates_x(x, linear):
    x += 1.0
    return project_ref(x - 1.0, linear)


def _mutates_weight(x, linear):
    with torch.no_grad():
        linear.weight.mul_(1.0).add_(1.0)
        linear.weight.sub_(1.0)
        linear.weight.add_(0.5)
    return project_ref(x, linear)


def _no_grad(x, linear):
    with torch.no_grad():
        return project_ref(x, linear)


def _data(x, linear):
    out = x @ linear.weight.data.T
    return out if linear.bias is None else out + linear.bias.data


def _detached_input(x, linear):
    return project_ref(x.detach(), linear)


# ---------------------------------------------------------------- the reworked 3.1, 3.2, 3.3


# ---------------------------------------------------------------- 3.3 one head's K' from the packed weight
def head_k_solution(x, W, b, n_heads, head):
    d = W.shape[1]
    d_k = d // n_heads
    rows = slice(d + head * d_k, d + (head + 1) * d_k)  # the K block, then the head's d_k rows
    out = x @ W[rows].T
    return out if b is None else out + b[rows]


def _head_k_via_split(x, W, b, n_heads, head):  # all of K', then split (mha.split_heads is allowed)
    d = W.shape[1]
    k = x @ W[d:2 * d].T + (0 if b is None else b[d:2 * d])
    return mha.split_heads(k, n_heads)[:, head]


def _head_k_variant(**wrong):
    from mha.course.exercises.ch03 import packed_head_k
    return lambda x, W, b, h, head: packed_head_k(x, W, b, h, head, **wrong)


def _head_k_bias_always(x, W, b, n_heads, head):  # forgets that in_proj_bias may be None
    d, d_k = W.shape[1], W.shape[1] // n_heads
    rows = slice(d + head * d_k, d + (head + 1) * d_k)
    return x @ W[rows].T + b[rows]


RIGHT_HEAD_K = answers_for(check_packed_head_k, [head_k_solution, _head_k_via_split,
                                                 lambda x, W, b, h, hd: head_k_solution(x, W, b, h, hd).float()])

WRONG_HEAD_K = mistakes_for(check_packed_head_k, [
    (_head_k_variant(block=0), "W_q"),
    (_head_k_variant(block=2), "W_v"),
    (_head_k_variant(offset=1), "切片越界了"),
    (lambda x, W, b, h, hd: head_k_solution(x, W, b, h, hd - 1) if hd else head_k_solution(x, W, b, h, 1), "头"),
    (_head_k_variant(interleaved=True), "连续的一段"),
    (_head_k_variant(bias=False), "忘了加偏置"),
    (_head_k_variant(input_columns=True), "切的是输入的列"),
    (_head_k_bias_always, ["NoneType", "in_proj_bias 是 None"]),
    (lambda x, W, b, h, hd: x @ W[W.shape[1]:2 * W.shape[1]].T, "整个 K′"),
    (lambda x, W, b, h, hd: F.linear(x, W[:2]), "F.linear"),
    (lambda x, W, b, h, hd: mha.project(x, torch.nn.Linear(4, 4)), "mha.project"),
    (lambda x, W, b, h, hd: head_k_solution(x, W, b, h, hd).detach(), "梯度"),
    (lambda x, W, b, h, hd: head_k_solution(x, W, b, h, hd) * 2, "数值不对"),
])

test_right_answers_pass = right_answers(RIGHT_HEAD_K)
def count_by_copied_linear(d_model, n_heads, d_k, d_v, bias):
    """Builds no layer with nn.Linear(...), but copies one and resizes it: a layer all the same (issue 27)."""
    import copy
    total = 0
    for d_in, d_out in ((d_model, n_heads * d_k), (d_model, n_heads * d_k), (d_model, n_heads * d_v), (n_heads * d_v, d_model)):
        lin = copy.deepcopy(COPIED)
        lin.weight = nn.Parameter(torch.empty(d_out, d_in))
        lin.bias = nn.Parameter(torch.empty(d_out)) if bias else None
        total += sum(p.numel() for p in lin.parameters())
    return total


COPIED = nn.Linear(2, 2)
WRONG_COUNT = mistakes_for(check_count_parameters_general, [(count_by_copied_linear, ["复制一个层", "nn.Parameter"])])
test_wrong_answers_are_named = wrong_answers(WRONG_HEAD_K, WRONG_COUNT)


def test_reference_project_matches_mha_project():
    layer = mha.MultiHeadAttention(16, 4).requires_grad_(False)
    x = torch.randn(2, 3, 16)
    assert torch.allclose(project_ref(x, layer.W_q), mha.project(x, layer.W_q), atol=1e-6)
    assert math.isclose(project_ref(x, layer.W_q).sum().item(), layer.W_q(x).sum().item(), rel_tol=1e-4, abs_tol=1e-4)
