"""Checkers for chapter 01, 多头注意力是什么.

1.1 predict the output shape of a MultiHeadAttention layer (a tuple)
1.2 which output positions change when one input token changes (a dict: reasoning)
1.3 write the experiment that finds the changed positions (a function)

(Counting the layer's parameters is exercise 3.2.)
"""
from __future__ import annotations

import torch
from torch import nn

from ._core import Mistake, NotDone, call, checker, is_stub

__all__ = ["check_output_shape", "check_changed_positions", "check_changed_positions_fn"]

# ---------------------------------------------------------------- 1.1
SHAPE_QUESTION = {"B": 2, "L": 7, "d_model": 12, "n_heads": 3}


def _as_shape(answer, what: str) -> tuple:
    """Turn a tuple / list / torch.Size of ints into a tuple, or raise Mistake/NotDone."""
    if is_stub(answer):
        raise NotDone()
    if isinstance(answer, torch.Tensor):
        raise Mistake(f"{what} 要写成一个 tuple，例如 (1, 2, 3)，而不是张量；可以用 tuple(t.shape)")
    if not isinstance(answer, (tuple, list, torch.Size)):
        raise Mistake(f"{what} 要写成一个 tuple，例如 (1, 2, 3)，却收到了 {type(answer).__name__}")
    if any(isinstance(n, bool) or not isinstance(n, int) for n in answer):
        raise Mistake(f"{what} 里的每一项都要是整数，却收到了 {answer!r}")
    return tuple(answer)


@checker("ch01", "1.1", "预测多头注意力的输出形状")
def check_output_shape(answer):
    """``answer``: the shape of ``MultiHeadAttention(12, 3)(x, x, x)`` for x of shape (2, 7, 12)."""
    B, L, d_model, h = (SHAPE_QUESTION[k] for k in ("B", "L", "d_model", "n_heads"))
    d_k = d_model // h
    shape = _as_shape(answer, "你的答案")
    if shape == (B, h, L, d_k):
        raise Mistake(f"{shape} 是分头之后、Concat 之前的中间形状 (B, h, L, d_k)；"
                      "层的最后还有 Concat 和最终 Linear，会把形状还原")
    if shape == (B, L, d_k):
        raise Mistake(f"{shape} 只是一个头的宽度 d_k = {d_k}；多个头的结果 Concat 之后宽度回到 d_model = {d_model}")
    if shape in ((B, h, L, L), (B, L, L)):
        raise Mistake(f"{shape} 是注意力权重（每个 query 对每个 key 的分数）的形状，不是输出 x′ 的形状")
    if shape == (L, d_model):
        raise Mistake(f"{shape} 漏掉了 batch 维 B = {B}：输入有几句话，输出就有几句话")
    from ..layer import MultiHeadAttention

    layer = MultiHeadAttention(d_model, h).eval()  # the truth is computed, not typed in
    x = torch.randn(B, L, d_model)
    truth = tuple(layer(x, x, x).shape)
    if shape != truth:
        raise Mistake(f"你的答案 {shape} 不对。"
                      "提示：多头注意力是一种特征变换，x′ 和 x 的形状有什么关系？")


# ---------------------------------------------------------------- 1.2
POSITIONS_QUESTION = {"L": 6, "changed": 2}


def _true_changed_positions(kind: str, L: int, k: int, d_model: int = 4) -> list[int]:
    """Change token k of a random sequence and report which output positions move (computed, not assumed)."""
    from ..layer import MultiHeadAttention

    layer = nn.Linear(d_model, d_model) if kind == "linear" else MultiHeadAttention(d_model, 2).eval()
    x = torch.randn(1, L, d_model)
    x2 = x.clone()
    x2[0, k] = torch.randn(d_model)
    with torch.no_grad():
        y, y2 = (layer(t) if kind == "linear" else layer(t, t, t) for t in (x, x2))
    moved = (y2 - y).abs().amax(dim=-1)[0] > 1e-6  # (L,)
    return moved.nonzero().flatten().tolist()


