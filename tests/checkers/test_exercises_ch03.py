"""Tests for the chapter 03 checkers: correct answers in many styles pass, shortcuts and wrong answers
get a verdict that names what happened (table-driven; the stub and garbage answers of these exercises
are the generic ones, tried on every checker in tests/checkers/test_exercises_common.py)."""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import mha
from mha.course.exercises import (check_count_parameters_general, check_gradient_reach, check_packed_k, results)
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


def general_count_ref(d, h, d_k, d_v, bias):
    lin = lambda n_in, n_out: n_in * n_out + (n_out if bias else 0)  # noqa: E731
    return 2 * lin(d, h * d_k) + lin(d, h * d_v) + lin(h * d_v, d)


def packed_ref(x, W, b):
    bs = b.chunk(3) if b is not None else (0, 0, 0)
    return tuple(x @ w.T + bb for w, bb in zip(W.chunk(3), bs))


# ---------------------------------------------------------------- 3.1 what one number of Q' is made of
def _reach_by_backward():
    """An honest answer: the experiment the prompt describes, read off the gradients."""
    layer = mha.MultiHeadAttention(6, 2)
    x = torch.randn(2, 3, 6, requires_grad=True)
    layer.W_q(x)[1, 2, 4].backward()
    g = layer.W_q.weight.grad
    return {"weight_rows": g.abs().sum(1).nonzero().flatten(), "weight_cols": g.abs().sum(0).nonzero().flatten().tolist(),
            "x_tokens": x.grad[1].abs().sum(-1).nonzero().flatten().numpy()}


def _reach_without_flatten():
    """An honest answer: the same experiment read off with ``.nonzero()`` alone, (k, 1) tensors and a tuple."""
    layer = mha.MultiHeadAttention(6, 2)
    x = torch.randn(2, 3, 6, requires_grad=True)
    layer.W_q(x)[1, 2, 4].backward()
    g = layer.W_q.weight.grad
    return {"weight_rows": (g != 0).any(1).nonzero(), "weight_cols": (g != 0).any(0).nonzero().numpy(),
            "x_tokens": (x.grad[1] != 0).any(-1).nonzero(as_tuple=True)}


RIGHT_3_1 = answers_for(check_gradient_reach, [
    {"weight_rows": [4], "weight_cols": [0, 1, 2, 3, 4, 5], "x_tokens": [2]},
    _reach_without_flatten(),
    {"weight_rows": (4,), "weight_cols": range(6), "x_tokens": {2}, "note": "extra keys are fine"},
    _reach_by_backward(),
])
RIGHT_3 = {"weight_rows": [4], "weight_cols": list(range(6)), "x_tokens": [2]}
WRONG_3_1 = mistakes_for(check_gradient_reach, [
    ({**RIGHT_3, "weight_rows": [2]}, ["token 的位置", "(out, in)"]),
    ({**RIGHT_3, "weight_rows": list(range(6)), "weight_cols": [4]}, ["论文的 W^Q", "weight.T"]),
    ({**RIGHT_3, "weight_cols": [4]}, "全部 d_model 个输入的加权和"),
    ({**RIGHT_3, "weight_cols": [2]}, "列对应输入特征"),
    ({**RIGHT_3, "x_tokens": [0, 1, 2]}, "逐 token"),
    ({**RIGHT_3, "x_tokens": torch.tensor([[0], [1], [2]])}, "逐 token"),  # a (k, 1) .nonzero() is read as its k positions
    ({**RIGHT_3, "weight_rows": torch.tensor([[4, 5]])}, "形状 (1, 2) 的张量"),  # but not any 2-D tensor
    ({**RIGHT_3, "x_tokens": []}, "梯度会传回 token 2"),
    ({**RIGHT_3, "x_tokens": [3]}, "从 1 开始数"),
    ({**RIGHT_3, "x_tokens": [1]}, "句子的下标"),  # the sentence index b of q[b, t, j]
    ({**RIGHT_3, "weight_rows": [3, 4, 5]}, ["整个头", "d_k = 3"]),
    ({**RIGHT_3, "weight_rows": [5]}, "行的下标从 0 数"),
    ({**RIGHT_3, "weight_cols": [1, 2, 3, 4, 5, 6]}, "列的下标从 0 数"),
    ({**RIGHT_3, "weight_rows": [6]}, "超出了范围"),
    ({**RIGHT_3, "weight_rows": [3]}, ['answer["weight_rows"]', "提示"]),
    ({"weight_rows": [4], "weight_cols": list(range(6))}, "缺少键"),
    ({"q": (2, 4, 512), "k": (2, 6, 512), "v": (2, 6, 512)}, "缺少键"),  # the old shape exercise's answer
    ([4], "字典"),
])


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


# ---------------------------------------------------------------- 3.3 K' from the packed weight
def packed_k_solution(x, W, b):
    d = W.shape[1]
    out = x @ W[d:2 * d].T  # the K block, rows d .. 2d-1, is (out, in)
    return out if b is None else out + b[d:2 * d]


def _packed_k_chunk(x, W, b):  # chunk(3) and a transposed matmul, renamed style
    _, w_k, _ = W.chunk(3)
    out = torch.matmul(x, w_k.t())
    if b is not None:
        out = out + b.chunk(3)[1]
    return out


def _packed_k_via_split(x, W, b):  # all three, then split (an honest, longer route)
    d = W.shape[1]
    qkv = x @ W.T + (0 if b is None else b)  # (B, L, 3d)
    return qkv[..., d:2 * d]


def _packed_k_variant(**wrong):
    from mha.course.exercises.ch03 import packed_k
    return lambda x, W, b: packed_k(x, W, b, **wrong)


