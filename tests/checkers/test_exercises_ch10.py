"""Chapter 10 checkers, table-driven: every right answer style passes, stubs are "not done",
every wrong or forbidden answer fails with a verdict that names it, nothing reaches the
checker's own error branch (``verdict`` asserts that). The generic stub and garbage answers are
tried on every checker in tests/checkers/test_exercises_common.py."""
import pytest
import torch

import mha
from mha.course.exercises import check_mask_alignment
from mha.course.exercises import check_cache_step_mask, check_decoder_mask, check_window_mask
from exercise_support import (RETURNED_GARBAGE, verdict_allowing_prints, answers_for, every, mistakes_for, not_done_answers,
                              raise_value_error, right_answers, wrong_answers)

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
    (lambda L, w: mha.causal_mask(L).tril() & ~mha.causal_mask(L).tril(-w), [SHORTCUT, "比较运算", "自己搭出掩码"]),
    (lambda L, w: None, ["返回了 None"]),
    (raise_value_error, ["ValueError: boom"]),
])


# ---------------------------------------------------------------- 10.2 (reworked) decoder masks from token ids, ours and torch's

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


def theirs_expand(ours, h):
    B, _, L, S = ours.shape
    return ~ours.expand(B, h, L, S).reshape(B * h, L, S)


def theirs_interleave(ours, h):
    return (~ours[:, 0]).repeat_interleave(h, dim=0)


def theirs_loop(ours, h):
    B, _, L, S = ours.shape
    out = torch.empty(B * h, L, S, dtype=torch.bool)
    for b in range(B):
        for i in range(h):
            out[b * h + i] = ours[b, 0] == 0
    return out


def both(ours_fn, theirs_fn=theirs_expand):
    """A 10.2 answer from a way to build our mask and a way to turn it into nn.MultiheadAttention's."""
    def fn(dec_ids, pad_id, n_heads):
        ours = ours_fn(dec_ids, pad_id)
        return ours, theirs_fn(decoder_ok(dec_ids, pad_id), n_heads)
    fn.__name__ = f"both({getattr(ours_fn, '__name__', 'lambda')}, {getattr(theirs_fn, '__name__', 'lambda')})"
    return fn


def decoder_printing(dec_ids, pad_id, n_heads):  # prints with the book's helper while debugging
    ours, theirs = both(decoder_ok)(dec_ids, pad_id, n_heads)
    print(mha.fmt(ours[:, 0].int(), 0))
    return ours, theirs


def _decoder_with(pad_part, causal_part=lambda L: torch.ones(L, L, dtype=torch.bool).tril(), combine=lambda a, b: a & b):
    def fn(dec_ids, pad_id):
        return combine(pad_part(dec_ids != pad_id), causal_part(dec_ids.shape[1]))
    return fn


COLUMNS = lambda keep: keep[:, None, None, :]  # noqa: E731


DECODER_RIGHT = answers_for(check_decoder_mask, [
    both(decoder_ok),
    both(decoder_arange, theirs_interleave),
    both(decoder_loop, theirs_loop),
    both(lambda ids, p: ((ids != p).long()[:, None, None, :] * torch.ones(ids.shape[1], ids.shape[1]).tril().long()).bool(),
         lambda ours, h: ~ours.repeat(1, h, 1, 1).flatten(0, 1)),
    lambda ids, p, h: [decoder_ok(ids, p), theirs_expand(decoder_ok(ids, p), h)],  # a list of two
])

