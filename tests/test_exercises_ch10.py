"""Chapter 10 checkers: the reference passes, stubs are "not done", named mistakes fail, garbage never raises."""
import pytest
import torch

from mha.exercises import check_causal_mask, check_combine_masks, check_cross_attention_shapes
from exercise_support import STUBS
from exercise_support import raise_value_error as crashes


# ---------------------------------------------------------------- 10.1

def causal_ok(L):
    return torch.ones(L, L, dtype=torch.bool).tril()


def causal_ok_arange(L):
    i = torch.arange(L)
    return i[None, :] <= i[:, None]


CAUSAL_WRONG = {
    "upper triangle": (lambda L: torch.ones(L, L, dtype=torch.bool).triu(), "上三角"),
    "torch polarity": (lambda L: torch.ones(L, L, dtype=torch.bool).triu(1), "极性反了"),
    "diagonal excluded": (lambda L: torch.ones(L, L, dtype=torch.bool).tril(-1), "对角线"),
    "float dtype": (lambda L: torch.ones(L, L).tril(), "dtype"),
    "int dtype": (lambda L: torch.ones(L, L, dtype=torch.long).tril(), "dtype"),
    "all true": (lambda L: torch.ones(L, L, dtype=torch.bool), "全是 True"),
    "extra axes": (lambda L: torch.ones(L, L, dtype=torch.bool).tril()[None, None], "(L, L)"),
}


@pytest.mark.parametrize("fn", [causal_ok, causal_ok_arange])
def test_causal_reference_passes(fn, capsys):
    assert check_causal_mask(fn, record=False) is True
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("stub", STUBS)
def test_causal_stub(stub, capsys):
    assert check_causal_mask(stub, record=False) is False
    assert "还没完成" in capsys.readouterr().out


@pytest.mark.parametrize("name", list(CAUSAL_WRONG))
def test_causal_named_mistakes(name, capsys):
    fn, needle = CAUSAL_WRONG[name]
    assert check_causal_mask(fn, record=False) is False
    out = capsys.readouterr().out
    assert "❌" in out and needle in out, out


def test_causal_fixed_size_fails(capsys):
    assert check_causal_mask(lambda L: causal_ok(4), record=False) is False
    assert "形状应该是" in capsys.readouterr().out


# ---------------------------------------------------------------- 10.2

def combine_ok(pad, causal):
    return pad & causal


def combine_ok_mul(pad, causal):
    return pad * causal  # bool * bool stays bool


def combine_inplace(pad, causal):
    pad &= causal[0]
    return pad & causal


COMBINE_WRONG = {
    "or": (lambda pad, causal: pad | causal, "“或”"),
    "inverted": (lambda pad, causal: ~(pad & causal), "极性反了"),
    "causal only": (lambda pad, causal: causal.expand(pad.shape[0], 1, *causal.shape).clone(), "只用了因果掩码"),
    "pad only": (lambda pad, causal: pad.expand(pad.shape[0], 1, causal.shape[0], pad.shape[-1]).clone(),
                 "只用了 padding mask"),
    "squeezed": (lambda pad, causal: (pad & causal)[:, 0], "少了头的轴"),
    "int dtype": (lambda pad, causal: pad.int() * causal.int(), "dtype"),
    "mutates": (combine_inplace, "修改了输入"),
}


@pytest.mark.parametrize("fn", [combine_ok, combine_ok_mul])
def test_combine_reference_passes(fn, capsys):
    assert check_combine_masks(fn, record=False) is True
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("stub", STUBS)
def test_combine_stub(stub, capsys):
    assert check_combine_masks(stub, record=False) is False
    assert "还没完成" in capsys.readouterr().out


@pytest.mark.parametrize("name", list(COMBINE_WRONG))
def test_combine_named_mistakes(name, capsys):
    fn, needle = COMBINE_WRONG[name]
    assert check_combine_masks(fn, record=False) is False
    out = capsys.readouterr().out
    assert "❌" in out and needle in out, out


# ---------------------------------------------------------------- 10.3

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