def _as_positions(value, key: str, L: int) -> list[int]:
    if is_stub(value):
        raise NotDone()
    if isinstance(value, torch.Tensor):
        value = value.flatten().tolist()
    if isinstance(value, range):
        value = list(value)
    if not isinstance(value, (list, tuple, set)):
        raise Mistake(f'answer["{key}"] 应该是位置编号的列表，例如 [0, 3]，却是 {type(value).__name__}')
    if any(isinstance(p, bool) or not isinstance(p, int) for p in value):
        raise Mistake(f'answer["{key}"] 里的每一项都要是整数位置编号，却收到了 {sorted(value, key=str)!r}')
    return sorted(set(value))


@checker("ch01", "1.2", "改一个 token，哪些位置会变")
def check_changed_positions(answer):
    """``answer = {"linear": [...], "mha": [...]}``: positions (0-based) of the output that change
    when token 2 of a 6-token sequence is replaced, for a position-wise Linear and for self-attention."""
    if is_stub(answer):
        raise NotDone()
    if not isinstance(answer, dict):
        raise Mistake(f'答案应该是字典 {{"linear": [...], "mha": [...]}}，却收到了 {type(answer).__name__}')
    missing = [k for k in ("linear", "mha") if k not in answer]
    if missing:
        raise Mistake(f"字典里缺少键 {missing}；需要 \"linear\" 和 \"mha\" 两个键")
    L, k = POSITIONS_QUESTION["L"], POSITIONS_QUESTION["changed"]
    lin = _as_positions(answer["linear"], "linear", L)
    att = _as_positions(answer["mha"], "mha", L)
    every = list(range(L))
    for key, got in (("linear", lin), ("mha", att)):
        if any(p < 0 or p >= L for p in got):
            if got and all(1 <= p <= L for p in got):
                raise Mistake(f'answer["{key}"] = {got} 里有位置 {L}：位置编号从 0 开始（0 到 {L - 1}），不是从 1 开始')
            raise Mistake(f'answer["{key}"] = {got} 超出了范围：{L} 个 token 的位置是 0 到 {L - 1}')
    truth_lin = _true_changed_positions("linear", L, k)
    truth_att = _true_changed_positions("mha", L, k)
    if lin == [k + 1]:
        raise Mistake(f"被改的是第 {k} 号位置（从 0 开始数），你的答案像是从 1 开始数的")
    if lin == every:
        raise Mistake("nn.Linear 对每个位置单独做 x W^T + b，位置之间互不相干：只有被改的那个位置会变")
    if lin != truth_lin:
        raise Mistake(f'answer["linear"] = {lin} 不对。提示：Linear 逐个位置计算，位置 j 的输出只用到位置 j 的输入')
    if att == [k]:
        raise Mistake("把多头注意力当成了逐位置的 Linear：没有掩码时，每个位置的输出都要对所有 token 加权求和，"
                      "所以改一个 token，所有位置都会变")
    if att == list(range(k, L)):
        raise Mistake("这是加了因果掩码（只能看前面）才会有的结果；这里没有任何掩码，每个 query 都能看到所有 key")
    if att == [p for p in every if p != k]:
        raise Mistake("被改的那个位置自己也会变：它的 query、key、value 全都变了")
    if att != truth_att:
        raise Mistake(f'answer["mha"] = {att} 不对。提示：没有掩码时，每个位置的输出 x′ 都用到了哪些 token？')


# ---------------------------------------------------------------- 1.3
def _changed_positions_reference(f, x: torch.Tensor, k: int) -> list[int]:
    x2 = x.clone()  # never touch the caller's x
    x2[:, k] = x2[:, k] + 1.0  # change token k of every sequence
    with torch.no_grad():
        y, y2 = f(x), f(x2)  # (B, L, d_model) each
    moved = (y2 - y).abs().amax(dim=(0, 2)) > 1e-6  # (L,): did any number of position j move?
    return moved.nonzero().flatten().tolist()


