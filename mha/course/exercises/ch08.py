"""Checkers for chapter 8, the full layer.

* 8.1 predict what holds after one Linear's weight is set to 0 (uniform weights, equal rows, bias only);
* 8.2 copy the weights of an ``nn.MultiheadAttention`` into ``mha.MultiHeadAttention``;
* 8.3 assemble a whole ``MultiHeadAttention`` from torch basics; a query that sees no key gets zero weights;
  ``need_weights=True`` also returns the per-head weights (B, h, L, S) that the output used.
"""
from __future__ import annotations

import functools
import inspect
import math

import torch
from torch import nn

from mha.interop import from_torch, to_torch
from mha.layer import MultiHeadAttention
from mha.masks import causal_mask, padding_mask_from_lengths
from mha.steps import attention_scores, merge_heads, project, attention, split_heads
from .answers import as_int, as_number, expect_close, expect_tensor, name_the_match, same
from .ch07 import biased_layer
from .guard import SDPA
from .records import as_names, attend, dict_answer, expect_same_gradients
from .running import call
from .verdicts import checker, Mistake

__all__ = ["check_zeroed_weight", "check_load_from_torch", "check_my_multihead_attention", "check_scale_bug"]

LINEARS = ("W_q", "W_k", "W_v", "W_o")
# what 8.3's layer must not call: the course's layer and steps, PyTorch's layer and fused kernels
LAYER_SHORTCUTS = (SDPA, nn.MultiheadAttention, MultiHeadAttention, attention, split_heads, merge_heads,
                   attention_scores, project)


# ---------------------------------------------------------------- 8.1 (predict an ablation: one Linear's weight set to 0)
PROPERTIES = {
    "rows_equal": "一句话的 L 个输出行全都相同",
    "uniform": "每个注意力权重都等于 1/S",
    "bias_only": "输出的每一行都等于 W_o.bias",
}
ABLATION_WHY = {  # (Linear, property, said it holds) -> why that is wrong
    ("W_q", "uniform", True): "Q′ 不是 0：偏置还在，每个 token 的 query 都是同一个 b^Q。分数 b^Q·k_s 随 key 变，权重不均匀；"
                              "但每一行都一样",
    ("W_q", "rows_equal", False): "每个 token 的 query 都变成了同一个 b^Q：每一行的权重一样，输出行也就全一样",
    ("W_k", "uniform", False): "每个 key 都变成了同一个 b^K：同一行的分数全相等，softmax 之后是均匀的 1/S",
    ("W_k", "rows_equal", False): "权重是均匀的，每个 query 都得到 V′ 的同一个平均，输出行全一样",
    ("W_v", "bias_only", True): "V′ = b^V 不是 0：每个头的输出是 b^V_i（权重加起来是 1），再乘 W^O，输出是 b^V W^O + b^O",
    ("W_v", "rows_equal", False): "每个 value 都是 b^V，无论权重怎么分，加权平均都是 b^V：输出行全一样",
    ("W_o", "bias_only", False): "W_o 的 weight 为 0：Concat 乘上 0，输出只剩 b^O",
    ("W_o", "uniform", True): "W_o 在注意力之后：注意力权重完全不受影响",
}
ABLATION = {"d_model": 8, "n_heads": 2, "B": 2, "L": 5}


@functools.lru_cache(maxsize=None)
def ablation_truth(name: str, causal: bool = False) -> frozenset:
    """Which :data:`PROPERTIES` hold for self-attention after ``layer.<name>.weight`` is set to 0 (biases kept), measured;
    ``causal``: with a causal mask (the self-check's sibling case)."""
    q = ABLATION
    with torch.random.fork_rng():
        layer = biased_layer(q["d_model"], q["n_heads"], seed=8)
        with torch.no_grad():
            getattr(layer, name).weight.zero_()
            x = torch.randn(q["B"], q["L"], q["d_model"])
            out, weights = layer(x, x, x, causal_mask(q["L"]) if causal else None, need_weights=True)
    close = functools.partial(torch.allclose, atol=1e-5)
    holds = {"rows_equal": close(out, out[:, :1].expand_as(out)),
             "uniform": close(weights, torch.full_like(weights, 1 / q["L"])),
             "bias_only": close(out, layer.W_o.bias.expand_as(out))}
    return frozenset(k for k, v in holds.items() if v)