DECODER_WRONG = mistakes_for(check_decoder_mask, [
    (both(_decoder_with(lambda keep: keep[:, None, :, None])), ["挡住的应该是列", "(B, 1, 1, L)"]),
    (both(_decoder_with(lambda keep: keep[:, None, :, None] & keep[:, None, None, :])), ["PAD 的行也挡住了"]),
    (both(_decoder_with(COLUMNS, combine=lambda a, b: a | b)), ["“或”"]),
    (both(_decoder_with(lambda keep: torch.ones_like(keep)[:, None, None, :])), ["只有因果部分"]),
    (both(_decoder_with(COLUMNS, lambda L: torch.ones(L, L, dtype=torch.bool))), ["只有 padding 部分"]),
    (both(_decoder_with(lambda keep: keep.int().cumprod(-1).bool()[:, None, None, :])), ["第一个 PAD 之后", "句子中间"]),
    (both(_decoder_with(COLUMNS, lambda L: torch.ones(L, L, dtype=torch.bool).triu())), ["上三角"]),
    (both(_decoder_with(COLUMNS, lambda L: torch.ones(L, L, dtype=torch.bool).tril(-1))), ["对角线"]),
    (both(lambda ids, p: ~decoder_ok(ids, p)), ["极性反了"]),
    (both(lambda ids, p: decoder_ok(ids, p)[:, 0]), ["少了头的轴", "(B, L, L)"]),
    (both(lambda ids, p: decoder_ok(ids, p).int()), ["dtype", "torch.bool"]),
    (both(lambda ids, p: decoder_ok(ids, 0)), ["pad_id 不一定是 0"]),  # PAD id fixed at 0
    (both(_decoder_with(lambda keep: (torch.arange(keep.shape[1])[None, :] < keep.sum(-1, keepdim=True))[:, None, None, :])),
     ["真实 token 的个数", "句子中间"]),  # a mask from lengths
    (both(lambda ids, p: (ids == p)[:, None, None, :] & torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool).tril()),
     ["padding 部分反了"]),
    (both(lambda ids, p: (ids > p)[:, None, None, :] & torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool).tril()),
     ["pad_id = 3", "不对"]),  # `>` instead of `!=`
    (both(lambda ids, p: mha.padding_mask(ids, p) & torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool).tril()),
     [SHORTCUT, "mha.padding_mask"]),
    (both(lambda ids, p: (ids != p)[:, None, None, :] & mha.causal_mask(ids.shape[1])), [SHORTCUT, "mha.causal_mask"]),
    (both(lambda ids, p: mha.padding_mask(ids, p) & mha.causal_mask(ids.shape[1])),  # student r3 L7: a mask's hint
     [SHORTCUT, "mha.padding_mask", "比较运算", "torch.tril", "自己搭出掩码"]),
    (both(lambda ids, p: (ids != p) @ torch.ones(3, 3)), ["运行时抛出了"]),  # a torch error inside the student's code
    (lambda ids, p, h: None, ["返回了 None"]),
    # the second mask, nn.MultiheadAttention's attn_mask
    (both(decoder_ok, lambda ours, h: ours.expand(ours.shape[0], h, *ours.shape[2:]).reshape(-1, *ours.shape[2:])),
     ["没有取反", "不许看"]),
    (both(decoder_ok, lambda ours, h: (~ours[:, 0]).repeat(h, 1, 1)), ["顺序错了", "b·h + i", "repeat_interleave"]),
    # heads outer without repeat: the message says what the order is, repeat only as an example
    (both(decoder_ok, lambda ours, h: (~ours[:, 0]).expand(h, -1, -1, -1).reshape(-1, *ours.shape[-2:])),
     ["顺序错了", "第 i·B + b 张", "头在外层", "例如 repeat(h, 1, 1)"]),
    (both(decoder_ok, lambda ours, h: ours[:, 0].repeat(h, 1, 1)), ["顺序错了，而且没有取反"]),
    (both(decoder_ok, lambda ours, h: ~ours[:, 0]), ["少了头", "(B·h, L, L)"]),
    (both(decoder_ok, lambda ours, h: ~ours.expand(ours.shape[0], h, *ours.shape[2:])), ["4 维", "(B·h, L, S)"]),
    (both(decoder_ok, lambda ours, h: ~ours), ["4 维"]),
    (both(decoder_ok, lambda ours, h: ~torch.ones(ours.shape[-1], ours.shape[-1], dtype=torch.bool).tril()),
     ["(L, L)", "装不下每句不同位置的 PAD"]),
    (both(decoder_ok, lambda ours, h: theirs_expand(ours, h).float()), ["dtype", "torch.bool"]),
    (both(decoder_ok, lambda ours, h: torch.zeros(theirs_expand(ours, h).shape).masked_fill(theirs_expand(ours, h), -torch.inf)),
     ["加法掩码", "torch.bool"]),  # review r10 L5: a float 0/-inf attn_mask, not a NaN in the student's arithmetic
    (both(decoder_ok, lambda ours, h: torch.zeros(theirs_expand(ours, h).shape).masked_fill(theirs_expand(ours, h), -1e9)),
     ["加法掩码", "torch.bool"]),  # review r11 L2: a finite additive mask too
    (both(lambda ids, p: torch.zeros(decoder_ok(ids, p).shape).masked_fill(~decoder_ok(ids, p), -torch.inf)),
     ["第一个", "加法掩码", "torch.bool"]),  # review r11 L2: the first mask as an additive one
    (both(decoder_ok, lambda ours, h: mha.masks.to_torch_attn_mask(theirs_expand(~ours, h))), [SHORTCUT, "to_torch_attn_mask"]),
    (lambda ids, p, h: decoder_ok(ids, p), ["只返回了一个掩码", "(ours, theirs)"]),
    (lambda ids, p, h: (decoder_ok(ids, p),), ["两个掩码"]),
    (decoder_ok, ["参数"]),  # the old two-argument signature
    (raise_value_error, ["ValueError: boom"]),
])


