"""Chapter 8 checkers, table-driven: right answers in every style pass; stubs are "not done"; every wrong,
forbidden or broken answer gets a verdict that names what happened (never the checker's own error).
The generic stub and garbage answers are tried on every checker in tests/checkers/test_exercises_common.py."""
import copy
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import mha
from exercise_support import (verdict_allowing_prints, answers_for, every, mistakes_for, not_done_answers, raise_value_error, right_answers,
                              wrong_answers)
from mha.course.exercises import check_zeroed_weight, check_load_from_torch, check_my_multihead_attention, results
from mha.course.exercises import check_scale_bug


# ---------------------------------------------------------------- 8.1 predict an ablation
ABLATED = {"W_q": ["rows_equal"], "W_k": ["rows_equal", "uniform"], "W_v": ["rows_equal"], "W_o": ["rows_equal", "bias_only"]}


def ablated_by_experiment():
    """An honest answer: zero each weight in a layer and look (any layer with non-zero biases)."""
    answer = {}
    for name in ("W_q", "W_k", "W_v", "W_o"):
        torch.manual_seed(3)
        layer = mha.MultiHeadAttention(12, 3).eval()
        with torch.no_grad():
            for lin in (layer.W_q, layer.W_k, layer.W_v, layer.W_o):
                lin.bias.uniform_(0.5, 1.0)
            getattr(layer, name).weight.zero_()
            x = torch.randn(1, 6, 12)
            out, w = layer(x, x, x, need_weights=True)
        holds = {"rows_equal": torch.allclose(out, out[:, :1].expand_as(out), atol=1e-5),
                 "uniform": torch.allclose(w, torch.full_like(w, 1 / 6), atol=1e-5),
                 "bias_only": torch.allclose(out, layer.W_o.bias.expand_as(out), atol=1e-5)}
        answer[name] = {k for k, v in holds.items() if v}
    return answer


def ablated(**changed):
    return {**ABLATED, **changed}


RIGHT_8_1 = answers_for(check_zeroed_weight, [
    ABLATED,
    ablated_by_experiment(),
    {k: tuple(reversed(v)) for k, v in ABLATED.items()},  # any order, tuples and sets alike
])
NOT_DONE_8_1 = answers_for(check_zeroed_weight, [ablated(W_v=...)])
WRONG_8_1 = mistakes_for(check_zeroed_weight, [
    (ablated(W_q=["rows_equal", "uniform"]), ["W_q", "偏置还在"]),
    (ablated(W_q=[]), ["W_q", "同一个 b^Q"]),
    (ablated(W_k=["rows_equal"]), ["W_k", "均匀的 1/S"]),
    (ablated(W_k=["uniform"]), ["W_k", "同一个平均"]),
    (ablated(W_v=["rows_equal", "bias_only"]), ["W_v", "b^V W^O + b^O"]),
    (ablated(W_v=[]), ["W_v", "加权平均都是 b^V"]),
    (ablated(W_o=["rows_equal"]), ["W_o", "只剩 b^O"]),
    (ablated(W_o=["rows_equal", "bias_only", "uniform"]), ["W_o", "不受影响"]),
    (ablated(W_o=["rows_equal", "bias"]), "不认识的名字"),
    (ablated(W_o=[1]), "名字的列表"),
    ({"W_q": []}, "缺少键"),
])


# ---------------------------------------------------------------- 8.2 loading weights
def load_solution(ours, reference):
    d = reference.embed_dim
    for i, name in enumerate(("W_q", "W_k", "W_v")):
        getattr(ours, name).weight.copy_(reference.in_proj_weight[i * d:(i + 1) * d])
        if reference.in_proj_bias is not None:
            getattr(ours, name).bias.copy_(reference.in_proj_bias[i * d:(i + 1) * d])
    ours.W_o.weight.copy_(reference.out_proj.weight)
    if reference.out_proj.bias is not None:
        ours.W_o.bias.copy_(reference.out_proj.bias)


def load_chunks_returning(layer, torch_layer):  # renamed arguments, chunk, returns the layer
    weights = torch_layer.in_proj_weight.chunk(3)
    biases = torch_layer.in_proj_bias.chunk(3) if torch_layer.in_proj_bias is not None else (None,) * 3
    for linear, w, b in zip((layer.W_q, layer.W_k, layer.W_v), weights, biases):
        linear.weight.copy_(w)
        if b is not None:
            linear.bias.copy_(b)
    layer.W_o.load_state_dict(torch_layer.out_proj.state_dict())
    return layer


