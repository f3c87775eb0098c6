"""Chapter 8 checkers: reference passes, stubs are 'not done', named mistakes, garbage never raises."""
import math

import pytest
import torch
from torch import nn

from exercise_support import verdict as shared_verdict
from mha.exercises import check_layer_shapes, check_load_from_torch, check_my_multihead_attention


def verdict(check, answer, capsys):
    return shared_verdict(capsys, check, answer)


# ---------- 8.1 shapes ----------
def shapes_solution(B, L, S, d_model, n_heads):
    d_k = d_model // n_heads
    return {"projected_q": (B, L, d_model), "split_q": (B, n_heads, L, d_k), "scores": (B, n_heads, L, S),
            "heads": (B, n_heads, L, d_k), "concat": (B, L, d_model), "output": (B, L, d_model)}


def shapes_with(**wrong):
    def fn(B, L, S, d_model, n_heads):
        out = shapes_solution(B, L, S, d_model, n_heads)
        out.update({k: v(B, L, S, d_model, n_heads) for k, v in wrong.items()})
        return out
    return fn


def test_8_1(capsys):
    ok, out = verdict(check_layer_shapes, shapes_solution, capsys)
    assert ok and "✅" in out
    for stub in (None, ..., lambda *a: (_ for _ in ()).throw(NotImplementedError())):
        ok, out = verdict(check_layer_shapes, stub, capsys)
        assert not ok and "还没完成" in out
    cases = {
        "不是 Query 的长度 L": shapes_with(scores=lambda B, L, S, d, h: (B, h, L, L)),
        "transpose(1, 2)": shapes_with(split_q=lambda B, L, S, d, h: (B, L, h, d // h)),
        "每个头只有 d_k": shapes_with(heads=lambda B, L, S, d, h: (B, h, L, d)),
        "缺少这些键": lambda *a: {"output": (1, 1, 1)},
    }
    for needle, fn in cases.items():
        ok, out = verdict(check_layer_shapes, fn, capsys)
        assert not ok and needle in out, out


# ---------- 8.2 loading weights ----------
def load_solution(ours, reference):
    d = reference.embed_dim
    for i, name in enumerate(("W_q", "W_k", "W_v")):
        getattr(ours, name).weight.copy_(reference.in_proj_weight[i * d:(i + 1) * d])
        if reference.in_proj_bias is not None:
            getattr(ours, name).bias.copy_(reference.in_proj_bias[i * d:(i + 1) * d])
    ours.W_o.weight.copy_(reference.out_proj.weight)
    if reference.out_proj.bias is not None:
        ours.W_o.bias.copy_(reference.out_proj.bias)


def load_transposed(ours, reference):
    load_solution(ours, reference)
    d = reference.embed_dim
    for i, name in enumerate(("W_q", "W_k", "W_v")):
        getattr(ours, name).weight.copy_(reference.in_proj_weight[i * d:(i + 1) * d].T)


def load_kqv(ours, reference):
    load_solution(ours, reference)
    d = reference.embed_dim
    ours.W_q.weight.copy_(reference.in_proj_weight[d:2 * d])
    ours.W_k.weight.copy_(reference.in_proj_weight[:d])


def load_no_bias(ours, reference):
    d = reference.embed_dim
    for i, name in enumerate(("W_q", "W_k", "W_v")):
        getattr(ours, name).weight.copy_(reference.in_proj_weight[i * d:(i + 1) * d])
    ours.W_o.weight.copy_(reference.out_proj.weight)


def test_8_2(capsys):
    ok, out = verdict(check_load_from_torch, load_solution, capsys)
    assert ok and "✅" in out
    for stub in (None, ...):
        ok, out = verdict(check_load_from_torch, stub, capsys)
        assert not ok and "还没完成" in out
    for needle, fn in {"转置": load_transposed, "顺序弄错": load_kqv, "偏置": load_no_bias,
                       "没有把权重复制": lambda o, r: None}.items():
        ok, out = verdict(check_load_from_torch, fn, capsys)
        assert not ok and needle in out, out


# ---------- 8.3 the whole layer ----------
def make_class(scale=True, softmax_dim=-1, transpose_split=True, transpose_merge=True, use_wo=True,
               invert_mask=False, return_weights=False, mutate=False):
    class Student(nn.Module):
        def __init__(self, d_model, n_heads):
            super().__init__()
            self.n_heads, self.d_k = n_heads, d_model // n_heads
            self.W_q, self.W_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
            self.W_v, self.W_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

        def split(self, x):
            B, n, _ = x.shape
            if transpose_split:
                return x.view(B, n, self.n_heads, self.d_k).transpose(1, 2)
            return x.reshape(B, self.n_heads, n, self.d_k)

        def forward(self, Q, K, V, mask=None):
            if mutate:
                Q.mul_(1.0).add_(0.5)
            q, k, v = self.split(self.W_q(Q)), self.split(self.W_k(K)), self.split(self.W_v(V))
            scores = q @ k.transpose(-2, -1)
            if scale:
                scores = scores / math.sqrt(self.d_k)
            if mask is not None:
                scores = scores.masked_fill((mask != 0) if invert_mask else (mask == 0), -1e9)
            weights = torch.softmax(scores, dim=softmax_dim)
            heads = weights @ v
            B, h, L, d_k = heads.shape
            concat = heads.transpose(1, 2).reshape(B, L, h * d_k) if transpose_merge else heads.reshape(B, L, h * d_k)
            out = self.W_o(concat) if use_wo else concat
            return (out, weights) if return_weights else out
    return Student


def test_8_3(capsys):
    ok, out = verdict(check_my_multihead_attention, make_class(), capsys)
    assert ok and "✅" in out

    class Stub(nn.Module):
        def __init__(self, d_model, n_heads):
            super().__init__()
            raise NotImplementedError

    for stub in (None, ..., Stub):
        ok, out = verdict(check_my_multihead_attention, stub, capsys)
        assert not ok and "还没完成" in out
    cases = {
        "√d_k": make_class(scale=False),
        "softmax 的轴错了": make_class(softmax_dim=-2),
        "没有先 view 成 (B, L, h, d_k) 再 transpose": make_class(transpose_split=False),
        "Concat 时没有先 transpose": make_class(transpose_merge=False),
        "忘了最后的 Linear W^O": make_class(use_wo=False),
        "掩码的方向反了": make_class(invert_mask=True),
        "不要返回 (output, weights)": make_class(return_weights=True),
        "修改了输入": make_class(mutate=True),
    }
    for needle, cls in cases.items():
        ok, out = verdict(check_my_multihead_attention, cls, capsys)
        assert not ok and needle in out, (needle, out)


@pytest.mark.parametrize("check", [check_layer_shapes, check_load_from_torch, check_my_multihead_attention])
@pytest.mark.parametrize("garbage", ["text", 42, [1, 2], lambda *a: float("nan"), lambda *a: 1 / 0,
                                     lambda *a: torch.full((2, 2), float("nan")), nn.Linear])
def test_garbage_never_raises(check, garbage, capsys):
    ok, out = verdict(check, garbage, capsys)
    assert ok is False
    assert out.count("\n") == 1 and ("❌" in out or "⏳" in out)