# ---------------------------------------------------------------- 10.3 a (B, S) mask handed over three ways
ALIGN = {"m": lambda b, i, t: t, "m[:, None]": lambda b, i, t: i, "right": ["m[:, None, None]"]}


def rows_by_experiment(expand):
    """An honest answer: mark row r of a (3, 5) mask at key r, broadcast, read off which row reached (b, i, t)."""
    def fn(b, i, t):
        m = ~torch.eye(3, 5, dtype=torch.bool)
        hidden = torch.zeros(3, 3, 3, 5).masked_fill(~expand(m), 1.0)
        return hidden[b, i, t].argmax()  # a 0-d tensor counts as an int
    return fn


ALIGN_RIGHT = answers_for(check_mask_alignment, [
    ALIGN,
    {"m": rows_by_experiment(lambda m: m), "m[:, None]": rows_by_experiment(lambda m: m[:, None]),
     "right": ("m[:, None, None]",)},
    {**ALIGN, "right": "m[:, None, None]"},  # one name alone
])
ALIGN_NOT_DONE = answers_for(check_mask_alignment, [{**ALIGN, "right": ...}])
ALIGN_WRONG = mistakes_for(check_mask_alignment, [
    ({**ALIGN, "m": lambda b, i, t: b}, ["总是 b", "query 的轴 L"]),
    ({**ALIGN, "m": lambda b, i, t: i}, ["总是 i", "补出来的 1"]),
    ({**ALIGN, "m[:, None]": lambda b, i, t: b}, ["总是 b", "头的轴 h"]),
    ({**ALIGN, "m[:, None]": lambda b, i, t: t}, ["总是 t", "中间那个 1"]),
    ({**ALIGN, "m": lambda b, i, t: (b + t) % 3}, "先写出两者对齐后的形状"),
    ({**ALIGN, "right": ["m", "m[:, None, None]"]}, ["m 不对", "B = L 时不报错"]),
    ({**ALIGN, "right": ["m[:, None]", "m[:, None, None]"]}, ["B = h 时不报错"]),
    ({**ALIGN, "right": []}, "漏了"),
    ({**ALIGN, "right": ["m[:, :, None]"]}, "不认识的名字"),
    ({"m": ALIGN["m"]}, "缺少键"),
])


# ---------------------------------------------------------------- the tables, run
test_right_answers_pass = right_answers(WINDOW_RIGHT, DECODER_RIGHT, ALIGN_RIGHT)
test_wrong_answers_are_named = wrong_answers(WINDOW_WRONG, DECODER_WRONG, ALIGN_WRONG)
test_stubs_are_not_done = not_done_answers(ALIGN_NOT_DONE)
test_garbage_gets_a_verdict = wrong_answers(every([check_window_mask, check_decoder_mask], RETURNED_GARBAGE))


@pytest.mark.parametrize("checker, answer", [(check_window_mask, window_printing), (check_decoder_mask, decoder_printing)])
def test_honest_answers_that_print_pass(capsys, checker, answer):
    """Printing with mha.fmt while debugging is allowed: the verdict (the last line) is a pass."""
    ok, last = verdict_allowing_prints(capsys, checker, answer)
    assert ok is True and "✅" in last, last


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
    (check_cache_step_mask, {"buggy_sees": [0], "mask": lambda L, S: mha.causal_mask(L, S).clone()},
     ["不能调用现成的", "自己搭出掩码"]),
    (check_cache_step_mask, {"buggy_sees": [0]}, "缺少键"),
])