def load_state_dict_style(ours, reference):
    d = reference.embed_dim
    state = {}
    for i, name in enumerate(("W_q", "W_k", "W_v")):
        state[f"{name}.weight"] = reference.in_proj_weight[i * d:(i + 1) * d]
        if reference.in_proj_bias is not None:
            state[f"{name}.bias"] = reference.in_proj_bias[i * d:(i + 1) * d]
    for key, value in reference.out_proj.state_dict().items():
        state[f"W_o.{key}"] = value
    ours.load_state_dict(state)


RIGHT_8_2 = answers_for(check_load_from_torch, [load_solution, load_chunks_returning, load_state_dict_style])


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


def load_kv_swapped(ours, reference):
    load_solution(ours, reference)
    d = reference.embed_dim
    ours.W_k.weight.copy_(reference.in_proj_weight[2 * d:])
    ours.W_v.weight.copy_(reference.in_proj_weight[d:2 * d])


def load_kv_swapped_with_biases(ours, reference):
    load_kv_swapped(ours, reference)
    d = reference.embed_dim
    if reference.in_proj_bias is not None:
        ours.W_k.bias.copy_(reference.in_proj_bias[2 * d:])
        ours.W_v.bias.copy_(reference.in_proj_bias[d:2 * d])


def load_no_bias(ours, reference):
    d = reference.embed_dim
    for i, name in enumerate(("W_q", "W_k", "W_v")):
        getattr(ours, name).weight.copy_(reference.in_proj_weight[i * d:(i + 1) * d])
    ours.W_o.weight.copy_(reference.out_proj.weight)


def load_without_out_bias(ours, reference):
    load_solution(ours, reference)
    ours.W_o.bias.zero_()


def load_wrong_w_o(ours, reference):
    load_solution(ours, reference)
    ours.W_o.weight.copy_(reference.out_proj.weight.T)


def load_via_mha(ours, reference):
    ours.load_state_dict(mha.from_torch(reference).state_dict())


def load_via_to_torch(ours, reference):
    mha.to_torch(ours)  # builds PyTorch's layer from ours: a shortcut as well, and the wrong direction
    load_via_mha(ours, reference)


def load_new_layer(ours, reference):
    fresh = copy.deepcopy(ours)
    load_solution(fresh, reference)
    return fresh


def load_and_damage_reference(ours, reference):
    load_solution(ours, reference)
    reference.out_proj.weight.zero_()


def load_replacing_linear(ours, reference):
    load_solution(ours, reference)
    ours.W_q = None


def load_as_float32(ours, reference):
    load_solution(ours, reference)
    ours.W_k.weight.data = ours.W_k.weight.data.float()


WRONG_8_2 = mistakes_for(check_load_from_torch, [
    (load_transposed, "转置"),
    (load_kqv, "顺序弄错"),
    (load_kv_swapped, "K 和 V 两块装反了"),
    (load_kv_swapped_with_biases, "K 和 V 两块装反了"),
    (load_no_bias, "偏置"),
    (load_wrong_w_o, "W_o 没有装对"),
    (load_without_out_bias, "W_o 的偏置没有复制"),
    (lambda o, r: None, "没有把权重复制"),
    (load_new_layer, "返回了一个新的层"),
    (load_via_mha, "这道题要你自己实现，不能调用现成的 mha.from_torch"),
    (load_via_to_torch, "不能调用现成的 mha.to_torch"),
    (load_and_damage_reference, "修改了输入：原地改动了传进来的参数 reference.out_proj.weight"),
    (load_replacing_linear, "换成了 NoneType"),
    (load_as_float32, "dtype"),
    (raise_value_error, "ValueError: boom"),
    (lambda ours: None, "TypeError"),
    ("text", "callable"),
    (nn.Linear, "TypeError"),
])


