"""Tests for the chapter 03 checkers: correct answers in many styles pass, shortcuts and wrong answers
get a verdict that names what happened (table-driven; the stub and garbage answers of these exercises
are the generic ones, tried on every checker in tests/checkers/test_exercises_common.py)."""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import mha
from mha.course.exercises import (check_count_parameters, check_count_parameters_general, check_cross_projection_shapes,
                           check_packed_head_k, check_project_matmul, check_project_packed, check_projection_shape,
                           results)
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


def test_record_false_is_not_recorded(capsys):
    check_cross_projection_shapes(None)
    check_cross_projection_shapes(cross_shapes_ref, record=False)
    assert results("ch03")["3.1"] == "todo"
    check_cross_projection_shapes(cross_shapes_ref)
    assert results("ch03")["3.1"] == "pass"
    check_projection_shape(None)  # the replaced task's checker leaves the summary alone
    assert results("ch03")["3.1"] == "pass"
    capsys.readouterr()


# ---------------------------------------------------------------- 3.1
RIGHT_3_1 = answers_for(check_projection_shape, [
    projection_shape_ref,
    lambda B, L, d, h: [B, L, d],
    lambda B, L, d, h: torch.Size([B, L, d]),
    lambda B, L, d, h: (np.int64(B), np.int32(L), np.int64(d)),
    lambda B, L, d, h: np.array([B, L, d]),
    lambda B, L, d, h: (B, L, d / 1),  # an integral float is an integer, in every exercise
    lambda B, L, d, h: (torch.tensor(B), L, torch.tensor(d)),
    lambda batch, length, width, heads: tuple(nn.Linear(width, width)(torch.zeros(batch, length, width)).shape),
])

