"""Exercise checkers of chapter 07: references pass, stubs are "not done", named mistakes fail, garbage never raises."""
import math

import pytest
import torch

from mha.exercises import check_head_contributions, check_output_from_heads, check_w_o_params, results


def verdict(capsys, checker, answer):
    ok = checker(answer, record=False)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out
    return ok, out


def merge(heads):
    B, h, L, d_k = heads.shape
    return heads.transpose(1, 2).contiguous().view(B, L, h * d_k)  # (B, L, d_model)


# ---------------------------------------------------------------- 7.1
def test_params_reference(capsys):
    ok, out = verdict(capsys, check_w_o_params, 512 * 512 + 512)
    assert ok and "✅" in out
    assert check_w_o_params(262656.0, record=False)
    assert check_w_o_params(sum(p.numel() for p in torch.nn.Linear(512, 512).parameters()), record=False)


@pytest.mark.parametrize("stub", [None, ...])
def test_params_stub(capsys, stub):
    ok, out = verdict(capsys, check_w_o_params, stub)
    assert not ok and "还没完成" in out


@pytest.mark.parametrize("answer, words", [
    (512 * 512, "忘了 bias"),
    (8 * 64 * 64, "每个头各自一块"),
    (64 * 64, "每个头各自一块"),
    (4 * (512 * 512 + 512), "W_q、W_k、W_v"),
    (12345, "提示"),
])
def test_params_mistakes(capsys, answer, words):
    ok, out = verdict(capsys, check_w_o_params, answer)
    assert not ok and "❌" in out and words in out


@pytest.mark.parametrize("garbage", ["262656", (262656,), math.nan, math.inf, True, [1, 2]])
def test_params_garbage(capsys, garbage):
    ok, out = verdict(capsys, check_w_o_params, garbage)
    assert ok is False and "❌" in out


# ---------------------------------------------------------------- 7.2
def output_reference(heads, W_o):
    return W_o(merge(heads))  # (B, L, d_model)


def test_output_reference(capsys):
    ok, out = verdict(capsys, check_output_from_heads, output_reference)
    assert ok and "✅" in out
    explicit = lambda heads, W_o: merge(heads) @ W_o.weight.T + W_o.bias  # noqa: E731
    assert check_output_from_heads(explicit, record=False)


@pytest.mark.parametrize("stub", [None, ..., lambda heads, W_o: ...])
def test_output_stub(capsys, stub):
    ok, out = verdict(capsys, check_output_from_heads, stub)
    assert not ok and "还没完成" in out


@pytest.mark.parametrize("fn, words", [
    (lambda heads, W_o: merge(heads), "少了最终 Linear W^O"),
    (lambda heads, W_o: merge(heads) @ W_o.weight + W_o.bias, "没有转置"),
    (lambda heads, W_o: merge(heads) @ W_o.weight.T, "少了 bias"),
    (lambda heads, W_o: W_o(heads.reshape(heads.shape[0], heads.shape[2], -1)), "没有先 transpose"),
    (lambda heads, W_o: heads, "分头的形状"),
    (lambda heads, W_o: W_o(merge(heads)) * 2, "数值不对"),
])
def test_output_mistakes(capsys, fn, words):
    ok, out = verdict(capsys, check_output_from_heads, fn)
    assert not ok and "❌" in out and words in out, out


def _raises_value_error(*args):
    raise ValueError("boom")


def _mutating(heads, W_o):
    heads.mul_(2)
    return W_o(merge(heads))


@pytest.mark.parametrize("garbage", [
    "W_o", 42, _raises_value_error, _mutating,
    lambda heads, W_o: torch.full_like(output_reference(heads, W_o), math.nan),
    lambda heads, W_o: output_reference(heads, W_o).double(),
    lambda heads, W_o: output_reference(heads, W_o)[0],
    lambda heads, W_o: W_o(heads),
    lambda heads: heads,
])
def test_output_garbage(capsys, garbage):
    ok, out = verdict(capsys, check_output_from_heads, garbage)
    assert ok is False and "❌" in out


# ---------------------------------------------------------------- 7.3
def contributions_reference(heads, W_o):
    d_k = heads.shape[-1]
    W_O = W_o.weight.T  # (d_model, d_model), the W^O of the formula
    parts = [heads[:, i] @ W_O[i * d_k:(i + 1) * d_k] for i in range(heads.shape[1])]  # each (B, L, d_model)
    return torch.stack(parts, dim=1)  # (B, h, L, d_model)


def test_contributions_reference(capsys):
    ok, out = verdict(capsys, check_head_contributions, contributions_reference)
    assert ok and "✅" in out
    batched = lambda heads, W_o: heads @ W_o.weight.T.reshape(heads.shape[1], heads.shape[3], -1)  # noqa: E731
    assert check_head_contributions(batched, record=False)


@pytest.mark.parametrize("stub", [None, ..., lambda heads, W_o: ...])
def test_contributions_stub(capsys, stub):
    ok, out = verdict(capsys, check_head_contributions, stub)
    assert not ok and "还没完成" in out


def _rows(heads, W_o):
    d_k = heads.shape[-1]
    return torch.stack([heads[:, i] @ W_o.weight[i * d_k:(i + 1) * d_k] for i in range(heads.shape[1])], dim=1)


def _same_block(heads, W_o):
    d_k = heads.shape[-1]
    return torch.stack([heads[:, i] @ W_o.weight.T[:d_k] for i in range(heads.shape[1])], dim=1)


@pytest.mark.parametrize("fn, words", [
    (lambda heads, W_o: contributions_reference(heads, W_o) + W_o.bias, "都加了 bias"),
    (_rows, "行块"),
    (_same_block, "同一块"),
    (lambda heads, W_o: contributions_reference(heads, W_o).sum(dim=1), "加起来之后"),
    (lambda heads, W_o: contributions_reference(heads, W_o).transpose(1, 2), "头的轴应该在第 1 维"),
])
def test_contributions_mistakes(capsys, fn, words):
    ok, out = verdict(capsys, check_head_contributions, fn)
    assert not ok and "❌" in out and words in out, out


@pytest.mark.parametrize("garbage", [
    "W_o", 42, _raises_value_error,
    lambda heads, W_o: torch.full_like(contributions_reference(heads, W_o), math.nan),
    lambda heads, W_o: contributions_reference(heads, W_o).double(),
    lambda heads, W_o: contributions_reference(heads, W_o)[:, :1],
    lambda heads, W_o: [contributions_reference(heads, W_o)],
])
def test_contributions_garbage(capsys, garbage):
    ok, out = verdict(capsys, check_head_contributions, garbage)
    assert ok is False and "❌" in out


def test_results_registry_lists_chapter():
    assert set(results("ch07")) == {"7.1", "7.2", "7.3"}
