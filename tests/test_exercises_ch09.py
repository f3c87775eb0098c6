"""Chapter 09 checkers: the reference passes, stubs are "not done", named mistakes fail, garbage never raises."""
import math

import pytest
import torch

from mha.exercises import check_middle_widths, check_one_head_weights, check_padding_mask
from exercise_support import STUBS
from exercise_support import raise_value_error as crashes


# ---------------------------------------------------------------- 9.1

def pad_ok(ids, pad_id):
    return (ids != pad_id)[:, None, None, :]


def pad_ok_unsqueeze(ids, pad_id):
    return (ids != pad_id).unsqueeze(1).unsqueeze(2)


PAD_WRONG = {
    "polarity": (lambda ids, p: (ids == p)[:, None, None, :], "极性反了"),
    "shape (B, S)": (lambda ids, p: ids != p, "(B, S)"),
    "int dtype": (lambda ids, p: (ids != p).long()[:, None, None, :], "dtype"),
    "float dtype": (lambda ids, p: (ids != p).float()[:, None, None, :], "dtype"),
    "hard-coded 0": (lambda ids, p: (ids != 0)[:, None, None, :], "写死"),
    "wrong layout": (lambda ids, p: (ids != p)[:, :, None, None], "头的轴和 query 的轴都写成 1"),
}


def pad_mutates(ids, pad_id):
    ids[ids == pad_id] = -1
    return (ids != -1)[:, None, None, :]


@pytest.mark.parametrize("fn", [pad_ok, pad_ok_unsqueeze])
def test_padding_mask_reference_passes(fn, capsys):
    assert check_padding_mask(fn, record=False) is True
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("stub", STUBS)
def test_padding_mask_stub(stub, capsys):
    assert check_padding_mask(stub, record=False) is False
    assert "还没完成" in capsys.readouterr().out


@pytest.mark.parametrize("name", list(PAD_WRONG))
def test_padding_mask_named_mistakes(name, capsys):
    fn, needle = PAD_WRONG[name]
    assert check_padding_mask(fn, record=False) is False
    out = capsys.readouterr().out
    assert "❌" in out and needle in out, out


def test_padding_mask_mutation(capsys):
    assert check_padding_mask(pad_mutates, record=False) is False
    assert "修改了输入" in capsys.readouterr().out


# ---------------------------------------------------------------- 9.2

def weights_ok(q_proj, k_proj, head, n_heads, key_mask):
    d_k = q_proj.shape[-1] // n_heads
    q_i = q_proj[:, head * d_k:(head + 1) * d_k]
    k_i = k_proj[:, head * d_k:(head + 1) * d_k]
    scores = q_i @ k_i.T / math.sqrt(d_k)
    return torch.softmax(scores.masked_fill(~key_mask, -1e9), dim=-1)


def _cols(q_proj, k_proj, head, n_heads):
    d_k = q_proj.shape[-1] // n_heads
    return q_proj[:, head * d_k:(head + 1) * d_k], k_proj[:, head * d_k:(head + 1) * d_k], d_k


def w_no_scale(q, k, head, n, m):
    q_i, k_i, d_k = _cols(q, k, head, n)
    return torch.softmax((q_i @ k_i.T).masked_fill(~m, -1e9), dim=-1)


def w_dmodel_scale(q, k, head, n, m):
    q_i, k_i, d_k = _cols(q, k, head, n)
    return torch.softmax((q_i @ k_i.T / math.sqrt(q.shape[-1])).masked_fill(~m, -1e9), dim=-1)


def w_axis0(q, k, head, n, m):
    q_i, k_i, d_k = _cols(q, k, head, n)
    return torch.softmax((q_i @ k_i.T / math.sqrt(d_k)).masked_fill(~m, -1e9), dim=0)


def w_polarity(q, k, head, n, m):
    q_i, k_i, d_k = _cols(q, k, head, n)
    return torch.softmax((q_i @ k_i.T / math.sqrt(d_k)).masked_fill(m, -1e9), dim=-1)


def w_zero_after(q, k, head, n, m):
    q_i, k_i, d_k = _cols(q, k, head, n)
    return torch.softmax(q_i @ k_i.T / math.sqrt(d_k), dim=-1).masked_fill(~m, 0.0)


def w_no_mask(q, k, head, n, m):
    q_i, k_i, d_k = _cols(q, k, head, n)
    return torch.softmax(q_i @ k_i.T / math.sqrt(d_k), dim=-1)


def w_interleaved(q, k, head, n, m):
    d_k = q.shape[-1] // n
    s = q[:, head::n] @ k[:, head::n].T / math.sqrt(d_k)
    return torch.softmax(s.masked_fill(~m, -1e9), dim=-1)


def w_one_based(q, k, head, n, m):
    return weights_ok(q, k, (head + 1) % n, n, m)


def w_transposed(q, k, head, n, m):
    return weights_ok(q, k, head, n, m).T


WEIGHTS_WRONG = {
    "no sqrt(d_k)": (w_no_scale, "忘了除以 √d_k"),
    "sqrt(d_model)": (w_dmodel_scale, "√d_model"),
    "softmax axis": (w_axis0, "softmax 的轴错了"),
    "polarity": (w_polarity, "极性反了"),
    "zero after softmax": (w_zero_after, "softmax 之后"),
    "no mask": (w_no_mask, "没有用掩码"),
    "interleaved heads": (w_interleaved, "[i::n_heads]"),
    "other head": (w_one_based, "取成了相邻的另一个头"),
    "transposed": (w_transposed, "(S, L)"),
}


