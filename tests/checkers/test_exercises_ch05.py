"""Exercise checkers of chapter 05, table-driven: every correct style passes, stubs are "not done",
every wrong, forbidden or broken answer gets a verdict that names what happened (never the checker's own error).
The generic stub and garbage answers are tried on every checker in tests/checkers/test_exercises_common.py."""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import mha
from mha.course.exercises import (check_attention_weights, check_dot_product_variance_scaled, check_rows_that_move, results)
from mha.steps import masked_softmax
from exercise_support import answers_for, mistakes_for, verdict_allowing_prints, every, not_done_answers, raise_value_error, right_answers, wrong_answers


# ---------------------------------------------------------------- references
def attention_reference(q, k, v, mask=None):
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (B, h, L, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ v  # (B, h, L, d_k)


def attention_lecture(q, k, v, mask=None):
    """The lecture's way: masked_fill(mask == 0, -1e9); a fully masked row averages V."""
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def attention_inf_then_nan_to_num(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0) @ v


def attention_einsum(query, key, value, m=None):  # renamed arguments
    scores = torch.einsum("bhld,bhsd->bhls", query, key) / math.sqrt(query.shape[-1])
    if m is not None:
        scores = torch.where(m, scores, torch.tensor(-1e9))
    return torch.einsum("bhls,bhsd->bhld", scores.softmax(-1), value)


def attention_float64_inside(q, k, v, mask=None):
    out = attention_reference(q.double(), k.double(), v.double(), mask)
    return out.float()


def attention_loop_over_heads(q, k, v, mask=None):
    B, h, L, d_k = q.shape
    if mask is not None:
        mask = mask.expand(B, h, L, k.shape[-2])
    heads = []
    for i in range(h):
        scores = q[:, i] @ k[:, i].transpose(-2, -1) / math.sqrt(d_k)  # (B, L, S)
        if mask is not None:
            scores = scores.masked_fill(~mask[:, i], -1e9)
        heads.append(torch.softmax(scores, dim=-1) @ v[:, i])
    return torch.stack(heads, dim=1)


CHECKERS = [check_rows_that_move]


# ---------------------------------------------------------------- 5.1 which output rows change (causal)
def _rows_by_experiment():
    """An honest answer: the three experiments with the chapter's mha.attention."""
    q, k, v = (torch.randn(1, 1, 5, 4) for _ in range(3))
    keep = mha.causal_mask(5)
    base = mha.attention(q, k, v, keep)[0]

    def rows(q=q, v=v, keep=keep):
        return [t for t in range(5) if not torch.allclose(mha.attention(q, k, v, keep)[0][0, 0, t], base[0, 0, t])]
    q2, v2, hide = q.clone(), v.clone(), keep.clone()
    q2[0, 0, 3] = torch.randn(4)
    v2[0, 0, 4] = torch.randn(4)
    hide[:, 1] = False
    return {"change_q": rows(q=q2), "mask_key": rows(keep=hide), "change_v": rows(v=v2)}


RIGHT_5 = {"change_q": [3], "mask_key": [1, 2, 3, 4], "change_v": [4]}
RIGHT = answers_for(check_rows_that_move, [
    RIGHT_5, {"change_q": (3,), "mask_key": range(1, 5), "change_v": torch.tensor([4])},
    {"change_q": np.array([3]), "mask_key": {4, 3, 2, 1}, "change_v": [4.0]}, _rows_by_experiment(),
])
test_right_answers_pass = right_answers(RIGHT)
test_stubs_are_not_done = not_done_answers(answers_for(check_rows_that_move, [{**RIGHT_5, "mask_key": ...}]))
WRONG_5_1 = mistakes_for(check_rows_that_move, [
    ({**RIGHT_5, "change_q": [0, 1, 2, 3, 4]}, ["第 3 行", "自己的 query"]),
    ({**RIGHT_5, "change_q": [3, 4]}, "当成了 key"),
    ({**RIGHT_5, "mask_key": [1]}, ["第 1 列", "重新分配"]),
    ({**RIGHT_5, "mask_key": [0, 1, 2, 3, 4]}, "query 0 本来就看不到"),
    ({**RIGHT_5, "mask_key": [0, 1]}, "方向反了"),
    ({**RIGHT_5, "mask_key": [2, 3, 4]}, ["漏了第 1 行", "key 1（它自己）"]),
    ({**RIGHT_5, "change_v": [0, 1, 2, 3, 4]}, "权重是 0"),
    ({**RIGHT_5, "change_v": []}, "加权和会变"),
    ({**RIGHT_5, "change_v": [0, 1, 2, 3]}, "方向反了"),
    ({**RIGHT_5, "change_v": [5]}, "从 1 开始数"),
    ({**RIGHT_5, "change_q": [2]}, ['answer["change_q"]', "提示"]),
    ({**RIGHT_5, "change_q": [7]}, "超出了范围"),
    ({**RIGHT_5, "change_q": None}, "是 None"),
    ({"change_q": [3]}, "缺少键"),
    ((3, 4, 5, 7), "字典"),  # the old shape exercise's answer
])


# Garbage only these exercises' checkers get (the generic garbage is in tests/checkers/test_exercises_common.py).
GARBAGE = [
    "(3, 4, 5, 7)", "256, 1", len, raise_value_error,
    (3.5, 4, 5, 7), (True, 4, 5, 7), (256,), (256, 1, 1), (256, "1"), (math.nan, 1), (256, math.inf),
    lambda q, k, v, mask=None: torch.full_like(q, math.nan),
    lambda q, k, v, mask=None: attention_reference(q, k, v, mask)[..., :2],
    lambda q, k, v, mask=None: attention_reference(q, k, v, mask).tolist(),
    lambda q, k, v, mask=None: attention_reference(q, k, v, mask).long(),
    lambda q, k, v: q,  # wrong signature
]
test_garbage_gets_a_verdict = wrong_answers(every(CHECKERS, GARBAGE))


# ---------------------------------------------------------------- wrong answers, each named
def _make(scale=True, dim=-1, polarity=True, when="before", fill=-1e9, returns="output", use_mask=True):
    def attention(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1)
        if scale:
            scores = scores / math.sqrt(q.size(-1))
        keep = None if (mask is None or not use_mask) else (mask if polarity else ~mask)
        if keep is not None and when == "before":
            scores = scores.masked_fill(~keep, fill)
        weights = torch.softmax(scores, dim=dim)
        if keep is not None and when == "after":
            weights = weights.masked_fill(~keep, fill)
        if returns == "weights":
            return weights
        if returns == "both":
            return weights @ v, weights
        return weights @ v
    return attention


def _divides_q_in_place(q, k, v, mask=None):
    q.div_(math.sqrt(q.size(-1)))
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    return torch.softmax(scores, -1) @ v


def _flips_mask_in_place(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not_(), -1e9)  # flips the caller's mask
    return torch.softmax(scores, -1) @ v


def _same_mask_for_all_heads(q, k, v, mask=None):
    if mask is not None and mask.dim() == 4:
        mask = mask[:, :1]  # assumes the mask never differs between heads
    return attention_lecture(q, k, v, mask)


def _hard_coded_d_k(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(5)
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    return torch.softmax(scores, -1) @ v


def _no_grad(q, k, v, mask=None):
    with torch.no_grad():
        return attention_lecture(q, k, v, mask)


def _uses_torch_mha(q, k, v, mask=None):
    nn.MultiheadAttention(q.size(-1), 1, batch_first=True)  # even building it is the shortcut
    return attention_lecture(q, k, v, mask)


def _forgot_return(q, k, v, mask=None):
    attention_lecture(q, k, v, mask)


SHORTCUT = "不能调用现成的"

WRONG = [
    # 5.2: named mistakes
    # 5.2: close is not enough
    # 5.2: the answer's parts
    # 5.3: the computation
    # 5.3: masks of every shape the prompt allows, and nothing hard-coded
    # 5.3: the inputs must not change
    # 5.3: shortcuts
    # 5.3: a layer trains through attention
]


# ---------------------------------------------------------------- the reworked 5.2 (variance 4)
RIGHT_NEW = [(check_dot_product_variance_scaled, a) for a in [(256, 4, 16), [256.0, 4.0, 16.0], np.array([256, 4, 16]),
                                                              (torch.tensor(256), 4, 16.0), (255, 4.1, 16.2)]]
WRONG_NEW = [(check_dot_product_variance_scaled, a, w) for a, w in [
    ((64, 1, 8), "各分量方差都为 1"),
    ((128, 2, 11.3), "标准差"),
    ((256, 1, 16), "不是 1"),
    ((256, 16, 16), "Var(X / c)"),
    ((256, 32, 16), ["只除了 √d_k", "除以 d_k = 64"]),  # review r11: the variance divided by sqrt(d_k)
    ((256, 4, 256), "方差本身"),
    ((256, 4, 8), "√d_k"),
    ((256, 4, 4), "要除的数"),
    ((256, 4), "三个数"),
    ((256, None, 16), "是 None"),
    ("256, 4, 16", "三个数"),
]]


# ---------------------------------------------------------------- 5.3 reworked: d_v != d_k, (output, weights), (B, h, L, S) bool masks
def weights_ref(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, h, L, S): d_k, not d_v
    if mask is not None:
        blocked = mask == 0  # bool or 0/1 integers alike
        scores = scores.masked_fill(blocked, -1e9)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(blocked, 0.0)  # a query that sees no key: all zeros, not 1/S
    return weights @ v, weights


def weights_where(q, k, v, mask=None):
    scores = torch.einsum("bhld,bhsd->bhls", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        keep = mask.bool()
        scores = torch.where(keep, scores, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores, -1) * keep
    else:
        weights = torch.softmax(scores, -1)
    return weights @ v, weights


def weights_nan_to_num(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf"))
    weights = torch.softmax(scores, -1).nan_to_num(0.0)
    return weights @ v, weights


def _weights_variant(scale="d_k", fill=-1e9, zero_blocked=True, polarity=True, when="before", invert="==0"):
    def attention(q, k, v, mask=None):
        width = {"d_k": q.size(-1), "d_v": v.size(-1)}[scale]
        scores = q @ k.transpose(-2, -1) / math.sqrt(width)
        blocked = None
        if mask is not None:
            blocked = (~mask if invert == "~" else mask == 0) if polarity else mask != 0
        if blocked is not None and when == "before":
            scores = scores.masked_fill(blocked, fill)
        weights = torch.softmax(scores, dim=-1)
        if blocked is not None and (zero_blocked or when == "after"):
            weights = weights.masked_fill(blocked, 0.0)
        return weights @ v, weights
    return attention


def _weights_where_int(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = torch.where(mask, scores, -1e9)  # a bool mask is a condition for torch.where
    weights = torch.softmax(scores, -1)
    return weights @ v, weights


def _weights_times_mask(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores * mask  # blocked scores become 0, not a very small number
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def _weights_in_place(q, k, v, mask=None):
    k.data.mul_(1.0 / math.sqrt(q.size(-1)))  # changes the caller's k
    out, w = weights_ref(q, k * math.sqrt(q.size(-1)), v, mask)
    return out, w


def _weights_detached(q, k, v, mask=None):
    out, w = weights_ref(q, k, v, mask)
    return w.detach() @ v, w.detach()


RIGHT_WEIGHTS = answers_for(check_attention_weights, [
    weights_ref, weights_where, weights_nan_to_num,
    _weights_variant(zero_blocked=False),  # the lecture's -1e9, no zeroing: right when every query sees a key
    _weights_variant(fill=float("-inf"), zero_blocked=False),  # -inf: no NaN when every query sees a key
    _weights_variant(fill=torch.finfo(torch.float32).min, zero_blocked=False, invert="~"),
    _weights_where_int,
    lambda q, k, v, mask=None: tuple(t.double() for t in weights_ref(q.double(), k.double(), v.double(), mask)),
    lambda q, k, v, mask=None: list(weights_ref(q, k, v, mask)),
    lambda q, k, v, mask=None: weights_ref(q, k, v, None if mask is None else mask.bool()),
])
WRONG_WEIGHTS = mistakes_for(check_attention_weights, [
    (_weights_variant(scale="d_v"), "√d_v"),
    (lambda q, k, v, mask=None: (lambda w: (w @ v, w))(torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5, dim=-2)),
     ["softmax 沿错了轴", "dim=-2"]),
    (lambda q, k, v, mask=None: (lambda w: (w @ v, w))(torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5, dim=1)),
     ["softmax 沿错了轴", "dim=1"]),
    (_weights_variant(polarity=False), "掩码方向反了"),
    (_weights_variant(polarity=False, zero_blocked=False), "掩码方向反了"),  # -1e9, a row that sees every key averages
    (_weights_variant(fill=float("nan")), ["NaN", "填的是什么"]),
    (lambda q, k, v, mask=None: weights_ref(q, k, v, None if mask is None else mask[:, :1].expand_as(mask)),
     ["每个头、每个 query 都不同的掩码", "weights"]),  # assumes every head shares head 1's mask
    (_weights_variant(when="after", zero_blocked=False), "在 softmax 之后才挡"),
    (_weights_variant(when="after"), "在 softmax 之后才挡"),
    (_weights_times_mask, ["填成了 0", "scores * mask", "填的数不够小"]),
    (_weights_variant(fill=0.0, zero_blocked=False, invert="~"), ["填成了 0", "不会让 e^score 变成 0"]),
    (_weights_variant(fill=0.0), ["填成了 0", "填的数不够小"]),  # zeroed after the softmax too: rows sum below 1
    (_weights_variant(fill=-10.0, zero_blocked=False, invert="~"), ["填了 −10", "不会让 e^score 变成 0"]),
    (_weights_variant(fill=-10.0), ["填了 −10", "填的数不够小"]),
    (lambda q, k, v, mask=None: weights_ref(q, k, v, None), "没有用上掩码"),
    (lambda q, k, v, mask=None: weights_ref(q, k, v, mask)[0], "只返回了一个张量"),
    (lambda q, k, v, mask=None: weights_ref(q, k, v, mask)[::-1], "顺序反了"),
    (lambda q, k, v, mask=None: (*weights_ref(q, k, v, mask), None), "两个张量"),
    (lambda q, k, v, mask=None: (weights_ref(q, k, v, mask)[0], weights_ref(q, k, v, mask)[1] + 1e-3), "weights 的形状对了"),
    (lambda q, k, v, mask=None: (weights_ref(q, k, v, mask)[0][..., :q.size(-1)], weights_ref(q, k, v, mask)[1]), "d_v"),
    (_weights_in_place, ["修改了输入", "参数 k"]),
    (_weights_detached, "梯度传不到 q"),
    (lambda q, k, v, mask=None: (weights_ref(q, k, v, mask)[0], weights_ref(q, k, v, mask)[1].detach()), "的梯度"),
    (lambda q, k, v, mask=None: mha.attention(q, k, v, None if mask is None else mask.bool()), [SHORTCUT, "attention"]),
    (lambda q, k, v, mask=None: (F.scaled_dot_product_attention(q, k, v), None), [SHORTCUT, "F.scaled_dot_product_attention"]),
    (lambda q, k, v, mask=None: (lambda w: (w @ v, w))(masked_softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5,
                                                                       None if mask is None else mask.bool())),
     [SHORTCUT, "masked_softmax"]),
])
NOT_DONE_WEIGHTS = answers_for(check_attention_weights, [lambda q, k, v, mask=None: ...])

test_wrong_answers_are_named = wrong_answers(WRONG_5_1, WRONG + WRONG_NEW, WRONG_WEIGHTS)
test_new_right_answers_pass = right_answers(RIGHT_NEW, RIGHT_WEIGHTS)
test_new_stubs_are_not_done = not_done_answers(NOT_DONE_WEIGHTS)


def test_attention_weights_that_prints_with_mha_fmt_passes(capsys):
    def printing(q, k, v, mask=None):
        print(mha.fmt(q[0, 0, 0], 2))  # debugging prints with the book's own helper are allowed
        return weights_ref(q, k, v, mask)
    ok, last = verdict_allowing_prints(capsys, check_attention_weights, printing)
    assert ok is True and "✅" in last, last


def test_results_registry_lists_chapter():
    assert set(results("ch05")) == {"5.1", "5.2", "5.3"}


def test_5_3_masks_are_full_bool_with_a_visible_key_in_every_row():
    """Chapter 05 tests (B, h, L, S) boolean masks only, and no query that sees nothing (both are chapter 10's)."""
    from mha.course.exercises.ch05 import WEIGHTS_SHAPES, _weights_masks
    for shape in WEIGHTS_SHAPES:
        masks = [m for _, m in _weights_masks(*shape[:4]) if m is not None]
        assert len(masks) == 3
        for m in masks:
            assert m.dtype == torch.bool and tuple(m.shape) == shape[:4]
            assert m.any(dim=-1).all() and not m.all()
        assert not torch.equal(masks[-1], masks[-1][:, :1].expand_as(masks[-1]))  # the heads' masks differ