def _packed_k_bias_always(x, W, b):  # forgets that in_proj_bias may be None
    d = W.shape[1]
    return x @ W[d:2 * d].T + b[d:2 * d]


def _packed_k_in_float64(x, W, b):  # computes in float64, hands back x's dtype (honest)
    return packed_k_solution(x.double(), W.double(), None if b is None else b.double()).to(x.dtype)


def _packed_k_float32_inside(x, W, b):  # the student's H1: silently float32, also for float64 inputs
    d = W.shape[1]
    bias = b[d:2 * d] if b is not None else torch.zeros(d)
    return x.float() @ W[d:2 * d].float().T + bias.float()


RIGHT_HEAD_K = answers_for(check_packed_k, [packed_k_solution, _packed_k_chunk, _packed_k_via_split,
                                            _packed_k_in_float64])

WRONG_HEAD_K = mistakes_for(check_packed_k, [
    (_packed_k_variant(block=0), "第 0 块"),
    (_packed_k_variant(block=2), "第 2 块"),
    (_packed_k_variant(interleaved=True), "不是交错的"),
    (_packed_k_variant(transpose=False), ["没有转置", "W^K = weight.T"]),
    (_packed_k_variant(block=0, transpose=False), ["第 0 块", "没有转置"]),
    (_packed_k_variant(bias=False), "忘了加偏置"),
    (_packed_k_bias_always, ["NoneType", "in_proj_bias 是 None"]),
    (lambda x, W, b: x @ W.T, "Q′、K′、V′ 连在一起"),
    (lambda x, W, b: x @ W[:4].T, "形状应该是"),
    (lambda x, W, b: F.linear(x, W[W.shape[1]:2 * W.shape[1]], None if b is None else b[W.shape[1]:2 * W.shape[1]]), "F.linear"),
    (lambda x, W, b: mha.project(x, torch.nn.Linear(4, 4)), "mha.project"),
    (lambda x, W, b: packed_k_solution(x, W, b).detach(), "梯度"),
    (lambda x, W, b: packed_k_solution(x, W, b) * 2, "数值不对"),
    (_packed_k_float32_inside, ["返回了 float32", "输入 x 是 float64", "dtype"]),
    (lambda x, W, b: packed_k_solution(x, W, b).float(), ["返回了 float32", "输入 x 是 float64"]),
    (lambda x, W, b: packed_k_solution(x, W, b).to(torch.float16), ["返回了 float16", "dtype"]),
    (lambda x, W, b: packed_k_solution(x.double(), W.double(), None if b is None else b.double()),
     ["返回了 float64", "输入 x 是 float32"]),  # the check also hands in float32, as the prompt says
    (_packed_k_variant(bias_block=0), "偏置取成了 Q 的那一段"),
    (lambda x, W, b: x @ W[W.shape[1]:2 * W.shape[1]].T + (0 if b is None else b[:W.shape[1]]), "偏置取成了 Q 的那一段"),
    (lambda x, W, b: x @ W[W.shape[1]:2 * W.shape[1]].T + (0 if b is None else b[2 * W.shape[1]:]), "偏置取成了 V 的那一段"),
])

test_right_answers_pass = right_answers(RIGHT_3_1, RIGHT_HEAD_K)
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
def _count(w_v=None, w_o_in=None, o_bias=None, heads=None, bias_as=None, no_w_o=False):
    """A count with one typical mistake (the defaults give the truth)."""
    def count(d, h, d_k, d_v, bias):
        b = bias if bias_as is None else bias_as
        h = h if heads is None else heads
        lin = lambda n_in, n_out, nb=None: n_in * n_out + ((n_out if nb is None else nb) if b else 0)  # noqa: E731
        dv = d_v if w_v is None else d_k
        return 2 * lin(d, h * d_k) + lin(d, h * dv) + (0 if no_w_o else lin(h * dv, d, o_bias and h * d_v))
    return count


WRONG_COUNT = mistakes_for(check_count_parameters_general, [
    (count_by_copied_linear, ["复制一个层", "nn.Parameter"]),
    (lambda d, h, d_k, d_v, bias: 4 * (d * d + (d if bias else 0)), ["d_k = d_v = d_model / n_heads", "应为"]),
    (_count(w_v="d_k"), "也按 d_k 算了"),
    (_count(no_w_o=True), "忘了 W_o"),
    (lambda d, h, d_k, d_v, bias: 2 * (d * h * d_k + bias * h * d_k) + d * h * d_v + bias * h * d_v + h * d_k * d + bias * d,
     "W_o 的输入是 h 个头的 Value 拼在一起"),  # review r5 L7: W_o sized with h·d_k
    (_count(heads=1), "只数了一个头"),
    (_count(bias_as=False), "忘了偏置"),
    (_count(bias_as=True), "把偏置也数进去了"),
    (_count(o_bias=True), "W_o 的偏置有 d_model 个"),
    (lambda d, h, d_k, d_v, bias: 7, ["应为", "in·out 个权重"]),
    (lambda d, h, d_k, d_v, bias: 1.5, "应该是整数"),
])
test_wrong_answers_are_named = wrong_answers(WRONG_3_1, WRONG_HEAD_K, WRONG_COUNT)


def test_reference_project_matches_mha_project():
    layer = mha.MultiHeadAttention(16, 4).requires_grad_(False)
    x = torch.randn(2, 3, 16)
    assert torch.allclose(project_ref(x, layer.W_q), mha.project(x, layer.W_q), atol=1e-6)
    assert math.isclose(project_ref(x, layer.W_q).sum().item(), layer.W_q(x).sum().item(), rel_tol=1e-4, abs_tol=1e-4)
