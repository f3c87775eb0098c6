"""Chapter 10 checkers, table-driven: every right answer style passes, stubs are "not done",
every wrong or forbidden answer fails with a verdict that names it, nothing reaches the
checker's own error branch (``verdict`` asserts that)."""
import numpy as np
import pytest
import torch
from torch import nn

import mha
from mha.exercises import check_causal_mask, check_combine_masks, check_cross_attention_shapes
from exercise_support import STUBS, raise_value_error, verdict

SHORTCUT = "不能调用现成的"
MUTATED = "修改了输入"


def run(capsys, check, answer, ok, needles=()):
    got, out = verdict(capsys, check, answer)
    assert got is ok, out
    assert ("✅" if ok else ("⏳" if "还没完成" in needles else "❌")) in out, out
    for needle in needles:
        assert needle in out, out


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


CAUSAL_RIGHT = [
    causal_ok,
    causal_arange,
    causal_loop,
    lambda L: torch.tril(torch.ones(L, L)).bool(),
    lambda L: ~torch.ones(L, L, dtype=torch.bool).triu(1),
    lambda L: torch.ones(L, L, dtype=torch.bool).tril().contiguous().view(L, L),
]

CAUSAL_WRONG = [
    (lambda L: torch.ones(L, L, dtype=torch.bool).triu(), ["上三角"]),
    (lambda L: torch.ones(L, L, dtype=torch.bool).triu(1), ["极性反了"]),
    (lambda L: torch.ones(L, L, dtype=torch.bool).tril(-1), ["对角线"]),
    (lambda L: torch.ones(L, L).tril(), ["dtype", "torch.bool"]),
    (lambda L: torch.ones(L, L, dtype=torch.long).tril(), ["dtype"]),
    (lambda L: torch.ones(L, L, dtype=torch.bool), ["全是 True"]),
    (lambda L: torch.ones(L, L, dtype=torch.bool).tril()[None, None], ["(L, L)", "不必自己加轴"]),
    (lambda L: causal_ok(4), ["形状应该是", "L=1"]),  # a fixed size
    (lambda L: causal_ok(L) if L < 5 else causal_ok(L).triu(), ["L=6"]),  # right only for small L
    (lambda L: nn.Transformer.generate_square_subsequent_mask(L), ["加性掩码", "bool"]),
    (lambda L: mha.causal_mask(L), [SHORTCUT, "mha.masks.causal_mask"]),
    (lambda L: mha.causal_mask(L, L).clone(), [SHORTCUT, "causal_mask"]),
    (lambda L: None, ["返回了 None"]),
    (raise_value_error, ["ValueError: boom"]),
]


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


COMBINE_RIGHT = [
    combine_ok,
    lambda pad, causal: pad * causal,  # bool * bool stays bool
    lambda pad, causal: torch.logical_and(pad, causal),
    lambda pad, causal: (pad.int() * causal.int()).bool(),
    combine_expand,
    combine_loop,
    combine_logical_and_,
]

COMBINE_WRONG = [
    (lambda pad, causal: pad | causal, ["“或”"]),
    (lambda pad, causal: ~(pad & causal), ["极性反了"]),
    (lambda pad, causal: causal.expand(pad.shape[0], 1, *causal.shape).clone(), ["只用了因果掩码"]),
    (lambda pad, causal: pad.expand(pad.shape[0], 1, causal.shape[0], pad.shape[-1]).clone(),
     ["只用了 padding mask"]),
    (lambda pad, causal: (pad & causal)[:, 0], ["少了头的轴"]),
    (lambda pad, causal: pad.int() * causal.int(), ["dtype"]),
    # the `causal` argument ignored: caught by non-square (L, S) masks and two different causal arguments
    (combine_ignores_causal, ["没有用参数 causal"]),
    (combine_own_square, ["没有用参数 causal", "(B, 1, S, S)"]),
    # the caller's masks changed in place, named by the guard
    (combine_pad_in_place, [MUTATED, "参数 pad"]),
    (combine_causal_in_place, [MUTATED, "参数 causal"]),
    (combine_via_mha, [SHORTCUT, "mha.masks.normalize_mask"]),
    (lambda pad, causal: None, ["返回了 None"]),
    (raise_value_error, ["ValueError: boom"]),
]


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
    def fn(*args):
        out = shapes_ok(*args)
        return {k: (convert(v) if keys is None or k in keys else v) for k, v in out.items()}
    return fn


def shapes_with(**changes):
    def fn(B, L, S, d_model, n_heads):
        d_k = d_model // n_heads
        env = dict(B=B, L=L, S=S, d_model=d_model, h=n_heads, d_k=d_k)
        out = shapes_ok(B, L, S, d_model, n_heads)
        for key, template in changes.items():
            out[key] = tuple(env[name] if isinstance(name, str) else name for name in template)
        return out
    return fn


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


def shapes_missing(*args):
    out = shapes_ok(*args)
    del out["heads"]
    return out