def test_one_head_weights_reference_passes(capsys):
    assert check_one_head_weights(weights_ok, record=False) is True
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("stub", STUBS)
def test_one_head_weights_stub(stub, capsys):
    assert check_one_head_weights(stub, record=False) is False
    assert "还没完成" in capsys.readouterr().out


@pytest.mark.parametrize("name", list(WEIGHTS_WRONG))
def test_one_head_weights_named_mistakes(name, capsys):
    fn, needle = WEIGHTS_WRONG[name]
    assert check_one_head_weights(fn, record=False) is False
    out = capsys.readouterr().out
    assert "❌" in out and needle in out, out


# ---------------------------------------------------------------- 9.3

def widths_ok(B, L, d_model, n_heads, d_k, d_v):
    h = n_heads
    return {
        "q_proj": (B, L, h * d_k), "v_proj": (B, L, h * d_v),
        "q": (B, h, L, d_k), "k": (B, h, L, d_k), "v": (B, h, L, d_v),
        "scores": (B, h, L, L), "heads": (B, h, L, d_v),
        "concat": (B, L, h * d_v), "output": (B, L, d_model),
    }


def widths_ok_sizes(B, L, d_model, n_heads, d_k, d_v):
    out = widths_ok(B, L, d_model, n_heads, d_k, d_v)
    out["output"] = torch.Size(out["output"])
    out["scores"] = list(out["scores"])
    return out


def widths_with(**changes):
    def fn(B, L, d_model, n_heads, d_k, d_v):
        out = widths_ok(B, L, d_model, n_heads, d_k, d_v)
        env = dict(B=B, L=L, d_model=d_model, h=n_heads, d_k=d_k, d_v=d_v,
                   hd_k=n_heads * d_k, hd_v=n_heads * d_v, d_model_h=d_model // n_heads)
        for key, template in changes.items():
            out[key] = tuple(env[n] if isinstance(n, str) else n for n in template)
        return out
    return fn


WIDTHS_WRONG = {
    "concat = d_model": (widths_with(concat=("B", "L", "d_model")), "h·d_v"),
    "q_proj = d_model": (widths_with(q_proj=("B", "L", "d_model")), "h·d_k"),
    "V uses d_k": (widths_with(v=("B", "h", "L", "d_k"), heads=("B", "h", "L", "d_k")), "不是 d_k"),
    "scores depend on d_k": (widths_with(scores=("B", "h", "L", "d_k")), "和 d_k、d_v 无关"),
    "output stays narrow": (widths_with(output=("B", "L", "hd_v")), "映射回 d_model"),
    "d_k = d_model / h": (widths_with(q=("B", "h", "L", "d_model_h")), "不再是 d_model / h"),
}


@pytest.mark.parametrize("fn", [widths_ok, widths_ok_sizes])
def test_middle_widths_reference_passes(fn, capsys):
    assert check_middle_widths(fn, record=False) is True
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("stub", STUBS + [lambda *a: {k: ... for k in widths_ok(1, 1, 2, 1, 1, 1)}])
def test_middle_widths_stub(stub, capsys):
    assert check_middle_widths(stub, record=False) is False
    assert "还没完成" in capsys.readouterr().out


@pytest.mark.parametrize("name", list(WIDTHS_WRONG))
def test_middle_widths_named_mistakes(name, capsys):
    fn, needle = WIDTHS_WRONG[name]
    assert check_middle_widths(fn, record=False) is False
    out = capsys.readouterr().out
    assert "❌" in out and needle in out, out


def test_middle_widths_standard_only_fails(capsys):
    """An answer that assumes d_k = d_v = d_model / h everywhere is caught on the first config."""
    def standard(B, L, d_model, n_heads, d_k, d_v):
        return widths_ok(B, L, d_model, n_heads, d_model // n_heads, d_model // n_heads)

    assert check_middle_widths(standard, record=False) is False
    assert "❌" in capsys.readouterr().out


def test_middle_widths_missing_key(capsys):
    def partial(*args):
        out = widths_ok(*args)
        del out["concat"]
        return out

    assert check_middle_widths(partial, record=False) is False
    assert "concat" in capsys.readouterr().out


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
    lambda *a: (torch.zeros(1), torch.zeros(1)),
    lambda *a: {"q": "x"},
    lambda *a: {k: (1.5, 2) for k in widths_ok(1, 1, 2, 1, 1, 1)},
    lambda: None,  # wrong number of arguments
]


@pytest.mark.parametrize("check", [check_padding_mask, check_one_head_weights, check_middle_widths])
@pytest.mark.parametrize("garbage", GARBAGE)
def test_garbage_never_raises(check, garbage, capsys):
    assert check(garbage, record=False) is False
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and ("❌" in out or "⏳" in out), out


def test_crash_is_reported_with_its_error(capsys):
    assert check_padding_mask(crashes, record=False) is False
    assert "ValueError: boom" in capsys.readouterr().out
