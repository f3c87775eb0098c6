"""Chapter 10 checkers, table-driven: every right answer style passes, stubs are "not done",
every wrong or forbidden answer fails with a verdict that names it, nothing reaches the
checker's own error branch (``verdict`` asserts that). The generic stub and garbage answers are
tried on every checker in tests/checkers/test_exercises_common.py."""
import numpy as np
import pytest
import torch
from torch import nn

import mha
from mha.course.exercises import (check_cross_attention_shapes)
from mha.course.exercises import check_cache_step_mask, check_decoder_mask, check_window_mask
from exercise_support import (RETURNED_GARBAGE, verdict_allowing_prints, answers_for, every, mistakes_for, not_done_answers,
                              raise_value_error, right_answers, shape_dict_garbage, shape_dict_stubs, shape_styles,
                              shapes_changed, shapes_mapped, shapes_without, wrong_answers)

SHORTCUT = "不能调用现成的"
MUTATED = "修改了输入"


# ---------------------------------------------------------------- 10.1 causal mask

def causal_ok(L):
    return torch.ones(L, L, dtype=torch.bool).tril()


def causal_arange(n):  # renamed argument
    i = torch.arange(n)
    return i[None, :] <= i[:, None]


def causal_loop(L):
    m = torch.zeros(L, L, dtype=torch.bool)
    for i in range(L):
        m[i, :i + 1] = True
    return m


# ---------------------------------------------------------------- 10.2 padding & causal

def combine_ok(pad, causal):
    return pad & causal


def combine_expand(p, c):  # renamed arguments, explicit expand
    B, S = p.shape[0], p.shape[-1]
    L = c.shape[0]
    return p.expand(B, 1, L, S) & c[None, None].expand(B, 1, L, S)


def combine_loop(pad, causal):
    B, S = pad.shape[0], pad.shape[-1]
    L = causal.shape[0]
    out = torch.zeros(B, 1, L, S, dtype=torch.bool)
    for b in range(B):
        for i in range(L):
            out[b, 0, i] = pad[b, 0, 0] & causal[i]
    return out


def combine_ignores_causal(pad, causal):  # builds its own triangle instead of using `causal`
    L, S = causal.shape
    return pad & torch.ones(L, S, dtype=torch.bool).tril()


def combine_own_square(pad, causal):  # a square triangle from S alone
    S = pad.shape[-1]
    return pad & torch.ones(S, S, dtype=torch.bool).tril()


def combine_pad_in_place(pad, causal):
    pad &= causal[-1]
    return pad & causal


def combine_causal_in_place(pad, causal):
    causal &= pad[0, 0, 0]
    return pad & causal


def combine_logical_and_(pad, causal):
    out = pad.expand(pad.shape[0], 1, *causal.shape)
    return out.clone().logical_and_(causal)


def combine_via_mha(pad, causal):
    B, S = pad.shape[0], pad.shape[-1]
    return mha.masks.normalize_mask(pad & causal, B, 1, causal.shape[0], S)


# ---------------------------------------------------------------- 10.1 (reworked) causal mask with a window w

def window_ok(L, w):
    ones = torch.ones(L, L, dtype=torch.bool)
    return ones.tril() & ~ones.tril(-w)


def window_arange(n, width):  # renamed arguments, index comparisons
    i = torch.arange(n)
    d = i[:, None] - i[None, :]  # query - key
    return (d >= 0) & (d < width)


def window_loop(L, w):
    m = torch.zeros(L, L, dtype=torch.bool)
    for i in range(L):
        m[i, max(0, i - w + 1):i + 1] = True
    return m


def window_printing(L, w):  # an honest answer that prints while debugging
    out = window_ok(L, w)
    print(mha.fmt(out.int(), 0))
    return out


def _window_band(lo, hi):  # True where lo <= key - query <= hi
    def fn(L, w):
        i = torch.arange(L)
        d = i[None, :] - i[:, None]
        return (d >= lo(w)) & (d <= hi(w))
    return fn


WINDOW_RIGHT = answers_for(check_window_mask, [
    window_ok,
    window_arange,
    window_loop,
    lambda L, w: torch.ones(L, L).tril().triu(-(w - 1)).bool(),
])