@checker("ch08", "8.1", "预测：把一个 Linear 的 weight 置 0 之后")
def check_zeroed_weight(answer):
    """``answer = {"W_q": [...], "W_k": [...], "W_v": [...], "W_o": [...]}``: for each Linear, the names of the
    :data:`PROPERTIES` that hold in self-attention when that Linear's weight alone is 0 (its bias kept)."""
    dict_answer(answer, LINEARS, '{"W_q": [...], "W_k": [...], "W_v": [...], "W_o": [...]}')
    for name in LINEARS:
        said, truth = as_names(answer[name], PROPERTIES, f'answer["{name}"]'), ablation_truth(name)
        for prop in sorted(said ^ truth):
            held = prop in said
            why = ABLATION_WHY.get((name, prop, held), "想一想这个 Linear 的输出变成了什么：weight 为 0，只剩偏置")
            raise Mistake(f'answer["{name}"]：“{PROPERTIES[prop]}”{"其实不成立" if held else "其实成立"}。{why}')


# ---------------------------------------------------------------- 8.2
def _torch_reference(d_model, h, bias=True):
    """A float64 ``nn.MultiheadAttention`` with random weights (and large random biases)."""
    torch.manual_seed(d_model * 31 + h)
    reference = nn.MultiheadAttention(d_model, h, bias=bias, batch_first=True, dtype=torch.float64).eval()
    if bias:
        with torch.no_grad():
            reference.in_proj_bias.normal_()
            reference.out_proj.bias.normal_()
    return reference


def _linears_intact(ours, before, reference, d_model, bias, dtype):
    """After the student's function, ``ours`` must hold the very same four Linears and Parameters it had
    (``before``: name -> (Linear, weight, bias)), filled with copies: no memory shared with ``reference``."""
    theirs = {p.untyped_storage().data_ptr() for p in reference.parameters()}
    for name in LINEARS:
        linear = getattr(ours, name, None)
        if not isinstance(linear, nn.Linear):
            raise Mistake(f"你的函数把 ours.{name} 换成了 {type(linear).__name__}：只要把权重复制进原来的 nn.Linear")
        if linear is reference.out_proj or any(linear is m for m in reference.modules()):
            raise Mistake(f"ours.{name} 就是 reference 里的那个模块（共用一个对象）：训练一个会改动另一个；"
                          f"把数用 .copy_() 复制进 ours 原来的 {name}")
        old_linear, old_weight, old_bias = before[name]
        if linear is not old_linear:
            raise Mistake(f"ours.{name} 换成了一个新的 nn.Linear：题目要把数复制进原来的 Linear（同一个对象），"
                          "否则别处拿着旧 Linear（优化器、钩子）的代码就接不上了；用 ours.{name}.weight.copy_(...)")
        if linear.weight is not old_weight or (bias and linear.bias is not old_bias):
            raise Mistake(f"ours.{name} 的 weight/bias 换成了新的 Parameter：要用 .copy_() 把数复制进原来的 Parameter，"
                          "优化器记住的是原来那个对象")
        if tuple(linear.weight.shape) != (d_model, d_model) or linear.weight.dtype != dtype:
            raise Mistake(f"ours.{name}.weight 变成了形状 {tuple(linear.weight.shape)}、dtype {linear.weight.dtype}；"
                          f"应该保持 {(d_model, d_model)}、{dtype}：用 .copy_() 把数复制进去，不要换掉张量")
        if bias and linear.bias is None:
            raise Mistake(f"ours.{name}.bias 变成了 None：reference 有偏置时，要把它复制进 ours.{name}.bias")
        for p in linear.parameters():
            if p.untyped_storage().data_ptr() in theirs:
                raise Mistake(f"ours.{name} 的参数和 reference 共用同一块内存（.data = 或 .set_() 指向了 reference 的张量）："
                              "改一个另一个也变；用 .copy_() 复制数值")


