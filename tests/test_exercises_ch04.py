"""Exercise checkers of chapter 04: references pass, stubs say "not done", each typical mistake is named."""
import pytest
import torch
from torch import nn

import mha
from mha.exercises import check_per_head_linears, check_split_heads, check_split_shape
from exercise_support import raise_not_implemented, raise_value_error, return_ellipsis


# ---------------------------------------------------------------- references
def split_shape_ref(B, L, d_model, n_heads):
    return (B, n_heads, L, d_model // n_heads)


def split_heads_ref(x, n_heads):
    B, L, d_model = x.shape
    return x.view(B, L, n_heads, d_model // n_heads).transpose(1, 2)


def per_head_linears_ref(W_q, n_heads):
    d_model = W_q.in_features
    d_k = d_model // n_heads
    smalls = []
    for i in range(n_heads):
        small = nn.Linear(d_model, d_k)
        with torch.no_grad():
            small.weight.copy_(W_q.weight[i * d_k:(i + 1) * d_k])
            small.bias.copy_(W_q.bias[i * d_k:(i + 1) * d_k])
        smalls.append(small)
    return smalls


CHECKERS = [
    (check_split_shape, split_shape_ref),
    (check_split_heads, split_heads_ref),
    (check_per_head_linears, per_head_linears_ref),
]


def _returns_nan(*args):
    return torch.full((1, 2, 3, 4), float("nan"))


@pytest.mark.parametrize("check, ref", CHECKERS)
def test_reference_passes(check, ref, capsys):
    assert check(ref) is True
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("check, ref", CHECKERS)
@pytest.mark.parametrize("stub", [raise_not_implemented, return_ellipsis, None, ...])
def test_stub_is_not_done(check, ref, stub, capsys):
    assert check(stub) is False
    assert "还没完成" in capsys.readouterr().out


@pytest.mark.parametrize("check, ref", CHECKERS)
@pytest.mark.parametrize("garbage", [
    "a string", 42, raise_value_error, _returns_nan,
    lambda *a: "text", lambda *a: torch.zeros(3, dtype=torch.long), lambda *a: torch.zeros(1, 2, 3),
    lambda *a: (1.5, 2), lambda *a: [None], lambda *a: [nn.Linear(2, 2)], lambda *a: nn.Linear(6, 3),
    lambda *a: [object()] * 8, lambda *a: 7,
])
def test_garbage_never_raises(check, ref, garbage, capsys):
    assert check(garbage) is False
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "❌" in out


def test_references_agree_with_mha():
    x = torch.randn(2, 4, 512)
    assert torch.equal(split_heads_ref(x, 8), mha.split_heads(x, 8))
    assert tuple(mha.split_heads(x, 8).shape) == split_shape_ref(2, 4, 512, 8)


# ---------------------------------------------------------------- 4.1 mistakes
@pytest.mark.parametrize("wrong, message", [
    (lambda B, L, d, h: (B, L, h, d // h), "还没 transpose"),
    (lambda B, L, d, h: (B, h, L, d), "不是整条 d_model"),
    (lambda B, L, d, h: (B, d // h, L, h), "h 和 d_k 的位置弄反了"),
    (lambda B, L, d, h: (B, h, d // h, L), "最后两维反了"),
    (lambda B, L, d, h: (h, L, d // h), "batch"),
    (lambda B, L, d, h: (B, h, L, d / h), "浮点数"),
    (lambda B, L, d, h: (2, 8, 4, 64), "应为 (B, h, L, d_k)"),
])
def test_split_shape_mistakes(wrong, message, capsys):
    assert check_split_shape(wrong) is False
    out = capsys.readouterr().out
    assert "❌" in out and message in out


# ---------------------------------------------------------------- 4.2 mistakes
def _view_without_transpose(x, n_heads):
    B, L, d_model = x.shape
    return x.view(B, n_heads, L, d_model // n_heads)


def _reshape_without_transpose(x, n_heads):
    B, L, d_model = x.shape
    return x.reshape(B, n_heads, L, -1)


def _forgot_transpose(x, n_heads):
    B, L, d_model = x.shape
    return x.view(B, L, n_heads, d_model // n_heads)


def _swapped_h_dk(x, n_heads):
    B, L, d_model = x.shape
    return x.view(B, L, d_model // n_heads, n_heads).transpose(1, 2)


def _interleaved(x, n_heads):
    B, L, d_model = x.shape
    return x.view(B, L, d_model // n_heads, n_heads).permute(0, 3, 1, 2)


def _mutates(x, n_heads):
    B, L, d_model = x.shape
    x.resize_(B, L, n_heads, d_model // n_heads)
    return x.transpose(1, 2)


def _hard_coded_64(x, n_heads):
    B, L, _ = x.shape
    return x.view(B, L, -1, 64).transpose(1, 2)


@pytest.mark.parametrize("wrong, message", [
    (_view_without_transpose, "没有先 view 成 (B, L, h, d_k)"),
    (_reshape_without_transpose, "混进同一个头"),
    (_forgot_transpose, "忘了 transpose(1, 2)"),
    (_swapped_h_dk, "h 和 d_k 用反了"),
    (_interleaved, "隔 h 取一个"),
    (_mutates, "修改了输入 x"),
    (_hard_coded_64, "运行时抛出了"),
    (lambda x, h: split_heads_ref(x, h) + 0.1, "数值不对"),
])
def test_split_heads_mistakes(wrong, message, capsys):
    assert check_split_heads(wrong) is False
    out = capsys.readouterr().out
    assert "❌" in out and message in out


def test_split_heads_contiguous_copy_is_fine(capsys):
    assert check_split_heads(lambda x, h: split_heads_ref(x, h).contiguous()) is True
    assert check_split_heads(mha.split_heads) is True


# ---------------------------------------------------------------- 4.3 mistakes
def _columns(W_q, n_heads):
    d_model = W_q.in_features
    d_k = d_model // n_heads
    smalls = per_head_linears_ref(W_q, n_heads)
    with torch.no_grad():
        for i, small in enumerate(smalls):
            small.weight.copy_(W_q.weight[:, i * d_k:(i + 1) * d_k].T)
    return smalls


def _no_bias(W_q, n_heads):
    d_model = W_q.in_features
    d_k = d_model // n_heads
    smalls = []
    for i in range(n_heads):
        small = nn.Linear(d_model, d_k, bias=False)
        with torch.no_grad():
            small.weight.copy_(W_q.weight[i * d_k:(i + 1) * d_k])
        smalls.append(small)
    return smalls


def _bias_not_copied(W_q, n_heads):
    d_model = W_q.in_features
    d_k = d_model // n_heads
    smalls = []
    for i in range(n_heads):
        small = nn.Linear(d_model, d_k)  # bias keeps its random init
        with torch.no_grad():
            small.weight.copy_(W_q.weight[i * d_k:(i + 1) * d_k])
        smalls.append(small)
    return smalls


def _reversed(W_q, n_heads):
    return per_head_linears_ref(W_q, n_heads)[::-1]


def _wrong_size(W_q, n_heads):
    return [nn.Linear(W_q.in_features, W_q.in_features) for _ in range(n_heads)]


def _too_few(W_q, n_heads):
    return per_head_linears_ref(W_q, n_heads)[:-1]


def _mutates_big(W_q, n_heads):
    smalls = per_head_linears_ref(W_q, n_heads)
    with torch.no_grad():
        W_q.weight.zero_()
    return smalls


def _bias_from_wrong_slice(W_q, n_heads):
    smalls = per_head_linears_ref(W_q, n_heads)
    with torch.no_grad():
        for small in smalls:
            small.bias.copy_(W_q.bias[:small.out_features])
    return smalls


@pytest.mark.parametrize("wrong, message", [
    (_columns, "按列切了 weight"),
    (_no_bias, "忘了把偏置也切过来"),
    (_bias_not_copied, "偏置不对"),
    (_bias_from_wrong_slice, "偏置不对"),
    (_reversed, "头的顺序反了"),
    (_wrong_size, "(d_k, d_model)"),
    (_too_few, "个小 Linear"),
    (_mutates_big, "改动了传入的大 Linear"),
    (lambda W_q, h: nn.ModuleList(per_head_linears_ref(W_q, h))[0], "list"),
])
def test_per_head_linears_mistakes(wrong, message, capsys):
    assert check_per_head_linears(wrong) is False
    out = capsys.readouterr().out
    assert "❌" in out and message in out


def test_per_head_linears_module_list_is_fine(capsys):
    assert check_per_head_linears(lambda W_q, h: nn.ModuleList(per_head_linears_ref(W_q, h))) is True