# ---------------------------------------------------------------- 8.3 the whole layer
def make_class(scale=True, softmax_dim=-1, transpose_split=True, transpose_merge=True, use_wo=True,
               invert_mask=False, return_weights=False, mutate=False, bias=True, tilde_mask=False,
               no_grad=False, detach_input=False, sdpa=False, mha_step=None, minus_inf=False, dropout=0.0,
               sqrt_d_model=False, roles_swapped=False, ignore_mask=False, zero_blocked=True, nan_to_num=True,
               after_only=False, weights_out="used"):
    class Student(nn.Module):
        def __init__(self, d_model, n_heads):
            super().__init__()
            self.n_heads, self.d_k = n_heads, d_model // n_heads
            self.W_q, self.W_k = nn.Linear(d_model, d_model, bias=bias), nn.Linear(d_model, d_model, bias=bias)
            self.W_v, self.W_o = nn.Linear(d_model, d_model, bias=bias), nn.Linear(d_model, d_model, bias=bias)
            self.dropout = nn.Dropout(dropout)

        def split(self, x):
            B, n, _ = x.shape
            if mha_step == "split":
                return mha.split_heads(x, self.n_heads)
            if transpose_split:
                return x.view(B, n, self.n_heads, self.d_k).transpose(1, 2)
            return x.reshape(B, self.n_heads, n, self.d_k)

        def attend(self, q, k, v, mask):
            if sdpa:
                return F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else mask.bool()), None
            if mha_step == "attention":
                return mha.attention(q, k, v, None if mask is None else mask.bool())
            if roles_swapped:  # the projected values scored, the projected keys summed
                k, v = v, k
            scores = q @ k.transpose(-2, -1)
            if scale:
                scores = scores / math.sqrt(self.n_heads * self.d_k if sqrt_d_model else self.d_k)
            hidden = None
            if mask is not None and not ignore_mask:
                hidden = ~mask if tilde_mask else ((mask != 0) if invert_mask else (mask == 0))
                if not after_only:
                    scores = scores.masked_fill(hidden, -math.inf if minus_inf else -1e9)
            self.scores = scores
            weights = torch.softmax(scores, dim=softmax_dim)
            self.unzeroed = weights
            if minus_inf and nan_to_num:
                weights = torch.nan_to_num(weights)  # a query that sees no key: NaN -> 0
            elif hidden is not None and (zero_blocked or after_only):
                weights = weights.masked_fill(hidden, 0.0)  # a query that sees no key: 1/S -> 0
            return self.dropout(weights) @ v, weights

        def forward(self, Q, K, V, mask=None, need_weights=False):
            if mutate:
                Q.mul_(1.0).add_(0.5)
            if detach_input:
                Q = Q.detach()
            q, k, v = self.split(self.W_q(Q)), self.split(self.W_k(K)), self.split(self.W_v(V))
            heads, weights = self.attend(q, k, v, mask)
            B, h, L, d_k = heads.shape
            if mha_step == "merge":
                concat = mha.merge_heads(heads)
            elif transpose_merge:
                concat = heads.transpose(1, 2).reshape(B, L, h * d_k)
            else:
                concat = heads.reshape(B, L, h * d_k)
            out = self.W_o(concat) if use_wo else concat
            if need_weights:  # which weights a student might hand back
                weights = {"used": weights, "mean": weights.mean(dim=1), "scores": self.scores,
                           "unzeroed": self.unzeroed, "none": None}[weights_out]
                return out if weights_out == "none" else (out, weights)
            return (out, weights) if return_weights else out

    if no_grad:
        class Frozen(Student):
            def forward(self, *args, **kwargs):
                with torch.no_grad():
                    return super().forward(*args, **kwargs)
        return Frozen
    return Student