WINDOW_WRONG = mistakes_for(check_window_mask, [
    (lambda L, w: torch.ones(L, L, dtype=torch.bool).tril(), ["普通的因果掩码", "没有用窗口 w"]),
    (_window_band(lambda w: -w, lambda w: 0), ["多了一个", "w + 1"]),
    (_window_band(lambda w: -(w - 2), lambda w: 0), ["少了一个"]),
    (_window_band(lambda w: -(w - 1), lambda w: -1), ["对角线"]),
    (_window_band(lambda w: -(w - 1), lambda w: w - 1), ["向两边展开", "未来"]),
    (_window_band(lambda w: 0, lambda w: w - 1), ["朝向反了"]),
    (lambda L, w: ~window_ok(L, w), ["极性反了"]),
    (lambda L, w: window_ok(L, w).long(), ["dtype", "torch.bool"]),
    (lambda L, w: window_ok(L, w)[None, None], ["形状", "(L, L)"]),
    (lambda L, w: window_ok(L, 2), ["window_mask(6, 3)"]),  # a fixed window
    (lambda L, w: window_ok(L, min(w, 4)), ["window_mask(8, 8)", "不对"]),  # wrong only for a wide window
    (lambda L, w: mha.causal_mask(L) & ~mha.causal_mask(L).tril(-w), [SHORTCUT, "mha.causal_mask"]),
    (lambda L, w: None, ["返回了 None"]),
    (raise_value_error, ["ValueError: boom"]),
])


# ---------------------------------------------------------------- 10.2 (reworked) decoder mask from token ids

def decoder_ok(dec_ids, pad_id):
    L = dec_ids.shape[1]
    return (dec_ids != pad_id)[:, None, None, :] & torch.ones(L, L, dtype=torch.bool).tril()


def decoder_arange(ids, p):  # renamed arguments, index comparisons, unsqueeze
    i = torch.arange(ids.shape[1])
    return (ids != p).unsqueeze(1).unsqueeze(1) & (i[None, :] <= i[:, None])


def decoder_loop(dec_ids, pad_id):
    B, L = dec_ids.shape
    out = torch.zeros(B, 1, L, L, dtype=torch.bool)
    for b in range(B):
        for i in range(L):
            for j in range(i + 1):
                out[b, 0, i, j] = bool(dec_ids[b, j] != pad_id)
    return out


def decoder_printing(dec_ids, pad_id):  # prints with the book's helper while debugging
    out = decoder_ok(dec_ids, pad_id)
    print(mha.fmt(out[:, 0].int(), 0))
    return out


def _decoder_with(pad_part, causal_part=lambda L: torch.ones(L, L, dtype=torch.bool).tril(), combine=lambda a, b: a & b):
    def fn(dec_ids, pad_id):
        return combine(pad_part(dec_ids != pad_id), causal_part(dec_ids.shape[1]))
    return fn


COLUMNS = lambda keep: keep[:, None, None, :]  # noqa: E731


DECODER_RIGHT = answers_for(check_decoder_mask, [
    decoder_ok,
    decoder_arange,
    decoder_loop,
    lambda ids, p: ((ids != p).long()[:, None, None, :] * torch.ones(ids.shape[1], ids.shape[1]).tril().long()).bool(),
])

DECODER_WRONG = mistakes_for(check_decoder_mask, [
    (_decoder_with(lambda keep: keep[:, None, :, None]), ["挡住的应该是列", "(B, 1, 1, L)"]),
    (_decoder_with(lambda keep: keep[:, None, :, None] & keep[:, None, None, :]), ["PAD 的行也挡住了"]),
    (_decoder_with(COLUMNS, combine=lambda a, b: a | b), ["“或”"]),
    (_decoder_with(lambda keep: torch.ones_like(keep)[:, None, None, :]), ["只有因果部分"]),
    (_decoder_with(COLUMNS, lambda L: torch.ones(L, L, dtype=torch.bool)), ["只有 padding 部分"]),
    (_decoder_with(lambda keep: keep.int().cumprod(-1).bool()[:, None, None, :]), ["第一个 PAD 之后", "句子中间"]),
    (_decoder_with(COLUMNS, lambda L: torch.ones(L, L, dtype=torch.bool).triu()), ["上三角"]),
    (_decoder_with(COLUMNS, lambda L: torch.ones(L, L, dtype=torch.bool).tril(-1)), ["对角线"]),
    (lambda ids, p: ~decoder_ok(ids, p), ["极性反了"]),
    (lambda ids, p: decoder_ok(ids, p)[:, 0], ["少了头的轴", "(B, L, L)"]),
    (lambda ids, p: decoder_ok(ids, p).int(), ["dtype", "torch.bool"]),
    (lambda ids, p: decoder_ok(ids, 0), ["pad_id 不一定是 0"]),  # PAD id fixed at 0
    (_decoder_with(lambda keep: (torch.arange(keep.shape[1])[None, :] < keep.sum(-1, keepdim=True))[:, None, None, :]),
     ["真实 token 的个数", "句子中间"]),  # a mask from lengths
    (lambda ids, p: (ids == p)[:, None, None, :] & torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool).tril(),
     ["padding 部分反了"]),
    (lambda ids, p: (ids > p)[:, None, None, :] & torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool).tril(),
     ["pad_id = 3", "不对"]),  # `>` instead of `!=`
    (lambda ids, p: mha.padding_mask(ids, p) & torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool).tril(),
     [SHORTCUT, "mha.padding_mask"]),
    (lambda ids, p: (ids != p)[:, None, None, :] & mha.causal_mask(ids.shape[1]), [SHORTCUT, "mha.causal_mask"]),
    (lambda ids, p: (ids != p) @ torch.ones(3, 3), ["运行时抛出了"]),  # a torch error inside the student's code
    (lambda ids, p: None, ["返回了 None"]),
    (raise_value_error, ["ValueError: boom"]),
])