def _position_functions(L: int, d_model: int):
    """Layers of different kinds; the checker knows the truth for each by running them."""
    from ..layer import MultiHeadAttention
    from ..masks import causal_mask

    linear = nn.Linear(d_model, d_model)
    attn = MultiHeadAttention(d_model, 2).eval()
    return [
        ("nn.Linear", lambda t: linear(t)),
        ("MultiHeadAttention", lambda t: attn(t, t, t)),
        ("MultiHeadAttention + causal_mask", lambda t: attn(t, t, t, causal_mask(t.shape[1]))),
        ("torch.roll(x, 1, dims=1)", lambda t: torch.roll(t, 1, dims=1)),
    ]


def _as_position_list(out, what: str) -> list[int]:
    if is_stub(out):
        raise NotDone()
    if isinstance(out, torch.Tensor):
        if out.dtype == torch.bool:
            raise Mistake(f"{what} 返回了布尔张量（每个位置变没变）；要的是发生变化的位置编号列表，"
                          "可以用 .nonzero().flatten().tolist()")
        if out.is_floating_point() or out.dim() > 1:
            raise Mistake(f"{what} 应该返回位置编号的列表，却返回了形状 {tuple(out.shape)}、dtype {out.dtype} 的张量")
        out = out.tolist()
    if isinstance(out, (range, tuple, set)):
        out = list(out)
    if not isinstance(out, list):
        raise Mistake(f"{what} 应该返回位置编号的列表，例如 [0, 3]，却返回了 {type(out).__name__}")
    if any(isinstance(p, bool) or not isinstance(p, int) for p in out):
        raise Mistake(f"{what} 返回的列表里要全是整数位置编号，却是 {out!r}")
    return out


@checker("ch01", "1.3", "写一个实验：找出输出里变化的位置")
def check_changed_positions_fn(fn):
    """``fn(f, x, k) -> list[int]``: add 1 to token k of every sequence of x (B, L, d_model), run ``f`` on
    both versions and return, in ascending order, the positions j whose output vector changed."""
    for B, L, d_model, k in [(1, 6, 4, 2), (3, 5, 8, 0), (2, 7, 6, 6)]:
        for name, f in _position_functions(L, d_model):
            x = torch.randn(B, L, d_model)
            x_copy = x.clone()
            what = f"changed_positions({name}, x {tuple(x.shape)}, k={k})"
            out = _as_position_list(call(fn, f, x, k, what="changed_positions"), what)
            if not torch.equal(x, x_copy):
                raise Mistake(f"{what}：你的函数修改了输入 x（例如 x2 = x 之后原地改 x2）；先用 x.clone() 复制一份再改")
            truth = _changed_positions_reference(f, x, k)
            if out == truth:
                continue
            if sorted(out) == truth:
                raise Mistake(f"{what} 返回 {out}：位置对了，但请按从小到大的顺序返回")
            if out == [p + 1 for p in truth]:
                raise Mistake(f"{what} 返回 {out}，应为 {truth}：位置编号从 0 开始，不是从 1 开始")
            if out == [k] and truth != [k]:
                raise Mistake(f"{what} 返回 {out}，应为 {truth}：看起来你比较的是输入 x 和改过的 x，"
                              "而不是两次的输出 f(x) 和 f(x2)")
            if out == [] and truth:
                raise Mistake(f"{what} 返回 []，应为 {truth}：两次输出完全一样，说明“改过的 x”其实没改到，"
                              "或者两次都用了同一个张量")
            x2 = x.clone()
            x2[:, k] += 1.0
            with torch.no_grad():
                moved_dims = (f(x2) - f(x)).abs().amax(dim=(0, 1)) > 1e-6  # (d_model,): reduced over the wrong axes
            changed_dims = moved_dims.nonzero().flatten().tolist()
            if out == changed_dims and d_model != L:
                raise Mistake(f"{what} 返回 {out}，应为 {truth}：你在位置这一维上取了最大值，得到的是“哪些特征维变了”；"
                              "x 的形状是 (B, L, d_model)，位置是第 1 维，要在第 0 和第 2 维上汇总")
            raise Mistake(f"{what} 返回 {out}，应为 {truth}")