class EinsumMHA(nn.Module):
    """Another correct style: einsum, float64 inside, renamed arguments, a bool mask made from 0/1."""

    def __init__(self, width, heads):
        super().__init__()
        self.h = heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(width, width) for _ in range(4))

    def forward(self, query, key, value, attn_mask=None, need_weights=False):
        B, L, d = query.shape
        q = self.W_q(query).view(B, L, self.h, -1)
        k = self.W_k(key).view(B, key.shape[1], self.h, -1)
        v = self.W_v(value).view(B, value.shape[1], self.h, -1)
        scores = torch.einsum("blhd,bshd->bhls", q.double(), k.double()) / math.sqrt(q.shape[-1])
        if attn_mask is not None:
            scores = scores.masked_fill(attn_mask.bool().logical_not(), float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num()
        heads = torch.einsum("bhls,bshd->blhd", weights, v.double()).float()
        out = self.W_o(heads.reshape(B, L, d))
        return (out, weights.float()) if need_weights else out


class LoopMHA(nn.Module):
    """Another correct style: one head at a time, torch.cat for Concat."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, Q, K, V, mask=None, need_weights=False):
        q, k, v = self.W_q(Q), self.W_k(K), self.W_v(V)
        heads, all_weights = [], []
        for i in range(self.n_heads):
            part = slice(i * self.d_k, (i + 1) * self.d_k)
            scores = q[..., part] @ k[..., part].transpose(-2, -1) / self.d_k ** 0.5  # (B, L, S)
            if mask is not None:
                m = mask if mask.dim() == 2 else mask[:, 0]  # (L, S) or (B, L|1, S)
                scores = scores.masked_fill(m == 0, -1e9)
                weights = torch.softmax(scores, dim=-1).masked_fill(m == 0, 0.0)
            else:
                weights = torch.softmax(scores, dim=-1)
            heads.append(weights @ v[..., part])
            all_weights.append(weights)
        out = self.W_o(torch.cat(heads, dim=-1))
        return (out, torch.stack(all_weights, dim=1)) if need_weights else out  # (B, h, L, S)


class Float64MHA(nn.Module):
    """A layer built in float64 gets float64 inputs."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.inner = make_class()(d_model, n_heads).double()
        self.W_q, self.W_k, self.W_v, self.W_o = self.inner.W_q, self.inner.W_k, self.inner.W_v, self.inner.W_o

    def forward(self, Q, K, V, mask=None, need_weights=False):
        return self.inner(Q, K, V, mask, need_weights)


RIGHT_8_3 = answers_for(check_my_multihead_attention, [
    make_class(), make_class(minus_inf=True), make_class(dropout=0.1), EinsumMHA, LoopMHA, Float64MHA])


class StubInit(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        raise NotImplementedError

    def forward(self, Q, K, V, mask=None):
        raise NotImplementedError


class StubForward(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, Q, K, V, mask=None):
        raise NotImplementedError


NOT_DONE_8_3 = answers_for(check_my_multihead_attention, [StubInit, StubForward])


# ---- shortcuts
class SubclassOfOurs(mha.MultiHeadAttention):
    def __init__(self, d_model, n_heads):
        super().__init__(d_model, n_heads, dropout=0.0)


class SubclassOfTorch(nn.MultiheadAttention):
    def __init__(self, d_model, n_heads):
        super().__init__(d_model, n_heads, batch_first=True)


class WrapsTorch(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.inner = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, Q, K, V, mask=None):
        return self.inner(Q, K, V, need_weights=False)[0]


class WrapsTorchLazily(LoopMHA):
    """Builds nn.MultiheadAttention only in forward, from its own weights (the four Linears of LoopMHA)."""

    def forward(self, Q, K, V, mask=None):
        inner = nn.MultiheadAttention(Q.shape[-1], self.n_heads, batch_first=True, dtype=Q.dtype)
        inner.in_proj_weight = nn.Parameter(torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight]))
        inner.in_proj_bias = nn.Parameter(torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias]))
        inner.out_proj = self.W_o
        attn_mask = None if mask is None else mha.to_torch_attn_mask(mask)
        return inner(Q, K, V, attn_mask=attn_mask, need_weights=False)[0]