# ---------------------------------------------------------------- 10.3 cross-attention shapes

def shapes_ok(B, L, S, d_model, n_heads):
    d_k = d_model // n_heads
    return {
        "mask": (B, 1, 1, S),
        "q": (B, n_heads, L, d_k),
        "k": (B, n_heads, S, d_k),
        "v": (B, n_heads, S, d_k),
        "scores": (B, n_heads, L, S),
        "weights": (B, n_heads, L, S),
        "heads": (B, n_heads, L, d_k),
        "output": (B, L, d_model),
    }


def shapes_map(convert, keys=None):
    return shapes_mapped(shapes_ok, convert, keys)


def _shapes_sizes(B, L, S, d_model, n_heads):
    return dict(B=B, L=L, S=S, d_model=d_model, h=n_heads, d_k=d_model // n_heads)


def shapes_with(**changes):
    return shapes_changed(shapes_ok, _shapes_sizes, **changes)


def shapes_by_running_mha(B, L, S, d_model, n_heads):
    out = shapes_ok(B, L, S, d_model, n_heads)
    layer = mha.MultiHeadAttention(d_model, n_heads)
    out["output"] = tuple(layer(torch.zeros(B, L, d_model), torch.zeros(B, S, d_model), torch.zeros(B, S, d_model)).shape)
    return out


def shapes_by_running_torch(B, L, S, d_model, n_heads):
    out = shapes_ok(B, L, S, d_model, n_heads)
    layer = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
    out["output"] = tuple(layer(torch.zeros(B, L, d_model), torch.zeros(B, S, d_model), torch.zeros(B, S, d_model))[0].shape)
    return out


SHAPES_RIGHT = answers_for(check_cross_attention_shapes, [
    shapes_ok,
    *shape_styles(shapes_ok, "mask"),
    lambda b, l, s, d, h: shapes_ok(b, l, s, d, h),  # renamed arguments
])

SHAPES_WRONG = mistakes_for(check_cross_attention_shapes, [
    (shapes_with(scores=("B", "h", "L", "L"), weights=("B", "h", "L", "L")), ["不是方阵"]),
    (shapes_with(scores=("B", "h", "S", "L")), ["行是 query"]),
    (shapes_with(weights=("B", "L", "S")), ["头的轴 h"]),
    (shapes_with(output=("B", "S", "d_model")), ["跟着 decoder 的 L"]),
    (shapes_with(output=("B", "h", "L", "d_k")), ["Concat 和 W^O"]),
    (shapes_with(q=("B", "h", "L", "d_model")), ["d_k = d_model / n_heads"]),
    (shapes_with(q=("B", "L", "h", "d_k")), ["transpose"]),
    (shapes_with(k=("B", "h", "L", "d_k")), ["来自编码器"]),
    (shapes_with(q=("B", "h", "S", "d_k")), ["Q 来自 decoder"]),
    # a mask of the wrong shape: the padding mask is (B, 1, 1, S), the shape of mha.padding_mask
    (shapes_with(mask=("B", 1, 1, "L")), ['shapes["mask"]', "屏蔽的是 key"]),
    (shapes_with(mask=("B", 1, "L", "L")), ['shapes["mask"]', "L×L"]),
    (shapes_with(mask=("B", 1, "L", "S")), ['shapes["mask"]', "mha.padding_mask 的形状"]),
    (shapes_with(mask=("B", "h", "L", "S")), ['shapes["mask"]', "和头无关"]),
    (shapes_with(mask=("B", "S")), ['shapes["mask"]', "(B, 1, 1, S)"]),
    (shapes_with(mask=(1, 1, 1, "S")), ['shapes["mask"]', "应该是"]),
    (lambda *a: shapes_ok(2, 3, 5, 8, 2), ["B=1"]),  # a fixed answer
    (shapes_without(shapes_ok, "heads"), ["缺少", "heads"]),
    (shapes_map(lambda s: None, ["weights"]), ['shapes["weights"]', "是 None"]),
    (shapes_map(lambda s: (s[0] + 0.5,) + s[1:], ["k"]), ['shapes["k"]', "应该是整数"]),
    (shapes_map(lambda s: (np.bool_(True),) + s[1:], ["k"]), ["布尔值"]),
    (shapes_map(lambda s: torch.zeros(s), ["q"]), ["tuple(t.shape)"]),
    (shapes_by_running_mha, [SHORTCUT, "mha.MultiHeadAttention"]),
    (shapes_by_running_torch, [SHORTCUT, "nn.MultiheadAttention"]),
    (lambda *a: None, ["返回了 None"]),
])


# ---------------------------------------------------------------- the tables, run
test_right_answers_pass = right_answers(WINDOW_RIGHT, DECODER_RIGHT, SHAPES_RIGHT)
test_wrong_answers_are_named = wrong_answers(WINDOW_WRONG, DECODER_WRONG, SHAPES_WRONG)
# The stub and garbage answers of these exercises beyond the generic ones (tests/checkers/test_exercises_common.py).
test_stubs_are_not_done = not_done_answers(answers_for(check_cross_attention_shapes,
                                                      shape_dict_stubs(shapes_ok, 1, 1, 1, 2, 1)))
test_garbage_gets_a_verdict = wrong_answers(every(
    [check_window_mask, check_decoder_mask,   check_cross_attention_shapes],
    RETURNED_GARBAGE + shape_dict_garbage(shapes_ok, 1, 1, 1, 2, 1)))


@pytest.mark.parametrize("checker, answer", [(check_window_mask, window_printing), (check_decoder_mask, decoder_printing)])
def test_honest_answers_that_print_pass(capsys, checker, answer):
    """Printing with mha.fmt while debugging is allowed: the verdict (the last line) is a pass."""
    ok, last = verdict_allowing_prints(capsys, checker, answer)
    assert ok is True and "✅" in last, last


def test_combine_tries_non_square_masks():
    """10.2 is tried with L < S and with two different causal arguments of the same shape."""
    from mha.course.exercises.ch10 import COMBINE_CASES, _combine_causals

    shapes = [(L, len(ids[0])) for ids, _, L in COMBINE_CASES]
    assert any(L < S for L, S in shapes) and any(L == S for L, S in shapes)
    assert any(len(_combine_causals(L, S)) == 2 for L, S in shapes)


def test_cross_attention_key_matches_the_layer():
    """The answer key is computed by running mha; it agrees with the worked-out shapes."""
    from mha.course.exercises.ch10 import cross_shapes

    assert cross_shapes(2, 3, 5, 8, 2) == shapes_ok(2, 3, 5, 8, 2)


# ---------------------------------------------------------------- 10.4 (a KV-cache step)
def _cache_mask(L, S):
    return torch.ones(L, S, dtype=torch.bool).tril(diagonal=S - L)


test_cache_step_right = right_answers([
    (check_cache_step_mask, {"buggy_sees": [0], "mask": _cache_mask}),
    (check_cache_step_mask, {"buggy_sees": torch.tensor([0]), "mask": lambda L, S: torch.arange(S)[None] <= torch.arange(L)[:, None] + S - L}),
])
test_cache_step_wrong = wrong_answers([
    (check_cache_step_mask, {"buggy_sees": [0, 1, 2, 3, 4], "mask": _cache_mask}, "左上角对齐"),
    (check_cache_step_mask, {"buggy_sees": [4], "mask": _cache_mask}, "不对"),
    (check_cache_step_mask, {"buggy_sees": [0], "mask": lambda L, S: torch.ones(L, S, dtype=torch.bool).tril()}, "对齐在左上角"),
    (check_cache_step_mask, {"buggy_sees": [0], "mask": lambda L, S: ~_cache_mask(L, S)}, "极性反了"),
    (check_cache_step_mask, {"buggy_sees": [0], "mask": lambda L, S: torch.ones(L, S, dtype=torch.bool).tril(L - S)},
     "偏移符号反了"),
    (check_cache_step_mask, {"buggy_sees": [0], "mask": lambda L, S: torch.ones(L, S, dtype=torch.bool)}, "全是 True"),
    (check_cache_step_mask, {"buggy_sees": [0], "mask": lambda L, S: _cache_mask(L, S).long()}, "dtype"),
    (check_cache_step_mask, {"buggy_sees": [0], "mask": lambda L, S: mha.causal_mask(L, S)}, "不能调用现成的"),
    (check_cache_step_mask, {"buggy_sees": [0]}, "缺少键"),
])