@checker("ch08", "8.2", "把 nn.MultiheadAttention 的权重装进 W_q, W_k, W_v, W_o")
def check_load_from_torch(fn):
    """``fn(ours, reference)`` copies ``reference``'s weights into ``ours`` (in place); ``reference`` must not change."""
    for d_model, h, bias in [(8, 2, True), (12, 3, True), (8, 4, False)]:
        reference = _torch_reference(d_model, h, bias)
        ours = MultiHeadAttention(d_model, h, dropout=0.0, bias=bias).double().eval()
        with torch.no_grad():
            for p in ours.parameters():
                p.zero_()
            before = {n: (getattr(ours, n), getattr(ours, n).weight, getattr(ours, n).bias) for n in LINEARS}
            returned = call(fn, ours, reference, what="load_from_torch", forbid=(from_torch, to_torch), may_modify=(0,),
                            may_return_none=True, shortcut_hint="请自己从 in_proj_weight、out_proj 里逐块复制权重")
        _linears_intact(ours, before, reference, d_model, bias, torch.float64)
        x = torch.randn(2, 5, d_model, dtype=torch.float64)
        with torch.no_grad():
            want = reference(x, x, x)[0]
            got = ours(x, x, x)
        if torch.allclose(got, want, atol=1e-10, rtol=0):  # the chapter promises 1e-10: no relative slack
            continue
        d = d_model
        w = reference.in_proj_weight.detach()
        loaded = {name: getattr(ours, name).weight.detach() for name in LINEARS}
        if all((loaded[name] == 0).all() for name in LINEARS):
            if isinstance(returned, nn.Module):
                raise Mistake("ours 的权重还全是 0：你的函数返回了一个新的层，却没有改动 ours；"
                              "要把权重原地复制进 ours.W_q 等（用 .copy_()）")
            raise Mistake("W_q, W_k, W_v, W_o 的权重全是 0：你的函数没有把权重复制进去（用 .copy_()，在 torch.no_grad() 里）")
        if torch.equal(loaded["W_q"], w[:d].T):
            raise Mistake("W_q.weight 被转置了：nn.Linear 的 weight 形状是 (out, in)，in_proj_weight 的每一块也是 (out, in)，直接复制，不要 .T")
        if not torch.equal(loaded["W_q"], w[:d]) and torch.equal(loaded["W_q"], w[d:2 * d]):
            raise Mistake("Q、K、V 的顺序弄错了：in_proj_weight 按 Q、K、V 的顺序把三块 (d_model, d_model) 叠在一起")
        if torch.equal(loaded["W_k"], w[2 * d:]) and torch.equal(loaded["W_v"], w[d:2 * d]):
            raise Mistake("K 和 V 两块装反了：W_k 拿到了 in_proj_weight 的第三块、W_v 拿到了第二块。"
                          "in_proj_weight 的顺序是 Q、K、V：第 [d, 2d) 行给 W_k，第 [2d, 3d) 行给 W_v（偏置也一样）")
        if bias and torch.equal(loaded["W_q"], w[:d]) and (ours.W_q.bias == 0).all():
            raise Mistake("忘了复制偏置：in_proj_bias 也按 Q、K、V 切成三段，out_proj.bias 给 W_o")
        if torch.equal(loaded["W_v"], w[2 * d:]) and not torch.equal(loaded["W_o"], reference.out_proj.weight):
            raise Mistake("W_o 没有装对：它来自 reference.out_proj.weight（和 out_proj.bias）")
        if bias and torch.equal(loaded["W_o"], reference.out_proj.weight) and \
                not torch.equal(ours.W_o.bias.detach(), reference.out_proj.bias.detach()):
            raise Mistake("W_o 的偏置没有复制：W_o.bias 来自 reference.out_proj.bias")
        loaded_all = torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]).detach()
        if torch.equal(loaded_all, w.float().double()) and not torch.equal(loaded_all, w):
            raise Mistake("权重经过了 float32：复制时用了 .float()（或 torch.tensor 默认的 float32），精度只剩约 1e-7，"
                          "本章承诺的是 1e-10；直接 .copy_() float64 的张量")
        raise Mistake(f"复制后输出和 nn.MultiheadAttention 不一致（d_model={d_model}, h={h}, bias={bias}），"
                      f"最大误差 {(got - want).abs().max().item():.3g}")


