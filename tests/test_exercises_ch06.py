"""Exercise checkers of chapter 06: references pass, stubs are "not done", named mistakes fail, garbage never raises."""
import math

import pytest
import torch

from mha.exercises import check_concat_shapes, check_head_from_concat, check_merge_heads, results


def verdict(capsys, checker, answer):
    ok = checker(answer, record=False)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out
    return ok, out


# ---------------------------------------------------------------- 6.1
def test_concat_shapes_reference(capsys):
    ok, out = verdict(capsys, check_concat_shapes, ((3, 5, 4, 16), (3, 5, 64)))
    assert ok and "✅" in out
    assert check_concat_shapes([torch.Size([3, 5, 4, 16]), [3, 5, 64]], record=False)


@pytest.mark.parametrize("stub", [None, ..., (..., ...), ((3, 5, 4, 16), ...)])
def test_concat_shapes_stub(capsys, stub):
    ok, out = verdict(capsys, check_concat_shapes, stub)
    assert not ok and "还没完成" in out


@pytest.mark.parametrize("answer, words", [
    (((3, 4, 5, 16), (3, 5, 64)), "交换第 1 轴"),
    (((3, 4, 16, 5), (3, 5, 64)), "transpose(2, 3)"),
    (((3, 5, 4, 16), (3, 4, 80)), "把 L 和 d_k 合并"),
    (((3, 5, 4, 16), (3, 5, 16)), "一个头的宽度"),
    (((3, 5, 4, 16), (3, 5, 4, 16)), "还是四维"),
    (((3, 5, 4, 16), (3, 64, 5)), "最后两维合并"),
])
def test_concat_shapes_mistakes(capsys, answer, words):
    ok, out = verdict(capsys, check_concat_shapes, answer)
    assert not ok and "❌" in out and words in out


@pytest.mark.parametrize("garbage", ["(3, 5, 64)", 42, (3, 5, 64), ((3, 5, 4, 16),), ("a", "b"), ((3.0,), (1,))])
def test_concat_shapes_garbage(capsys, garbage):
    ok, out = verdict(capsys, check_concat_shapes, garbage)
    assert ok is False and "❌" in out


# ---------------------------------------------------------------- 6.2
def merge_reference(x):
    B, h, L, d_k = x.shape
    x = x.transpose(1, 2).contiguous()  # (B, L, h, d_k)
    return x.view(B, L, h * d_k)  # (B, L, d_model)


def test_merge_reference(capsys):
    ok, out = verdict(capsys, check_merge_heads, merge_reference)
    assert ok and "✅" in out


def test_merge_alternatives_pass(capsys):
    assert check_merge_heads(lambda x: torch.cat(list(x.unbind(1)), dim=-1), record=False)
    assert check_merge_heads(lambda x: x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1), record=False)
    assert check_merge_heads(lambda x: x.permute(0, 2, 1, 3).flatten(2), record=False)


def _stub_raise(x):
    raise NotImplementedError


@pytest.mark.parametrize("stub", [None, ..., _stub_raise, lambda x: ...])
def test_merge_stub(capsys, stub):
    ok, out = verdict(capsys, check_merge_heads, stub)
    assert not ok and "还没完成" in out


def _mutates(x):
    x.transpose_(1, 2)
    return x.reshape(x.shape[0], x.shape[1], -1)


@pytest.mark.parametrize("fn, words", [
    (lambda x: x.transpose(1, 2).view(x.shape[0], x.shape[2], -1), "忘了 .contiguous()"),
    (lambda x: x.reshape(x.shape[0], x.shape[2], -1), "没有 transpose"),
    (lambda x: x.contiguous().view(x.shape[0], x.shape[2], -1), "没有 transpose"),
    (lambda x: torch.cat([x[:, i] for i in reversed(range(x.shape[1]))], dim=-1), "顺序反了"),
    (lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1), "交错"),
    (lambda x: x.transpose(1, 2), "还差一步"),
    (_mutates, "修改了输入"),
    (lambda x: x.transpose(1, 2).reshape(x.shape[0], -1, x.shape[3]), "形状应该是"),
])
def test_merge_mistakes(capsys, fn, words):
    ok, out = verdict(capsys, check_merge_heads, fn)
    assert not ok and "❌" in out and words in out, out


def _raises_value_error(x):
    raise ValueError("boom")


@pytest.mark.parametrize("garbage", [
    "merge", 42, _raises_value_error,
    lambda x: torch.full((x.shape[0], x.shape[2], x.shape[1] * x.shape[3]), math.nan),
    lambda x: merge_reference(x).double(),
    lambda x: merge_reference(x).long(),
    lambda x: merge_reference(x)[..., :-1],
    lambda x: merge_reference(x).numpy(),
    lambda: None,
])
def test_merge_garbage(capsys, garbage):
    ok, out = verdict(capsys, check_merge_heads, garbage)
    assert ok is False and "❌" in out


# ---------------------------------------------------------------- 6.3
def head_reference(concat, i, n_heads):
    d_k = concat.shape[-1] // n_heads
    return concat[..., i * d_k:(i + 1) * d_k]  # (B, L, d_k)


def test_head_reference(capsys):
    ok, out = verdict(capsys, check_head_from_concat, head_reference)
    assert ok and "✅" in out
    alt = lambda c, i, h: c.view(c.shape[0], c.shape[1], h, -1)[:, :, i]  # noqa: E731
    assert check_head_from_concat(alt, record=False)


@pytest.mark.parametrize("stub", [None, ..., lambda c, i, h: ...])
def test_head_stub(capsys, stub):
    ok, out = verdict(capsys, check_head_from_concat, stub)
    assert not ok and "还没完成" in out


def _width(c, h):
    return c.shape[-1] // h


@pytest.mark.parametrize("fn, words", [
    (lambda c, i, h: c[..., i::h], "步长切片"),
    (lambda c, i, h: c[..., (i + 1) * _width(c, h):(i + 2) * _width(c, h)], "下一个头"),
    (lambda c, i, h: c[..., (i - 1) * _width(c, h):i * _width(c, h)], "空张量"),
    (lambda c, i, h: c[..., max(i - 1, 0) * _width(c, h):max(i, 1) * _width(c, h)], "上一个头"),
    (lambda c, i, h: c[..., i * h:(i + 1) * h], "切片宽度用了 n_heads"),
    (lambda c, i, h: c.view(c.shape[0], h, c.shape[1], -1)[:, i], "打乱"),
])
def test_head_mistakes(capsys, fn, words):
    ok, out = verdict(capsys, check_head_from_concat, fn)
    assert not ok and "❌" in out and words in out, out


def _mutating(c, i, h):
    c.zero_()
    return head_reference(c, i, h)


@pytest.mark.parametrize("garbage", [
    "head", 42, _raises_value_error, _mutating,
    lambda c, i, h: torch.full_like(head_reference(c, i, h), math.nan),
    lambda c, i, h: head_reference(c, i, h).double(),
    lambda c, i, h: head_reference(c, i, h)[0],
    lambda c, i, h: head_reference(c, i, h).tolist(),
])
def test_head_garbage(capsys, garbage):
    ok, out = verdict(capsys, check_head_from_concat, garbage)
    assert ok is False and "❌" in out


def test_results_registry_lists_chapter():
    assert set(results("ch06")) == {"6.1", "6.2", "6.3"}