WRONG_3_1 = mistakes_for(check_projection_shape, [
    (lambda B, L, d, h: (B, h, L, d // h), "分头之后"),
    (lambda B, L, d, h: (B, L, h, d // h), "分头之后"),
    (lambda B, L, d, h: (B, L, d // h), "不是一个头的宽度"),
    (lambda B, L, d, h: (d, d), "权重矩阵"),
    (lambda B, L, d, h: (L, d), "batch"),
    (lambda B, L, d, h: (2, 4, 512), "应为 (3, 5, 4)"),
    (lambda B, L, d, h: (B, L, d / 3), "除法请用 //"),
    (lambda B, L, d, h: (B, L, None), "返回值 的第 3 项 是 None"),
    (lambda B, L, d, h: (True, L, d), "布尔值"),
    (lambda B, L, d, h: None, "忘了写 return"),
    (lambda B, L, d, h: torch.zeros(B, L, d), "而不是张量"),
    (lambda B, L, d, h: "text", "tuple"),
    (lambda B, L, d, h: {"x": 1}, "tuple"),
    (lambda B, L, d, h: float("nan"), "tuple"),
    (lambda B, L, d, h: (1.5, 2), "应该是整数，却是 1.5"),
    (raise_value_error, "ValueError"),
    ("a string", "应该是一个函数"),
    (42, "应该是一个函数"),
])


# ---------------------------------------------------------------- 3.2
def _count_loop(width, heads, bias=True):  # renamed arguments, a loop over the four Linears
    total = 0
    for _ in ("W_q", "W_k", "W_v", "W_o"):
        total += width * width
        if bias:
            total += width
    return total


RIGHT_3_2 = answers_for(check_count_parameters, [
    count_parameters_ref,
    _count_loop,
    lambda d, h, bias=True: np.int64(count_parameters_ref(d, h, bias)),
    lambda d, h, bias=True: float(count_parameters_ref(d, h, bias)),  # 262656.0 is accepted like 262656
    lambda d, h, bias=True: torch.tensor(count_parameters_ref(d, h, bias)),
    lambda d, h, bias=True: 4 * d * (d + bias),
])


def _counts_course_layer(d, h, bias=True):
    return sum(p.numel() for p in mha.MultiHeadAttention(d, h, bias=bias).parameters())


class _MyLayer(mha.MultiHeadAttention):
    pass


def _counts_linears(d, h, bias=True):
    return 4 * sum(p.numel() for p in nn.Linear(d, d, bias=bias).parameters())


def _counts_torch_layer(d, h, bias=True):
    return sum(p.numel() for p in nn.MultiheadAttention(d, h, bias=bias).parameters())


WRONG_3_2 = mistakes_for(check_count_parameters, [
    # building a layer to count it is the shortcut the prompt forbids
    (_counts_course_layer, "不要创建任何 nn.Module"),
    (lambda d, h, bias=True: sum(p.numel() for p in _MyLayer(d, h, bias=bias).parameters()), "nn.Module"),
    (_counts_linears, "不要创建任何 nn.Module"),
    (_counts_torch_layer, "nn.Module"),
    # named mistakes
    (lambda d, h, bias=True: 4 * d * d, "忘了偏置"),
    (lambda d, h, bias=True: 4 * (d * d + d), "bias=False"),
    (lambda d, h, bias=True: 3 * (d * d + (d if bias else 0)), "忘了最终的 W_o"),
    (lambda d, h, bias=True: h * 4 * (d * d + (d if bias else 0)), "多乘了 n_heads"),
    (lambda d, h, bias=True: 4 * (d * (d // h) + ((d // h) if bias else 0)), "一个头"),
    (lambda d, h, bias=True: 4 * (d * d + (1 if bias else 0)), "偏置不是一个数"),
    (lambda d, h, bias=True: 2 * d * d, "四个 nn.Linear"),
    (lambda d, h, bias=True: np.float64(count_parameters_ref(d, h, bias)) + 0.5, "应该是整数，却是"),
    # one rule for numbers, and garbage
    (lambda d, h, bias=True: None, "忘了写 return"),
    (lambda d, h, bias=True: True, "布尔值"),
    (lambda d, h, bias=True: 3.5, "应该是整数，却是 3.5"),
    (lambda d, h, bias=True: float("nan"), "应该是整数，却是 nan"),
    (lambda d, h, bias=True: "text", "应该是整数"),
    (lambda d, h, bias=True: torch.zeros(3, dtype=torch.long), "应该是整数"),
    (lambda d, h, bias=True: [None], "应该是整数"),
    (raise_value_error, "ValueError"),
    (42, "应该是一个函数"),
])


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


RIGHT_3_3 = answers_for(check_project_matmul, [project_ref, _einsum, _loops, _float64_inside, _reshape_2d,
                                               lambda x, linear: project_ref(x, linear).float()])


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


WRONG_3_3 = mistakes_for(check_project_matmul, [
    # shortcuts
    (lambda x, linear: linear(x), "F.linear"),
    (lambda x, linear: linear.forward(x), "F.linear"),
    (lambda x, linear: F.linear(x, linear.weight, linear.bias), "F.linear"),
    (lambda x, linear: nn.Linear.forward(linear, x), "F.linear"),
    (lambda x, linear: mha.project(x, linear), "不能调用现成的 mha.steps.project"),
    (lambda x, linear: mha.steps.project(x.clone(), linear), "只用 linear.weight、linear.bias 和矩阵乘法"),
    # named mistakes
    (_no_transpose, "忘了转置"),
    (_no_transpose_float64, "忘了转置"),
    (lambda x, linear: x @ linear.weight.T, "忘了加偏置"),
    (lambda x, linear: x @ linear.weight.T + linear.bias, "bias=False"),
    (lambda x, linear: project_ref(x, linear) * 1.01, "数值不对"),
    (lambda x, linear: project_ref(x, linear).double() * 1.01, "数值不对"),
    (lambda x, linear: x @ linear.weight.T[:, :1], "形状应该是"),
    (lambda x, linear: project_ref(x, linear).long(), "浮点张量"),
    # inputs changed in place
    (_mutates_x, "原地改动了传进来的参数 x"),
    (_mutates_weight, "原地改动了传进来的参数 linear.weight"),
    # no gradient: a projection that cannot train
    (_no_grad, "不能求梯度"),
    (_data, "不能求梯度"),
    (_detached_input, "梯度传不到 x"),
    # garbage
    (lambda x, linear: None, "忘了写 return"),
    (lambda x, linear: torch.full_like(x, float("nan")), "NaN"),
    (lambda x, linear: "text", "torch.Tensor"),
    (lambda x, linear: (project_ref(x, linear), None), "tuple"),
    (lambda x, linear: 1.5, "torch.Tensor"),
    (raise_value_error, "ValueError"),
    ("a string", "应该是一个函数"),
])

# ---------------------------------------------------------------- the reworked 3.1, 3.2, 3.3
RIGHT_NEW = (answers_for(check_cross_projection_shapes, [cross_shapes_ref,
                                                         lambda B, L, S, d, h: {"q": [B, L, d], "k": (B, S, d), "v": (B, S, d),
                                                                                "extra": 1}])
             + answers_for(check_count_parameters_general, [general_count_ref,
                                                            lambda *a: float(general_count_ref(*a))])
             + answers_for(check_project_packed, [packed_ref, lambda x, W, b: [t.float() for t in packed_ref(x, W, b)],
                                                  lambda x, W, b: tuple(torch.einsum("bld,od->blo", x, w) + (0 if b is None else bb)
                                                                        for w, bb in zip(W.chunk(3), (b.chunk(3) if b is not None else (0,) * 3)))]))

WRONG_NEW = mistakes_for(check_cross_projection_shapes, [
    (lambda B, L, S, d, h: {"q": (B, L, d), "k": (B, L, d), "v": (B, L, d)}, ["长度是 S", "不是 Query"]),
    (lambda B, L, S, d, h: {"q": (B, S, d), "k": (B, S, d), "v": (B, S, d)}, "长度是 L"),
    (lambda B, L, S, d, h: {"q": (B, h, L, d // h), "k": (B, S, d), "v": (B, S, d)}, "分头之后"),
    (lambda B, L, S, d, h: {"q": (B, L, d), "k": (B, S, d // h), "v": (B, S, d)}, "只改最后一维"),
    (lambda B, L, S, d, h: {k: tuple(mha.MultiHeadAttention(d, h).W_q(torch.zeros(B, L, d)).shape) for k in "qkv"},
     "不能调用现成的"),
    (lambda B, L, S, d, h: {"q": (B, L, d)}, "缺少"),
]) + mistakes_for(check_count_parameters_general, [
    (lambda d, h, dk, dv, b: 4 * (d * d + (d if b else 0)), "d_k = d_v = d_model / n_heads"),
    (lambda d, h, dk, dv, b: general_count_ref(d, h, dk, dk, b), "按 d_k 算了"),
    (lambda d, h, dk, dv, b: general_count_ref(d, h, dk, dv, b) - h * dv * d - (d if b else 0), "忘了 W_o"),
    (lambda d, h, dk, dv, b: general_count_ref(d, 1, dk, dv, b), "只数了一个头"),
    (lambda d, h, dk, dv, b: general_count_ref(d, h, dk, dv, False), "忘了偏置"),
    (lambda d, h, dk, dv, b: sum(p.numel() for p in nn.Linear(d, h * dk).parameters()), "不要创建任何 nn.Module"),
    (lambda d, h, dk, dv, b: 2 * (d * h * dk + h * dk) + (d * h * dv + h * dv) + (h * dv * d + d), "bias=False 时"),
]) + mistakes_for(check_project_packed, [
    (lambda x, W, b: tuple(reversed(packed_ref(x, W, b))), "第 2 块"),
    (lambda x, W, b: tuple(x @ w + (0 if b is None else bb) for w, bb in zip(W.chunk(3), (b.chunk(3) if b is not None else (0,) * 3))),
     "忘了转置"),
    (lambda x, W, b: tuple(x @ w.T for w in W.chunk(3)), "忘了加偏置"),
    (lambda x, W, b: tuple(F.linear(x, w) for w in W.chunk(3)), "F.linear"),
    (lambda x, W, b: tuple(torch.ops.aten.linear(x, w) for w in W.chunk(3)), "torch.ops.aten.linear"),
    (lambda x, W, b: F._in_projection_packed(x, x, x, W, b), "F.linear"),
    (lambda x, W, b: tuple(t.detach() for t in packed_ref(x, W, b)), "梯度"),
    (lambda x, W, b: packed_ref(x, W, b)[:2], "三个张量"),
    (lambda x, W, b: x @ W.T, "三个张量"),
])



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
    (lambda x, W, b, h, hd: mha.project(x, torch.nn.Linear(4, 4)), "mha.steps.project"),
    (lambda x, W, b, h, hd: head_k_solution(x, W, b, h, hd).detach(), "梯度"),
    (lambda x, W, b, h, hd: head_k_solution(x, W, b, h, hd) * 2, "数值不对"),
])

test_right_answers_pass = right_answers(RIGHT_3_1, RIGHT_3_2, RIGHT_3_3, RIGHT_NEW, RIGHT_HEAD_K)
test_wrong_answers_are_named = wrong_answers(WRONG_3_1, WRONG_3_2, WRONG_3_3, WRONG_NEW, WRONG_HEAD_K)


def test_reference_project_matches_mha_project():
    layer = mha.MultiHeadAttention(16, 4).requires_grad_(False)
    x = torch.randn(2, 3, 16)
    assert torch.allclose(project_ref(x, layer.W_q), mha.project(x, layer.W_q), atol=1e-6)
    assert math.isclose(project_ref(x, layer.W_q).sum().item(), layer.W_q(x).sum().item(), rel_tol=1e-4, abs_tol=1e-4)
