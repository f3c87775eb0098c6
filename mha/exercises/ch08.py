"""Checkers for chapter 8, the full layer."""
from __future__ import annotations

import math

import torch
from torch import nn

from ..layer import MultiHeadAttention
from ..masks import causal_mask, padding_mask_from_lengths
from ._core import Mistake, NotDone, call, checker, expect_close, expect_tensor, is_stub

__all__ = ["check_layer_shapes", "check_load_from_torch", "check_my_multihead_attention"]

SHAPE_KEYS = ("projected_q", "split_q", "scores", "heads", "concat", "output")


def reference_shapes(B, L, S, d_model, n_heads):
    d_k = d_model // n_heads
    return {
        "projected_q": (B, L, d_model),
        "split_q": (B, n_heads, L, d_k),
        "scores": (B, n_heads, L, S),
        "heads": (B, n_heads, L, d_k),
        "concat": (B, L, d_model),
        "output": (B, L, d_model),
    }


@checker("ch08", "8.1", "写出每一步的形状")
def check_layer_shapes(fn):
    for B, L, S, d_model, h in [(2, 4, 4, 512, 8), (3, 5, 7, 12, 3), (1, 1, 6, 8, 2)]:
        got = call(fn, B, L, S, d_model, h, what="layer_shapes")
        if not isinstance(got, dict):
            raise Mistake(f"layer_shapes 应该返回一个 dict（键是 {SHAPE_KEYS}），却返回了 {type(got).__name__}")
        want = reference_shapes(B, L, S, d_model, h)
        missing = [k for k in SHAPE_KEYS if k not in got]
        if missing:
            raise Mistake(f"返回的 dict 缺少这些键：{missing}")
        for key in SHAPE_KEYS:
            value = got[key]
            if is_stub(value):
                raise NotDone()
            try:
                value = tuple(value)
            except TypeError:
                raise Mistake(f"{key} 应该是一个形状 tuple，却是 {value!r}") from None
            if value != want[key]:
                hint = ""
                if key == "scores" and value == (B, h, L, L) and L != S:
                    hint = "。提示：scores 的最后一维是 Key 的长度 S，不是 Query 的长度 L（交叉注意力里两者不同）"
                elif key == "split_q" and value == (B, L, h, d_model // h):
                    hint = "。提示：view 之后还要 transpose(1, 2)，把头的轴放到 token 轴前面"
                elif key in ("heads", "split_q") and value[-1] == d_model:
                    hint = "。提示：每个头只有 d_k = d_model / h 维"
                raise Mistake(f"(B, L, S, d_model, h) = {(B, L, S, d_model, h)} 时，{key} 应该是 {want[key]}，你写的是 {value}{hint}")


def _copy_reference(d_model, h, bias=True):
    torch.manual_seed(d_model * 31 + h)
    reference = nn.MultiheadAttention(d_model, h, bias=bias, batch_first=True, dtype=torch.float64).eval()
    if bias:
        with torch.no_grad():
            reference.in_proj_bias.normal_()
            reference.out_proj.bias.normal_()
    return reference


@checker("ch08", "8.2", "把 nn.MultiheadAttention 的权重装进 W_q, W_k, W_v, W_o")
def check_load_from_torch(fn):
    for d_model, h, bias in [(8, 2, True), (12, 3, True), (8, 4, False)]:
        reference = _copy_reference(d_model, h, bias)
        ours = MultiHeadAttention(d_model, h, dropout=0.0, bias=bias).double().eval()
        with torch.no_grad():
            for p in ours.parameters():
                p.zero_()
        with torch.no_grad():
            call(fn, ours, reference, what="load_from_torch")
        x = torch.randn(2, 5, d_model, dtype=torch.float64)
        want = reference(x, x, x)[0]
        got = ours(x, x, x)
        if torch.allclose(got, want, atol=1e-10):
            continue
        d = d_model
        w = reference.in_proj_weight
        if all((getattr(ours, n).weight == 0).all() for n in ("W_q", "W_k", "W_v", "W_o")):
            raise Mistake("W_q, W_k, W_v, W_o 的权重全是 0：你的函数没有把权重复制进去（用 .copy_()，在 torch.no_grad() 里）")
        if torch.equal(ours.W_q.weight, w[:d].T):
            raise Mistake("W_q.weight 被转置了：nn.Linear 的 weight 形状是 (out, in)，in_proj_weight 的每一块也是 (out, in)，直接复制，不要 .T")
        if not torch.equal(ours.W_q.weight, w[:d]) and torch.equal(ours.W_q.weight, w[d:2 * d]):
            raise Mistake("Q、K、V 的顺序弄错了：in_proj_weight 按 Q、K、V 的顺序把三块 (d_model, d_model) 叠在一起")
        if bias and torch.equal(ours.W_q.weight, w[:d]) and (ours.W_q.bias == 0).all():
            raise Mistake("忘了复制偏置：in_proj_bias 也按 Q、K、V 切成三段，out_proj.bias 给 W_o")
        if torch.equal(ours.W_v.weight, w[2 * d:]) and not torch.equal(ours.W_o.weight, reference.out_proj.weight):
            raise Mistake("W_o 没有装对：它来自 reference.out_proj.weight（和 out_proj.bias）")
        raise Mistake(f"复制后输出和 nn.MultiheadAttention 不一致（d_model={d_model}, h={h}, bias={bias}），"
                      f"最大误差 {(got - want).abs().max().item():.3g}")


def _variant(layer, q, k, v, mask, *, scale=True, softmax_dim=-1, split_ok=True, merge_ok=True,
             use_wo=True, invert_mask=False):
    """The full forward pass with one deliberate mistake switched on (for diagnosing)."""
    B, L, d = q.shape
    S = k.shape[1]
    h = layer.n_heads
    d_k = d // h

    def split(x, n):
        if split_ok:
            return x.view(B, n, h, d_k).transpose(1, 2)  # (B, h, n, d_k)
        return x.reshape(B, h, n, d_k)  # the bug: no transpose

    qh, kh, vh = split(layer.W_q(q), L), split(layer.W_k(k), S), split(layer.W_v(v), S)
    scores = qh @ kh.transpose(-2, -1)
    if scale:
        scores = scores / math.sqrt(d_k)
    if mask is not None:
        keep = ~mask if invert_mask else mask
        scores = scores.masked_fill(~keep, -1e9)
    weights = torch.softmax(scores, dim=softmax_dim)
    heads = weights @ vh  # (B, h, L, d_k)
    concat = heads.transpose(1, 2).reshape(B, L, d) if merge_ok else heads.reshape(B, L, d)
    return layer.W_o(concat) if use_wo else concat


MISTAKES = [
    (dict(scale=False), "忘了除以 √d_k：scores = Q Kᵀ / √d_k"),
    (dict(softmax_dim=-2), "softmax 的轴错了：要在最后一维（Key 的轴，dim=-1）上做 softmax，让每个 Query 的权重加起来是 1"),
    (dict(split_ok=False), "分头时直接 view/reshape 成 (B, h, L, d_k) 而没有先 view 成 (B, L, h, d_k) 再 transpose(1, 2)，不同 token 的数被混在一起了"),
    (dict(merge_ok=False), "Concat 时没有先 transpose(1, 2) 回 (B, L, h, d_k) 就 view 成 (B, L, d_model)，各个头的结果拼错了位置"),
    (dict(use_wo=False), "忘了最后的 Linear W^O：Concat 之后还要经过 self.W_o"),
    (dict(invert_mask=True), "掩码的方向反了：mask 为 1/True 的位置可以看，为 0/False 的位置才要填 -1e9（masked_fill(mask == 0, -1e9)）"),
]


@checker("ch08", "8.3", "亲手组装 MultiHeadAttention")
def check_my_multihead_attention(cls):
    if is_stub(cls):
        raise NotDone()
    if not isinstance(cls, type):
        raise Mistake(f"请把类本身（例如 MyMultiHeadAttention）交给检查函数，而不是 {type(cls).__name__}")
    cases = [(8, 2, 2, 5, 5, "self"), (12, 3, 3, 4, 6, "cross"), (16, 4, 1, 6, 6, "causal"), (8, 2, 2, 3, 5, "padding")]
    for d_model, h, B, L, S, kind in cases:
        student = call(cls, d_model, h, what=f"{cls.__name__}(d_model={d_model}, n_heads={h})")
        for name in ("W_q", "W_k", "W_v", "W_o"):
            if not isinstance(getattr(student, name, None), nn.Linear):
                raise Mistake(f"{cls.__name__} 需要一个名为 {name} 的 nn.Linear 属性（d_model → d_model）")
            if getattr(student, name).weight.shape != (d_model, d_model):
                raise Mistake(f"{name}.weight 的形状应该是 {(d_model, d_model)}，实际是 {tuple(getattr(student, name).weight.shape)}")
        reference = MultiHeadAttention.from_torch(_copy_reference(d_model, h))
        student = student.double()
        student.eval()
        with torch.no_grad():
            for name in ("W_q", "W_k", "W_v", "W_o"):
                getattr(student, name).weight.copy_(getattr(reference, name).weight)
                getattr(student, name).bias.copy_(getattr(reference, name).bias)
        q = torch.randn(B, L, d_model, dtype=torch.float64)
        kv = q if kind in ("self", "causal") else torch.randn(B, S, d_model, dtype=torch.float64)
        mask = None
        if kind == "causal":
            mask = causal_mask(L)
        elif kind == "padding":
            mask = padding_mask_from_lengths([S, 2], S)
        q_copy = q.clone()
        with torch.no_grad():
            out = call(student, q, kv, kv, mask, what=f"{cls.__name__}.forward")
            if isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], torch.Tensor):
                if out[0].shape == (B, h, L, S) or out[1].shape != (B, h, L, S):
                    raise Mistake("forward 返回了 (weights, ...)：应该只返回输出张量 (B, L, d_model)")
                raise Mistake("forward 应该只返回输出张量 (B, L, d_model)，不要返回 (output, weights) 元组")
            out = expect_tensor(out, "forward 的返回值")
            if not torch.equal(q, q_copy):
                raise Mistake("forward 修改了输入张量（原地操作，例如 Q += ... 或 masked_fill_）；请不要改动传进来的张量")
            if out.shape == (B, h, L, S):
                raise Mistake(f"forward 返回的是注意力权重 (B, h, L, S) = {(B, h, L, S)}，应该返回输出 (B, L, d_model)")
            want = reference(q, kv, kv, mask=mask)
            if out.shape == want.shape and torch.allclose(out, want, atol=1e-8):
                continue
            for switches, message in MISTAKES:
                variant = _variant(reference, q, kv, kv, mask, **switches)
                if variant.shape == out.shape and torch.allclose(out, variant, atol=1e-8):
                    raise Mistake(f"{message}（{kind} 情形：d_model={d_model}, h={h}, L={L}, S={S}）")
            expect_close(out, want, f"{kind} 情形（d_model={d_model}, h={h}, L={L}, S={S}）的输出",
                         hint="逐步对照 mha.MultiHeadAttention.forward：投影 → 分头 → 注意力 → Concat → W^O", atol=1e-8)
    torch_ref = _copy_reference(8, 2)
    student = call(cls, 8, 2, what=cls.__name__).double().eval()
    with torch.no_grad():
        ours = MultiHeadAttention.from_torch(torch_ref)
        for name in ("W_q", "W_k", "W_v", "W_o"):
            getattr(student, name).weight.copy_(getattr(ours, name).weight)
            getattr(student, name).bias.copy_(getattr(ours, name).bias)
        x = torch.randn(2, 3, 8, dtype=torch.float64)
        expect_close(student(x, x, x), torch_ref(x, x, x)[0], "和 nn.MultiheadAttention 的比较", atol=1e-8)