def shapes_ok_variants(B, L, S, d_model, n_heads):
    out = shapes_ok(B, L, S, d_model, n_heads)
    out["mask"] = [B, 1, L, S]  # a list and the (B, 1, L, S) mask are accepted too
    out["output"] = torch.Size(out["output"])
    return out


def shapes_with(**changes):
    def fn(B, L, S, d_model, n_heads):
        d_k = d_model // n_heads
        env = dict(B=B, L=L, S=S, d_model=d_model, h=n_heads, d_k=d_k)
        out = shapes_ok(B, L, S, d_model, n_heads)
        for key, template in changes.items():
            out[key] = tuple(env[name] if isinstance(name, str) else name for name in template)
        return out
    return fn


SHAPES_WRONG = {
    "square scores": (shapes_with(scores=("B", "h", "L", "L"), weights=("B", "h", "L", "L")), "不是方阵"),
    "transposed scores": (shapes_with(scores=("B", "h", "S", "L")), "行是 query"),
    "output follows S": (shapes_with(output=("B", "S", "d_model")), "跟着 decoder 的 L"),
    "d_k = d_model": (shapes_with(q=("B", "h", "L", "d_model")), "d_k = d_model / n_heads"),
    "no transpose": (shapes_with(q=("B", "L", "h", "d_k")), "transpose"),
    "k from decoder": (shapes_with(k=("B", "h", "L", "d_k")), "来自编码器"),
    "mask on queries": (shapes_with(mask=("B", 1, 1, "L")), "屏蔽的是 key"),
    "mask (B, S)": (shapes_with(mask=("B", "S")), "(B, 1, 1, S)"),
    "q from encoder": (shapes_with(q=("B", "h", "S", "d_k")), "Q 来自 decoder"),
}


@pytest.mark.parametrize("fn", [shapes_ok, shapes_ok_variants])
def test_shapes_reference_passes(fn, capsys):
    assert check_cross_attention_shapes(fn, record=False) is True
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("stub", STUBS + [lambda *a: {k: ... for k in shapes_ok(1, 1, 1, 2, 1)}])
def test_shapes_stub(stub, capsys):
    assert check_cross_attention_shapes(stub, record=False) is False
    assert "还没完成" in capsys.readouterr().out


@pytest.mark.parametrize("name", list(SHAPES_WRONG))
def test_shapes_named_mistakes(name, capsys):
    fn, needle = SHAPES_WRONG[name]
    assert check_cross_attention_shapes(fn, record=False) is False
    out = capsys.readouterr().out
    assert "❌" in out and needle in out, out


def test_shapes_missing_key(capsys):
    def partial(*args):
        out = shapes_ok(*args)
        del out["heads"]
        return out

    assert check_cross_attention_shapes(partial, record=False) is False
    assert "heads" in capsys.readouterr().out


def test_shapes_fixed_answer_fails(capsys):
    assert check_cross_attention_shapes(lambda *a: shapes_ok(2, 3, 5, 8, 2), record=False) is False
    assert "❌" in capsys.readouterr().out


# ---------------------------------------------------------------- garbage, for every checker

GARBAGE = [
    "a string",
    42,
    crashes,
    lambda *a: float("nan"),
    lambda *a: torch.full((4, 4), float("nan")),
    lambda *a: torch.zeros(2, 2, dtype=torch.int8),
    lambda *a: torch.zeros(7),
    lambda *a: "not a tensor",
    lambda *a: {"q": "x"},
    lambda *a: {k: "x" for k in shapes_ok(1, 1, 1, 2, 1)},
    lambda *a: {k: (1.5, 2) for k in shapes_ok(1, 1, 1, 2, 1)},
    lambda *a: (torch.zeros(1), torch.zeros(1)),
    lambda: None,  # wrong number of arguments
]


@pytest.mark.parametrize("check", [check_causal_mask, check_combine_masks, check_cross_attention_shapes])
@pytest.mark.parametrize("garbage", GARBAGE)
def test_garbage_never_raises(check, garbage, capsys):
    assert check(garbage, record=False) is False
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and ("❌" in out or "⏳" in out), out
