"""Exercise checkers of chapter 05: references pass, stubs are "not done", named mistakes fail, garbage never raises."""
import math

import pytest
import torch

from mha.exercises import check_attention, check_dot_product_variance, check_scores_shape, results


def verdict(capsys, checker, answer):
    ok = checker(answer, record=False)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out  # exactly one verdict line
    return ok, out


# ---------------------------------------------------------------- 5.1
def test_scores_shape_reference(capsys):
    ok, out = verdict(capsys, check_scores_shape, (3, 4, 5, 7))
    assert ok and "✅" in out
    assert check_scores_shape(torch.Size([3, 4, 5, 7]), record=False)
    assert check_scores_shape([3, 4, 5, 7], record=False)


@pytest.mark.parametrize("stub", [None, ..., (3, 4, ..., 7)])
def test_scores_shape_stub(capsys, stub):
    ok, out = verdict(capsys, check_scores_shape, stub)
    assert not ok and "还没完成" in out


@pytest.mark.parametrize("answer, words", [
    ((3, 4, 5, 16), "weights @ V"),
    ((3, 4, 7, 5), "放反"),
    ((3, 4, 5, 5), "方阵"),
    ((3, 4, 7, 7), "方阵"),
    ((3, 5, 7), "少了头"),
    ((3, 5, 4, 7), "轴顺序"),
    ((1, 2, 3, 4), "提示"),
])
def test_scores_shape_mistakes(capsys, answer, words):
    ok, out = verdict(capsys, check_scores_shape, answer)
    assert not ok and "❌" in out and words in out


@pytest.mark.parametrize("garbage", ["(3, 4, 5, 7)", 42, 3.5, (3.0, 4, 5, 7), (True, 4, 5, 7), object(), print])
def test_scores_shape_garbage(capsys, garbage):
    ok, out = verdict(capsys, check_scores_shape, garbage)
    assert ok is False and "❌" in out


# ---------------------------------------------------------------- 5.2
def test_variance_reference(capsys):
    ok, out = verdict(capsys, check_dot_product_variance, (256, 1))
    assert ok and "✅" in out
    assert check_dot_product_variance([256.0, 1.0], record=False)
    assert check_dot_product_variance((250, 1.02), record=False)  # a measured value is fine


@pytest.mark.parametrize("stub", [None, ..., (..., 1), (256, None)])
def test_variance_stub(capsys, stub):
    ok, out = verdict(capsys, check_dot_product_variance, stub)
    assert not ok and "还没完成" in out


@pytest.mark.parametrize("answer, words", [
    ((16, 1), "标准差"),
    ((1, 1), "随 d_k 增长"),
    ((256, 16), "(√d_k)²"),
    ((256, 1 / 256), "多除了一次"),
    ((256, 256), "没有变小"),
    ((100, 1), "一共 256 项"),
])
def test_variance_mistakes(capsys, answer, words):
    ok, out = verdict(capsys, check_dot_product_variance, answer)
    assert not ok and "❌" in out and words in out


@pytest.mark.parametrize("garbage", ["256, 1", 42, (256,), (256, 1, 1), (256, "1"), (math.nan, 1), (256, math.inf)])
def test_variance_garbage(capsys, garbage):
    ok, out = verdict(capsys, check_dot_product_variance, garbage)
    assert ok is False and "❌" in out


# ---------------------------------------------------------------- 5.3
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


def test_attention_reference(capsys):
    ok, out = verdict(capsys, check_attention, attention_reference)
    assert ok and "✅" in out


def test_attention_lecture_style_passes(capsys):
    ok, out = verdict(capsys, check_attention, attention_lecture)
    assert ok and "✅" in out


def test_attention_mha_function_passes(capsys):
    import mha
    ok, out = verdict(capsys, check_attention, lambda q, k, v, mask: mha.scaled_dot_product_attention(q, k, v, mask)[0])
    assert ok and "✅" in out


def _stub_raise(q, k, v, mask=None):
    raise NotImplementedError


def _stub_ellipsis(q, k, v, mask=None):
    ...
    return ...


@pytest.mark.parametrize("stub", [None, ..., _stub_raise, _stub_ellipsis])
def test_attention_stub(capsys, stub):
    ok, out = verdict(capsys, check_attention, stub)
    assert not ok and "还没完成" in out


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


@pytest.mark.parametrize("fn, words", [
    (_make(scale=False), "忘了除以 √d_k"),
    (_make(dim=-2), "softmax 沿错了轴"),
    (_make(dim=1), "softmax 沿错了轴"),
    (_make(polarity=False), "掩码方向反了"),
    (_make(when="after", fill=0.0), "在 softmax 之后才用掩码"),
    (_make(when="after", fill=-1e9), "在 softmax 之后才用掩码"),
    (_make(when="after", fill=float("-inf")), "在 softmax 之后才用掩码"),
    (_make(returns="weights"), "返回的是注意力权重"),
    (_make(returns="both"), "tuple"),
    (_make(use_mask=False), "没有用上 mask"),
    (_make(fill=float("-inf")), "NaN"),
    (lambda q, k, v, mask=None: q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)) @ v, "忘了 softmax"),
    (lambda q, k, v, mask=None: torch.softmax(q @ k.transpose(-2, -1) / q.size(-1), -1) @ v, "除以的是 d_k"),
])
def test_attention_mistakes(capsys, fn, words):
    ok, out = verdict(capsys, check_attention, fn)
    assert not ok and "❌" in out and words in out, out


def test_attention_in_place_mask_fill_is_named(capsys):
    def attention(q, k, v, mask=None):
        q.div_(math.sqrt(q.size(-1)))
        scores = q @ k.transpose(-2, -1)
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e9)
        return torch.softmax(scores, -1) @ v
    ok, out = verdict(capsys, check_attention, attention)
    assert not ok and "修改了输入" in out


def _raises_value_error(q, k, v, mask=None):
    raise ValueError("boom")


@pytest.mark.parametrize("garbage", [
    "attention", 42, _raises_value_error,
    lambda q, k, v, mask=None: torch.full_like(q, math.nan),
    lambda q, k, v, mask=None: attention_reference(q, k, v, mask).double(),
    lambda q, k, v, mask=None: attention_reference(q, k, v, mask)[..., :2],
    lambda q, k, v, mask=None: attention_reference(q, k, v, mask).tolist(),
    lambda q, k, v: q,  # wrong signature
])
def test_attention_garbage(capsys, garbage):
    ok, out = verdict(capsys, check_attention, garbage)
    assert ok is False and "❌" in out


def test_results_registry_lists_chapter():
    assert set(results("ch05")) == {"5.1", "5.2", "5.3"}