class WrapsOurs(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.inner = mha.MultiHeadAttention(d_model, n_heads, dropout=0.0)
        self.W_q, self.W_k, self.W_v, self.W_o = self.inner.W_q, self.inner.W_k, self.inner.W_v, self.inner.W_o

    def forward(self, Q, K, V, mask=None):
        return self.inner(Q, K, V, mask)


SHORTCUTS_8_3 = mistakes_for(check_my_multihead_attention, [
    (mha.MultiHeadAttention, "这道题要你自己实现，不能直接用现成的 mha.MultiHeadAttention（你交上来的类就是它）"),
    (SubclassOfOurs, "不能直接用现成的 mha.MultiHeadAttention（你交上来的类继承了它）"),
    (nn.MultiheadAttention, "不能直接用现成的 nn.MultiheadAttention（你交上来的类就是它）"),
    (SubclassOfTorch, "不能直接用现成的 nn.MultiheadAttention（你交上来的类继承了它）"),
    (mha.GroupedQueryAttention, "不能直接用现成的 mha.GroupedQueryAttention（你交上来的类就是它）"),
    (WrapsTorch, "这道题要你自己实现，不能调用现成的 nn.MultiheadAttention"),
    (WrapsTorchLazily, "这道题要你自己实现，不能调用现成的 nn.MultiheadAttention"),
    (WrapsOurs, "这道题要你自己实现，不能调用现成的 mha.MultiHeadAttention"),
    (make_class(sdpa=True), "这道题要你自己实现，不能调用现成的 F.scaled_dot_product_attention"),
    (make_class(mha_step="split"), "不能调用现成的 mha.split_heads"),
    (make_class(mha_step="attention"), "不能调用现成的 mha.attention"),
    (make_class(mha_step="merge"), "不能调用现成的 mha.merge_heads"),
])


# ---- wrong layers
class NoMaskArgument(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.inner = make_class()(d_model, n_heads)
        self.W_q, self.W_k, self.W_v, self.W_o = self.inner.W_q, self.inner.W_k, self.inner.W_v, self.inner.W_o

    def forward(self, Q, K, V):
        return self.inner(Q, K, V)


class MaskWithoutDefault(NoMaskArgument):
    def forward(self, Q, K, V, mask):
        return self.inner(Q, K, V, mask)


class MissingW_o(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.W_q, self.W_k, self.W_v = (nn.Linear(d_model, d_model) for _ in range(3))
        self.out = nn.Linear(d_model, d_model)


class NarrowHeads(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.W_q, self.W_k, self.W_v = (nn.Linear(d_model, d_model // n_heads) for _ in range(3))
        self.W_o = nn.Linear(d_model, d_model)


class NotAModule:
    def __init__(self, d_model, n_heads):
        self.d_model = d_model


class NoSuperInit(nn.Module):
    def __init__(self, d_model, n_heads):
        self.W_q = nn.Linear(d_model, d_model)


class DetachesWeights(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.inner = make_class()(d_model, n_heads)
        self.W_q, self.W_k, self.W_v, self.W_o = self.inner.W_q, self.inner.W_k, self.inner.W_v, self.inner.W_o

    def forward(self, Q, K, V, mask=None):
        out = self.inner(Q, K, V, mask)
        return out.detach() + (Q.sum() * 0) + (K.sum() * 0) + (V.sum() * 0)


class LectureMHA(nn.Module):
    """The lecture's reference class (《原理图（下）》), pasted as it is."""

    def __init__(self, d_model=512, n_heads=8, dropout=0.1):
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, Q, K, V, mask=None):
        batch_size = Q.size(0)
        Q = self.W_q(Q)
        K = self.W_k(K)
        V = self.W_v(V)
        Q = Q.view(batch_size, -1, self.n_heads, self.d_k).transpose(1, 2)
        K = K.view(batch_size, -1, self.n_heads, self.d_k).transpose(1, 2)
        V = V.view(batch_size, -1, self.n_heads, self.d_k).transpose(1, 2)
        scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        attn = torch.softmax(scores, dim=-1)
        attn = self.dropout(attn)
        output = torch.matmul(attn, V)
        output = output.transpose(1, 2).contiguous()
        output = output.view(batch_size, -1, self.d_model)
        return self.W_o(output)


class LecturePlusOneLine(LectureMHA):
    """The lecture's class with the one line the prompt describes (blocked rows: 0 after the softmax); no weights."""

    def forward(self, Q, K, V, mask=None):
        batch_size = Q.size(0)
        Q = self.W_q(Q).view(batch_size, -1, self.n_heads, self.d_k).transpose(1, 2)
        K = self.W_k(K).view(batch_size, -1, self.n_heads, self.d_k).transpose(1, 2)
        V = self.W_v(V).view(batch_size, -1, self.n_heads, self.d_k).transpose(1, 2)
        scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        attn = torch.softmax(scores, dim=-1)
        if mask is not None:
            attn = attn.masked_fill(mask == 0, 0.0)  # the one added line
        attn = self.dropout(attn)
        output = torch.matmul(attn, V).transpose(1, 2).contiguous().view(batch_size, -1, self.d_model)
        return self.W_o(output)


class BlockedRowsWrong(LectureMHA):
    """Zeroes a blocked query's output instead of its weights: the output should be b^O, not 0."""

    def forward(self, Q, K, V, mask=None):
        out = super().forward(Q, K, V, mask)
        if mask is None:
            return out
        blocked = ~(mask != 0).expand(Q.shape[0], 1, Q.shape[1], K.shape[1]).any(-1)[:, 0]  # (B, L)
        return out.masked_fill(blocked[..., None], 0.0)


# The first six mirror mha/course/exercises/ch08.py's MISTAKES on purpose: written here independently (own buggy
# class, own expected words), so the checker's diagnosis table is tested, not reused.
WRONG_8_3 = mistakes_for(check_my_multihead_attention, [
    (make_class(scale=False), "√d_k"),
    (make_class(softmax_dim=-2), "softmax 的轴错了"),
    (make_class(transpose_split=False), "没有先 view 成 (B, L, h, d_k) 再 transpose"),
    (make_class(transpose_merge=False), "Concat 时没有先 transpose"),
    (make_class(use_wo=False), "忘了最后的 Linear W^O"),
    (make_class(invert_mask=True), "掩码的方向反了"),
    (make_class(ignore_mask=True), "mask 没有用上"),
    (make_class(sqrt_d_model=True), "缩放用了 √d_model"),
    (make_class(roles_swapped=True), "K 和 V 的角色用反了"),
    (make_class(return_weights=True), "need_weights=False（默认）时 forward 只返回输出张量"),
    (make_class(after_only=True), ["在 softmax 之后才挡", "没有重新归一化", "每行权重之和 < 1"]),
    (make_class(weights_out="mean"), ["对各个头取了平均", "(B, h, L, S)"]),
    (make_class(weights_out="scores"), "softmax 之前的分数"),
    (make_class(weights_out="unzeroed"), ["均匀的 1/S", "置 0 之后"]),
    (make_class(weights_out="none"), ["要返回一个元组 (output, weights)", "权重没有返回"]),
    (LecturePlusOneLine, ["还要接受参数 need_weights=False", "(输出, 每个头的权重)"]),
    (make_class(tilde_mask=True), "0/1 的整数张量"),
    (make_class(bias=False), "W_q 没有偏置（bias=False）"),
    (make_class(mutate=True), "修改了输入：原地改动了传进来的参数 Q"),
    (make_class(no_grad=True), "不能求梯度"),
    (make_class(detach_input=True), "梯度传不到 Q"),
    (DetachesWeights, "梯度传不到 W_q.weight"),
    (NoMaskArgument, "forward 要接受 4 个参数"),
    (MaskWithoutDefault, "mask 要有默认值 None"),
    (MissingW_o, "需要一个名为 W_o 的 nn.Linear"),
    (NarrowHeads, "W_q.weight 的形状应该是"),
    (NotAModule, "应该继承 nn.Module"),
    (NoSuperInit, "第一行要写 super().__init__()"),
    (make_class(scale=False, softmax_dim=-2), "的形状对了，但数值不对"),
    (make_class(zero_blocked=False), ["均匀的 1/S", "-1e9", "b^O"]),  # the lecture's masked_fill alone
    (LectureMHA, ["均匀的 1/S", "《原理图（下）》"]),
    (make_class(minus_inf=True, nan_to_num=False, zero_blocked=False), ["NaN", "0/0"]),
    (BlockedRowsWrong, ["整行被挡住的 query 不对", "其余的行已经对了"]),
    (nn.Linear, "需要一个名为 W_q 的 nn.Linear"),
    ("text", "类本身"),
    (42, "类本身"),
])


# ---------------------------------------------------------------- the tables, run
test_right_answers_pass = right_answers(RIGHT_8_1, RIGHT_8_2, RIGHT_8_3)
test_stubs_are_not_done = not_done_answers(NOT_DONE_8_1, NOT_DONE_8_3)
test_wrong_answers_are_named = wrong_answers(WRONG_8_1, WRONG_8_2, SHORTCUTS_8_3, WRONG_8_3)
# Garbage only these exercises' checkers get (the generic garbage is in tests/checkers/test_exercises_common.py).
test_garbage_never_raises = wrong_answers(every(
    [check_zeroed_weight, check_load_from_torch, check_my_multihead_attention],
    [[1, 2], lambda *a: float("nan"), lambda *a: 1 / 0, lambda *a: torch.full((2, 2), float("nan")), nn.Linear]))


def test_results_registry_lists_chapter():
    assert set(results("ch08")) == {"8.1", "8.2", "8.3", "8.4"}


# ---------------------------------------------------------------- 8.4 (bug hunt: sqrt(d_model))
test_scale_bug_right = right_answers([(check_scale_bug, {"right_anyway_heads": 1, "factor": 8 ** -0.5}),
                                      (check_scale_bug, {"right_anyway_heads": 1.0, "factor": 0.354})])
test_scale_bug_wrong = wrong_answers([
    (check_scale_bug, {"right_anyway_heads": 8, "factor": 8 ** -0.5}, "两种缩放不一样"),
    (check_scale_bug, {"right_anyway_heads": 3, "factor": 8 ** -0.5}, "整除"),
    (check_scale_bug, {"right_anyway_heads": 1, "factor": 8 ** 0.5}, "反了"),
    (check_scale_bug, {"right_anyway_heads": 1, "factor": 1 / 8}, "平方根"),
    (check_scale_bug, {"right_anyway_heads": 1, "factor": 0.5}, "不对"),
    (check_scale_bug, {"right_anyway_heads": 1, "factor": 0.35}, "接近了"),  # 1/sqrt(8) = 0.3536, 1.0 % off
    (check_scale_bug, {"right_anyway_heads": 1}, "缺少键"),
])


# ---------------------------------------------------------------- 8.2 load_from_torch (answers a student wrote)
def load_by_slices(ours, reference, *, via=None):
    d = reference.embed_dim
    for i, name in enumerate(("W_q", "W_k", "W_v")):
        w = reference.in_proj_weight[i * d:(i + 1) * d]
        getattr(ours, name).weight.copy_(w if via is None else via(w))
        if reference.in_proj_bias is not None:
            getattr(ours, name).bias.copy_(reference.in_proj_bias[i * d:(i + 1) * d])
    ours.W_o.weight.copy_(reference.out_proj.weight)
    if reference.out_proj.bias is not None:
        ours.W_o.bias.copy_(reference.out_proj.bias)


def load_printing(ours, reference):
    print(ours)  # debugging: the layer's extra_repr is no shortcut
    load_by_slices(ours, reference)


def load_new_linear(ours, reference):
    load_by_slices(ours, reference)
    new = nn.Linear(ours.W_q.in_features, ours.W_q.out_features, dtype=ours.W_q.weight.dtype)
    new.load_state_dict(ours.W_q.state_dict())
    ours.W_q = new


def load_shared_module(ours, reference):
    load_by_slices(ours, reference)
    ours.W_o = reference.out_proj


def load_via_float32(ours, reference):
    load_by_slices(ours, reference, via=lambda w: w.float())


# ---------------------------------------------------------------- 8.3 a layer with K and V swapped (a student's)
class KVLayer(nn.Module):
    swap = False

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.h, self.d_k = n_heads, d_model // n_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, Q, K, V, mask=None, need_weights=False):
        if self.swap:
            K, V = V, K
        B, L, _ = Q.shape
        split = lambda x: x.view(B, x.shape[1], self.h, self.d_k).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.W_q(Q)), split(self.W_k(K)), split(self.W_v(V))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        weights = torch.softmax(scores, -1)
        if mask is not None:
            keep = mask != 0
            keep = keep[:, None] if keep.dim() == 3 else keep
            weights = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), -1) * keep
        out = self.W_o((weights @ v).transpose(1, 2).reshape(B, L, -1))
        return (out, weights) if need_weights else out


class SwappedKV(KVLayer):
    swap = True


test_honest_student_answers_pass = right_answers(answers_for(check_my_multihead_attention, [KVLayer]))


def test_printing_the_layer_is_no_shortcut(capsys):
    ok, line = verdict_allowing_prints(capsys, check_load_from_torch, load_printing)
    assert ok is True, line
test_student_mistakes_are_named = wrong_answers(
    mistakes_for(check_my_multihead_attention, [(SwappedKV, "K 和 V 用反了")]),
    mistakes_for(check_load_from_torch, [(load_new_linear, "新的 nn.Linear"), (load_shared_module, "共用一个对象"),
                                         (load_via_float32, "float32")]),
)