# ---------------------------------------------------------------- 8.3
def _variant(layer, q, k, v, mask, *, split_ok=True, merge_ok=True, use_wo=True, sqrt_d_model=False, swap_kv=False,
             weights_too=False, **mistake):
    """The full forward pass with one deliberate mistake switched on (for diagnosing): the layer's own here, the
    attention's passed on to :func:`records.attend`. ``weights_too``: return ``(output, weights)``."""
    B, L, d = q.shape
    h = layer.n_heads

    def split(x):  # (B, h, n, d_k); the bug: straight to that shape, without the transpose
        return split_heads(x, h) if split_ok else x.reshape(B, h, x.shape[1], d // h)

    qh, kh, vh = split(layer.W_q(q)), split(layer.W_k(k)), split(layer.W_v(v))
    if swap_kv:  # the projected keys used as values and the values as keys
        kh, vh = vh, kh
    scale = math.sqrt(d) if sqrt_d_model else mistake.pop("scale", None)
    heads, weights = attend(qh, kh, vh, mask, scale=scale, **mistake)
    concat = merge_heads(heads) if merge_ok else heads.reshape(B, L, d)
    out = layer.W_o(concat) if use_wo else concat
    return (out, weights) if weights_too else out


AFTER_ONLY = ("在 softmax 之后才挡、没有重新归一化：被挡住的 key 已经在分母里分走了概率，每行权重之和 < 1。"
              "要在 softmax 之前把被挡住的分数填成很小的数；softmax 之后的置 0 只管一个 key 也看不到的 query")
MISTAKES = [
    (dict(scale=1.0), "忘了除以 √d_k：scores = Q Kᵀ / √d_k"),
    (dict(dim=-2), "softmax 的轴错了：要在最后一维（Key 的轴，dim=-1）上做 softmax，让每个 Query 的权重加起来是 1"),
    (dict(split_ok=False), "分头时直接 view/reshape 成 (B, h, L, d_k) 而没有先 view 成 (B, L, h, d_k) 再 transpose(1, 2)，不同 token 的数被混在一起了"),
    (dict(merge_ok=False), "Concat 时没有先 transpose(1, 2) 回 (B, L, h, d_k) 就 view 成 (B, L, d_model)，各个头的结果拼错了位置"),
    (dict(use_wo=False), "忘了最后的 Linear W^O：Concat 之后还要经过 self.W_o"),
    (dict(invert=True), "掩码的方向反了：mask 为 1/True 的位置可以看，为 0/False 的位置才要填 -1e9（masked_fill(mask == 0, -1e9)）"),
    (dict(use_mask=False), "传进来的 mask 没有用上：在 softmax 之前 scores.masked_fill(mask == 0, -1e9)"),
    (dict(sqrt_d_model=True), "缩放用了 √d_model：每个头的点积只有 d_k = d_model / h 项，应该除以 √d_k"),
    (dict(swap_kv=True), "K 和 V 的角色用反了：scores 用投影后的 K（self.W_k(K)）算，加权求和的是投影后的 V（self.W_v(V)）"),
    (dict(fill=False), AFTER_ONLY),
]

# (kind, d_model, h, B, L, S): self-attention without a mask argument, cross-attention (L != S) with mask=None,
# a causal (L, S) bool mask, a padding (B, 1, 1, S) bool mask, a 0/1 integer (B, 1, L, S) mask, and a
# (B, 1, L, S) mask in which some queries see no key at all (left padding and causal): the lecture's -1e9 gives
# them 1/S everywhere, the layer must give them zero weights (output = b^O).
CASES = [("self", 8, 2, 2, 5, 5), ("cross", 12, 3, 3, 4, 6), ("causal", 16, 4, 1, 6, 6),
         ("padding", 8, 2, 2, 3, 5), ("0/1", 8, 2, 2, 4, 6), ("blocked", 8, 2, 2, 4, 5)]
BLOCKED_WHAT = "整行被挡住"


def _mask(kind, B, L, S):
    if kind == "causal":
        return causal_mask(L)  # (L, S) bool
    if kind == "padding":
        return padding_mask_from_lengths([S, 2], S)  # (B, 1, 1, S) bool
    if kind == "0/1":
        keep = causal_mask(L, S) & padding_mask_from_lengths([S, S - 2], S)  # (B, 1, L, S); every row sees a key
        return keep.long()
    if kind == "blocked":  # sentence 1 padded on the left: its first two queries see no key
        keep = causal_mask(L, S) & torch.tensor([[True] * S, [False, False] + [True] * (S - 2)])[:, None, None, :]
        keep[0, 0, 1] = False  # and in sentence 0 one query sees nothing either
        return keep  # (B, 1, L, S)
    return None


def _ready_made(base) -> str | None:
    """The name of a ready-made attention class (any class of ``mha``, or ``nn.MultiheadAttention``), else None."""
    if base is nn.MultiheadAttention:
        return "nn.MultiheadAttention"
    module = getattr(base, "__module__", "") or ""
    if (module == "mha" or module.startswith("mha.")) and not module.startswith("mha.course.exercises"):
        return f"mha.{base.__name__}"
    return None


def _reject_ready_made(cls) -> None:
    """The class handed in must not be, nor inherit from, a ready-made layer."""
    for base in cls.__mro__:
        name = _ready_made(base)
        if name is not None:
            how = "就是" if base is cls else "继承了"
            raise Mistake(f"这道题要你自己实现，不能直接用现成的 {name}（你交上来的类{how}它）；"
                          "请从 nn.Module 继承，只用 torch 的基本运算（view、transpose、@、softmax、masked_fill……）写出来")
    if not issubclass(cls, nn.Module):
        raise Mistake(f"{cls.__name__} 应该继承 nn.Module：class {cls.__name__}(nn.Module): ...，"
                      "并在 __init__ 里先调用 super().__init__()")


def _build(cls, d_model, h) -> nn.Module:
    """Construct the student's layer (no shortcuts) and check its four Linears."""
    try:
        layer = call(cls, d_model, h, what=f"{cls.__name__}(d_model={d_model}, n_heads={h})", forbid=LAYER_SHORTCUTS)
    except Mistake as m:
        if "before Module.__init__() call" in str(m):
            raise Mistake(f"{m}。提示：__init__ 的第一行要写 super().__init__()，之后才能给 self 挂 nn.Linear") from None
        raise
    if not isinstance(layer, nn.Module):  # e.g. __new__ returned something else
        raise Mistake(f"{cls.__name__}(d_model, n_heads) 应该得到一个 nn.Module，却得到了 {type(layer).__name__}")
    dtypes = set()
    for name in LINEARS:
        linear = getattr(layer, name, None)
        if not isinstance(linear, nn.Linear):
            raise Mistake(f"{cls.__name__} 需要一个名为 {name} 的 nn.Linear 属性（d_model → d_model），"
                          f"实际是 {type(linear).__name__}")
        if tuple(linear.weight.shape) != (d_model, d_model):
            raise Mistake(f"{name}.weight 的形状应该是 {(d_model, d_model)}，实际是 {tuple(linear.weight.shape)}"
                          f"（{name} 应该是 nn.Linear(d_model, d_model)）")
        if linear.bias is None:
            raise Mistake(f"{name} 没有偏置（bias=False）：题目要的是 nn.Linear(d_model, d_model)，默认带偏置；"
                          "讲义的层和 nn.MultiheadAttention 的四个 Linear 都有偏置，检查会把同一组偏置装进你的层")
        dtypes.add(linear.weight.dtype)
    if len(dtypes) > 1 or not dtypes <= {torch.float32, torch.float64}:
        raise Mistake(f"W_q, W_k, W_v, W_o 的 dtype 应该都是 float32（nn.Linear 的默认），实际是 {sorted(map(str, dtypes))}")
    _check_forward_signature(layer, cls, [
        ((1, 2, 3, 4), "forward 要接受 4 个参数 forward(Q, K, V, mask=None)：检查会把掩码作为第 4 个参数传进去"),
        ((1, 2, 3), "forward 的 mask 要有默认值 None：forward(Q, K, V, mask=None)，不传 mask 就是不加掩码")])
    return layer.eval()  # no dropout while comparing


def _check_forward_signature(layer, cls, calls, **kwargs) -> None:
    """``layer.forward`` must accept each of ``calls`` ``[(positional arguments, why not)]`` (and ``kwargs``)."""
    try:
        signature = inspect.signature(layer.forward)
    except (TypeError, ValueError):
        return
    for args, message in calls:
        try:
            signature.bind(*args, **kwargs)
        except TypeError:
            raise Mistake(f"{cls.__name__}.{message}") from None


def _pair(cls, d_model, h):
    """The student's layer and the answer key (float64) holding the same weights, and the student's dtype."""
    student, reference = _build(cls, d_model, h), from_torch(_torch_reference(d_model, h))
    with torch.no_grad():
        for name in LINEARS:
            getattr(student, name).weight.copy_(getattr(reference, name).weight)
            getattr(student, name).bias.copy_(getattr(reference, name).bias)
    return student, reference, student.W_q.weight.dtype


def _forward(student, cls, args, shape, nan_why: str | None = None) -> torch.Tensor:
    """Run the student's forward (no shortcuts, inputs unchanged) and check what comes back;
    ``nan_why`` names a NaN in the output (a case whose mask blocks whole rows)."""
    B, h, L, S, d_model = shape
    out = call(student.forward, *args, what=f"{cls.__name__}.forward", forbid=LAYER_SHORTCUTS)
    if nan_why and isinstance(out, torch.Tensor) and out.is_floating_point() and torch.isnan(out).any():
        raise Mistake(nan_why)
    if isinstance(out, tuple) and out and isinstance(out[0], torch.Tensor):
        if len(out) == 2 and isinstance(out[1], torch.Tensor) and out[0].shape == (B, h, L, S):
            raise Mistake("forward 返回了 (weights, ...)：need_weights=False（默认）时只返回输出张量 (B, L, d_model)")
        raise Mistake("need_weights=False（默认）时 forward 只返回输出张量 (B, L, d_model)，"
                      "(output, weights) 元组只在 need_weights=True 时返回")
    out = expect_tensor(out, "forward 的返回值", floating=True)
    if tuple(out.shape) == (B, h, L, S):
        raise Mistake(f"forward 返回的是注意力权重 (B, h, L, S) = {(B, h, L, S)}，应该返回输出 (B, L, d_model)")
    return out


def _check_case(cls, kind, d_model, h, B, L, S, mask) -> None:
    student, reference, dtype = _pair(cls, d_model, h)
    q = torch.randn(B, L, d_model, dtype=torch.float64)
    # self-attention: Q = K = V; every other case: three distinct tensors, so that K and V cannot be swapped unseen
    k, v = (q, q) if kind in ("self", "causal") else (torch.randn(B, S, d_model, dtype=torch.float64) for _ in "kv")
    with torch.no_grad():
        want = reference(q, k, v, mask=mask)
    q_in = q.to(dtype)
    k_in, v_in = (q_in, q_in) if k is q else (k.to(dtype), v.to(dtype))
    args = (q_in, k_in, v_in) if kind == "self" else (q_in, k_in, v_in, mask)
    out = _forward(student, cls, args, (B, h, L, S, d_model), nan_why=BLOCKED_NAN if kind == "blocked" else None)
    where = f"{kind} 情形：d_model={d_model}, h={h}, L={L}, S={S}"
    if same(out, want):
        return
    if kind == "blocked":
        _name_blocked_rows(out, want, reference, q, k, v, mask)
    if k is not q:
        with torch.no_grad():
            if same(out, reference(q, v, k, mask=mask)):
                raise Mistake(f"K 和 V 用反了：键来自 self.W_k(K)，值来自 self.W_v(V)（{where}；这里 K 和 V 是两个不同的张量）")
    with torch.no_grad():
        name_the_match(out, ((_variant(reference, q, k, v, mask, zero=zero, **switches), why)
                             for switches, why in MISTAKES for zero in (False, True)),
                       suffix=f"（{where}）", same=same)
    expect_close(out, want, f"{kind} 情形（d_model={d_model}, h={h}, L={L}, S={S}）的输出",
                 hint="逐步对照 mha.MultiHeadAttention.forward：投影 → 分头 → 注意力 → Concat → W^O")


def _blocked_rows(n: int) -> str:
    return f"这里有 {n} 个 query 一个 key 也看不到（掩码里它那一行全是 False，例如左侧补齐的 PAD 加上因果掩码）"


BLOCKED_NAN = (f"{BLOCKED_WHAT}的 query 输出了 NaN：{_blocked_rows(2)}。用 -inf 填分数时 softmax 算的是 0/0；"
               "用一个有限的很小的数填分数，softmax 之后再把被挡住的权重置为 0")


def _name_blocked_rows(out, want, reference, q, k, v, mask) -> None:
    """The rows of queries that see no key: NaN (-inf), 1/S everywhere (the lecture's -1e9), or something else."""
    blocked = ~mask.expand(q.shape[0], 1, q.shape[1], k.shape[1]).any(dim=-1)[:, 0]  # (B, L)
    got = out.detach().double()
    rows = _blocked_rows(int(blocked.sum()))
    real = ~blocked
    if not torch.allclose(got[real], want[real], atol=1e-4, rtol=1e-3):
        return  # the other rows are wrong too: the general diagnosis below names it
    with torch.no_grad():
        lecture = _variant(reference, q, k, v, mask)  # masked_fill(mask == 0, -1e9), nothing else
    if same(out, lecture):
        raise Mistake(f"{BLOCKED_WHAT}的 query 得到了均匀的 1/S 权重（《原理图（下）》的 masked_fill(mask == 0, -1e9) 就是这样）：{rows}；"
                      "它的权重应该全是 0，输出只剩 W_o 的偏置 b^O。softmax 之后再把被挡住的权重置 0（练习 5.3）")
    raise Mistake(f"{BLOCKED_WHAT}的 query 不对：{rows}；它的权重应该全是 0，输出只剩 W_o 的偏置 b^O，"
                  "其余的行已经对了")


WEIGHT_CASES = ("cross", "causal", "padding", "blocked")  # the weights of these cases are compared too


def _check_weights(cls, kind, d_model, h, B, L, S, mask) -> None:
    """``forward(Q, K, V, mask, need_weights=True)`` -> ``(output, weights)``, weights (B, h, L, S): the ones the
    output used (a query that sees no key: all 0), one set per head."""
    student, reference, dtype = _pair(cls, d_model, h)
    _check_forward_signature(student, cls, [((1, 2, 3, None), "forward 还要接受参数 need_weights=False：forward(Q, K, V, "
                                              "mask=None, need_weights=False)；need_weights=True 时返回 (输出, 每个头的权重)")],
                             need_weights=True)
    q, k, v = (torch.randn(B, n, d_model, dtype=torch.float64) for n in (L, S, S))
    with torch.no_grad():
        want, want_w = reference(q, k, v, mask=mask, need_weights=True)
    where = f"（{kind} 情形：d_model={d_model}, h={h}, L={L}, S={S}）"
    got = call(student.forward, q.to(dtype), k.to(dtype), v.to(dtype), mask, need_weights=True,
               what=f"{cls.__name__}.forward(..., need_weights=True)", forbid=LAYER_SHORTCUTS)
    if not (isinstance(got, tuple) and len(got) == 2):
        raise Mistake(f"need_weights=True 时 forward 要返回一个元组 (output, weights)，实际返回的是 {type(got).__name__}"
                      + ("（只有输出：权重没有返回）" if isinstance(got, torch.Tensor) else ""))
    out, weights = got
    out = expect_tensor(out, "need_weights=True 时元组的第 1 项（输出）")
    weights = expect_tensor(weights, "need_weights=True 时元组的第 2 项（权重）")
    if not same(out, want):
        raise Mistake(f"need_weights=True 时的输出和 need_weights=False 时的不一样{where}：两种调用应该得到同一个输出")
    if same(weights, want_w):
        return
    if tuple(weights.shape) == (B, L, S) and same(weights, want_w.mean(dim=1)):
        raise Mistake(f"权重对各个头取了平均（nn.MultiheadAttention 默认 average_attn_weights=True 就是这样）{where}；"
                      f"这里要每个头各自的权重，形状 (B, h, L, S) = {(B, h, L, S)}")
    with torch.no_grad():
        _, lecture_w = _variant(reference, q, k, v, mask, weights_too=True)  # -1e9, nothing zeroed afterwards
        _, after_w = _variant(reference, q, k, v, mask, fill=False, weights_too=True)
        raw = split_heads(reference.W_q(q), h) @ split_heads(reference.W_k(k), h).transpose(-2, -1) / math.sqrt(d_model // h)
    name_the_match(weights, [
        (lecture_w, "返回的权重里，一个 key 也看不到的 query 是均匀的 1/S：返回的应该是输出真正用到的权重，"
                    "被挡住的那一行全是 0（置 0 之后的 weights）"),
        (after_w, AFTER_ONLY),
        (raw, "返回的是 softmax 之前的分数 QKᵀ/√d_k：要返回 softmax（和掩码）之后的权重"),
        (raw.masked_fill(mask == 0, -1e9) if mask is not None else raw,
         "返回的是 softmax 之前的分数：要返回 softmax（和掩码）之后的权重"),
    ], suffix=where, same=same)
    expect_close(weights, want_w, f"need_weights=True 时返回的权重{where}",
                 hint="返回输出真正用到的那一份 weights：softmax、把被挡住的置 0 之后，乘 V 之前")


@checker("ch08", "8.3", "亲手组装 MultiHeadAttention")
def check_my_multihead_attention(cls):
    """``cls(d_model, n_heads)`` with Linears ``W_q, W_k, W_v, W_o``; ``forward(Q, K, V, mask=None, need_weights=False)``
    -> (B, L, d_model), with ``need_weights=True`` the tuple ``(output, weights)``, weights (B, h, L, S) per head.
    A query that sees no key gets zero weights, so its output is ``W_o.bias`` (the lecture's -1e9 gives 1/S: named).
    The lecture's class plus that one fix still fails: it returns no weights (named). Forbidden:
    :data:`LAYER_SHORTCUTS`. Gradients must reach Q, K, V and the weights."""
    if not isinstance(cls, type):
        raise Mistake(f"请把类本身（例如 MyMultiHeadAttention）交给检查函数，而不是 {type(cls).__name__}")
    _reject_ready_made(cls)
    for kind, d_model, h, B, L, S in CASES:
        mask = _mask(kind, B, L, S)
        try:
            _check_case(cls, kind, d_model, h, B, L, S, mask)
        except Mistake as mistake:
            if kind != "0/1":
                raise
            try:  # right with the same mask as bool? then say what differs
                _check_case(cls, kind, d_model, h, B, L, S, mask.bool())
            except Mistake:
                raise mistake from None
            raise Mistake("mask 也可以是 0/1 的整数张量（题目说 1/True 可以看，0/False 挡住）：你的层用 bool 掩码是对的，"
                          f"用 0/1 掩码却不对（{mistake}）；用 mask == 0 找出要挡住的位置，而不是 ~mask") from None

    # Gradients: a layer that cannot train is wrong. Cross-attention with a padding mask, Q, K, V distinct.
    # The gradient values are compared with the reference's, not only their existence.
    d_model, h, B, L, S = 12, 3, 2, 3, 5
    student, reference, dtype = _pair(cls, d_model, h)
    Q, K, V = (torch.randn(B, n, d_model, dtype=torch.float64) for n in (L, S, S))
    mask = padding_mask_from_lengths([S, 2], S)
    ins = [t.to(dtype).requires_grad_() for t in (Q, K, V)]
    out = _forward(student, cls, (*ins, mask), (B, h, L, S, d_model))
    ref_ins = [t.clone().requires_grad_() for t in (Q, K, V)]
    expect_same_gradients(out, reference(*ref_ins, mask=mask),
                          {"Q": ins[0], "K": ins[1], "V": ins[2], **{f"{n}.weight": getattr(student, n).weight for n in LINEARS}},
                          ref_ins + [getattr(reference, n).weight for n in LINEARS], "forward 的输出",
                          hint="梯度的数值要和参考实现一样：前向里有没有 .detach()、原地修改或少算的一步？", atol=1e-4, rtol=1e-3)

    # need_weights=True: the per-head weights the output used (B, h, L, S)
    for kind, d_model, h, B, L, S in CASES:
        if kind in WEIGHT_CASES:
            _check_weights(cls, kind, d_model, h, B, L, S, _mask(kind, B, L, S))

    # The same weights in nn.MultiheadAttention (the notebook's final comparison).
    student, _, dtype = _pair(cls, 8, 2)
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    out = _forward(student, cls, (x.to(dtype),) * 3, (2, 2, 3, 3, 8))
    with torch.no_grad():
        want = _torch_reference(8, 2)(x, x, x)[0]
    expect_close(out, want, "和 nn.MultiheadAttention 的比较")


# ---------------------------------------------------------------- 8.4 (bug hunt: the scale uses d_model)
SCALE_QUESTION = {"d_model": 512, "n_heads": 8}


def _scores_ratio(d_model: int, n_heads: int) -> float:
    """buggy / right scaled scores, measured: the buggy layer divides Q K^T by sqrt(d_model) instead of sqrt(d_k)."""
    d_k = d_model // n_heads
    q, k = torch.randn(1, n_heads, 3, d_k, dtype=torch.float64), torch.randn(1, n_heads, 3, d_k, dtype=torch.float64)
    raw = q @ k.transpose(-2, -1)
    return float(((raw / math.sqrt(d_model)) / (raw / math.sqrt(d_k))).mean())


@checker("ch08", "8.4", "找 bug：缩放用了 √d_model")
def check_scale_bug(answer):
    """``answer = {"right_anyway_heads": int, "factor": float}``: for d_model = 512, the n_heads with which a layer
    dividing by sqrt(d_model) (instead of sqrt(d_k)) is right anyway, and by what factor its scaled scores
    differ from the right ones when n_heads = 8."""
    dict_answer(answer, ("right_anyway_heads", "factor"), '{"right_anyway_heads": 整数, "factor": 数}')
    d, h = SCALE_QUESTION["d_model"], SCALE_QUESTION["n_heads"]
    heads = as_int(answer["right_anyway_heads"], 'answer["right_anyway_heads"]')
    if heads < 1 or d % heads:
        raise Mistake(f'answer["right_anyway_heads"] = {heads}：头数要能整除 d_model = {d}')
    if abs(_scores_ratio(d, heads) - 1) > 1e-9:
        raise Mistake(f'answer["right_anyway_heads"] = {heads} 时 d_k = {d // heads} ≠ d_model，两种缩放不一样；'
                      "什么时候 d_k = d_model / n_heads 正好等于 d_model？")
    factor = as_number(answer["factor"], 'answer["factor"]')
    want = _scores_ratio(d, h)
    if abs(factor - want) <= 0.01 * want:
        return
    name_the_match(factor, [(1 / want, "反了：√d_model 比 √d_k 大，除以它得到的分数更小，是正确值的 √(d_k / d_model) 倍"),
                            (want ** 2, "是 d_k / d_model：分数除以的是平方根，倍数是 √(d_k / d_model)")],
                   prefix=f"factor = {factor:g} ", same=lambda got, wrong: abs(got - wrong) <= 0.01 * wrong)
    if abs(factor - want) <= 0.03 * want:
        raise Mistake(f"factor = {factor:g} 接近了，但差了 {abs(factor - want) / want:.1%}：多写几位小数（1% 以内算对）")
    raise Mistake(f"factor = {factor:g} 不对：buggy 的分数 = QKᵀ/√d_model，正确的 = QKᵀ/√d_k，两者相除是多少？")
