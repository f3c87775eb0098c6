"""Checkers for chapter 01, 多头注意力是什么.

1.1 predict the output shape of a MultiHeadAttention layer (a tuple)
1.2 count the parameters of MultiHeadAttention(d_model, n_heads) (a function)
1.3 which output positions change when one input token changes (a dict)
"""
from __future__ import annotations

import torch
from torch import nn

from ._core import Mistake, NotDone, call, checker, is_stub

__all__ = ["check_output_shape", "check_param_count", "check_changed_positions"]

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
        raise Mistake(f"输出形状应该是 {len(truth)} 维的，你的答案 {shape} 不对。"
                      "提示：多头注意力是一种特征变换，x′ 和 x 的形状有什么关系？")


# ---------------------------------------------------------------- 1.2
PARAM_CASES = [(4, 2), (512, 8), (6, 3), (12, 4), (8, 1), (16, 16)]


def _param_count_reference(d_model: int, n_heads: int) -> int:
    return 4 * (d_model * d_model + d_model)  # four Linear(d_model, d_model): weight + bias each


@checker("ch01", "1.2", "数一数 MultiHeadAttention 的参数")
def check_param_count(fn):
    """``fn(d_model, n_heads) -> int``: the number of trainable numbers in ``MultiHeadAttention(d_model, n_heads)``."""
    from ..layer import MultiHeadAttention

    for d_model, h in PARAM_CASES:
        out = call(fn, d_model, h, what="count_params")
        if is_stub(out):
            raise NotDone()
        if isinstance(out, torch.Tensor) and out.numel() == 1:
            out = out.item()
        if isinstance(out, bool) or not isinstance(out, (int, float)):
            raise Mistake(f"count_params({d_model}, {h}) 应该返回一个整数，却返回了 {type(out).__name__}")
        if out != out or out in (float("inf"), float("-inf")):
            raise Mistake(f"count_params({d_model}, {h}) 返回了 {out}，不是一个有限的数")
        truth = sum(p.numel() for p in MultiHeadAttention(d_model, h).parameters())
        assert truth == _param_count_reference(d_model, h)
        if out == truth:
            continue
        d_k = d_model // h
        known = {
            4 * d_model * d_model: "忘了偏置 b：每个 Linear(d_model, d_model) 除了 d_model×d_model 个权重 w，还有 d_model 个偏置",
            3 * (d_model * d_model + d_model): "只数了 W_q、W_k、W_v 三个 Linear，漏掉了最终的 W_o（一共 4 个 Linear）",
            3 * d_model * d_model: "只数了三个 Linear，而且都没算偏置：一共 4 个 Linear，每个都有 w 和 b",
            4 * d_model * d_model + d_model: "只给一个 Linear 算了偏置：4 个 Linear 各有 d_model 个偏置",
            4 * h * (d_model * d_model + d_model): "把参数乘上了头数 h：分头只是把 d_model 维切成 h 段，并没有新增参数",
            4 * (d_model * d_k + d_k): "只数了一个头的那一段（d_model×d_k）：h 个头的段拼起来正好是整个 d_model×d_model 矩阵",
            d_model * d_model + d_model: "只数了一个 Linear：多头注意力里有 W_q、W_k、W_v、W_o 四个",
        }
        if out in known and out != truth:
            raise Mistake(f"count_params({d_model}, {h}) 返回 {out}，正确是 {truth}。{known[out]}")
        raise Mistake(f"count_params({d_model}, {h}) 返回 {out}，正确是 {truth}。"
                      "提示：数一数层里有几个 nn.Linear(d_model, d_model)，每个有多少个 w 和 b")


# ---------------------------------------------------------------- 1.3
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


@checker("ch01", "1.3", "改一个 token，哪些位置会变")
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