SHAPES_RIGHT = [
    shapes_ok,
    shapes_map(list, ["mask"]),
    shapes_map(torch.Size, ["output"]),
    shapes_map(lambda s: tuple(np.int64(n) for n in s)),  # numpy integers
    shapes_map(lambda s: tuple(torch.tensor(n) for n in s)),  # 0-d torch integers
    shapes_map(lambda s: tuple(float(n) for n in s)),  # integral floats count as integers everywhere
    lambda b, l, s, d, h: shapes_ok(b, l, s, d, h),  # renamed arguments
]

SHAPES_WRONG = [
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
    (shapes_missing, ["缺少", "heads"]),
    (shapes_map(lambda s: None, ["weights"]), ['shapes["weights"]', "是 None"]),
    (shapes_map(lambda s: (s[0] + 0.5,) + s[1:], ["k"]), ['shapes["k"]', "应该是整数"]),
    (shapes_map(lambda s: (np.bool_(True),) + s[1:], ["k"]), ["布尔值"]),
    (shapes_map(lambda s: torch.zeros(s), ["q"]), ["tuple(t.shape)"]),
    (shapes_by_running_mha, [SHORTCUT, "mha.layer.MultiHeadAttention"]),
    (shapes_by_running_torch, [SHORTCUT, "nn.MultiheadAttention"]),
    (lambda *a: None, ["返回了 None"]),
]

SHAPES_STUBS = STUBS + [lambda *a: {k: ... for k in shapes_ok(1, 1, 1, 2, 1)}, shapes_map(lambda s: ..., ["output"])]


# ---------------------------------------------------------------- the tables, run

RIGHT = ([(check_causal_mask, fn) for fn in CAUSAL_RIGHT]
         + [(check_combine_masks, fn) for fn in COMBINE_RIGHT]
         + [(check_cross_attention_shapes, fn) for fn in SHAPES_RIGHT])

WRONG = ([(check_causal_mask, fn, words) for fn, words in CAUSAL_WRONG]
         + [(check_combine_masks, fn, words) for fn, words in COMBINE_WRONG]
         + [(check_cross_attention_shapes, fn, words) for fn, words in SHAPES_WRONG])

NOT_DONE = ([(check_causal_mask, s) for s in STUBS] + [(check_combine_masks, s) for s in STUBS]
            + [(check_cross_attention_shapes, s) for s in SHAPES_STUBS])

GARBAGE = [
    "a string",
    42,
    lambda *a: float("nan"),
    lambda *a: torch.full((4, 4), float("nan")),
    lambda *a: torch.zeros(2, 2, dtype=torch.int8),
    lambda *a: torch.zeros(4, 4, dtype=torch.complex64),
    lambda *a: torch.zeros(7),
    lambda *a: np.tril(np.ones((4, 4), dtype=bool)),
    lambda *a: "not a tensor",
    lambda *a: {"q": "x"},
    lambda *a: {k: "x" for k in shapes_ok(1, 1, 1, 2, 1)},
    lambda *a: {k: (1.5, 2) for k in shapes_ok(1, 1, 1, 2, 1)},
    lambda *a: {k: None for k in shapes_ok(1, 1, 1, 2, 1)},
    lambda *a: (torch.zeros(1), torch.zeros(1)),
    lambda: None,  # wrong number of arguments
]


def _name(value):
    return getattr(value, "__name__", None) or repr(value)[:30]


@pytest.mark.parametrize("check, answer", RIGHT, ids=[f"{c.exercise_id}-{_name(a)}-{i}" for i, (c, a) in enumerate(RIGHT)])
def test_right_answers_pass(capsys, check, answer):
    run(capsys, check, answer, True)


@pytest.mark.parametrize("check, answer", NOT_DONE, ids=[f"{c.exercise_id}-{i}" for i, (c, _) in enumerate(NOT_DONE)])
def test_stubs_are_not_done(capsys, check, answer):
    run(capsys, check, answer, False, ["还没完成"])


@pytest.mark.parametrize("check, answer, words", WRONG,
                         ids=[f"{c.exercise_id}-{'+'.join(w)}-{i}" for i, (c, _, w) in enumerate(WRONG)])
def test_wrong_answers_are_named(capsys, check, answer, words):
    run(capsys, check, answer, False, words)


@pytest.mark.parametrize("check", [check_causal_mask, check_combine_masks, check_cross_attention_shapes])
@pytest.mark.parametrize("garbage", GARBAGE, ids=[f"garbage-{i}" for i in range(len(GARBAGE))])
def test_garbage_gets_a_verdict(capsys, check, garbage):
    ok, out = verdict(capsys, check, garbage)
    assert not ok and "❌" in out, out


def test_combine_tries_non_square_masks():
    """10.2 is tried with L < S and with two different causal arguments of the same shape."""
    from mha.exercises.ch10 import COMBINE_CASES, _combine_causals

    shapes = [(L, len(ids[0])) for ids, _, L in COMBINE_CASES]
    assert any(L < S for L, S in shapes) and any(L == S for L, S in shapes)
    assert any(len(_combine_causals(L, S)) == 2 for L, S in shapes)


def test_cross_attention_key_matches_the_layer():
    """The answer key is computed by running mha; it agrees with the worked-out shapes."""
    from mha.exercises.ch10 import _cross_shapes

    assert _cross_shapes(2, 3, 5, 8, 2) == shapes_ok(2, 3, 5, 8, 2)
