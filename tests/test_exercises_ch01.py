"""Tests for the chapter 01 checkers: reference passes, stubs are 'not done', wrong answers are named."""
import math

import pytest
import torch

from mha.exercises import check_changed_positions, check_output_shape, check_param_count, results


def verdict(capsys, checker, answer):
    ok = checker(answer, record=False)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, f"expected exactly one verdict line, got {out!r}"
    return ok, out


def _raise_not_implemented(*args):
    raise NotImplementedError


def _raise_value_error(*args):
    raise ValueError("boom")


STUBS = [None, ..., _raise_not_implemented, lambda *a: ...]


# ---------------------------------------------------------------- 1.1
def test_1_1_reference_passes(capsys):
    ok, out = verdict(capsys, check_output_shape, (2, 7, 12))
    assert ok and "✅" in out


@pytest.mark.parametrize("answer", [[2, 7, 12], torch.Size([2, 7, 12])])
def test_1_1_accepts_list_and_size(capsys, answer):
    assert verdict(capsys, check_output_shape, answer)[0]


@pytest.mark.parametrize("stub", [None, ...])
def test_1_1_stub_is_not_done(capsys, stub):
    ok, out = verdict(capsys, check_output_shape, stub)
    assert not ok and "还没完成" in out


@pytest.mark.parametrize("answer, needle", [
    ((2, 3, 7, 4), "分头之后"),
    ((2, 7, 4), "一个头的宽度"),
    ((2, 3, 7, 7), "注意力权重"),
    ((7, 12), "batch"),
    ((2, 12, 7), "提示"),
])
def test_1_1_wrong_answers_are_named(capsys, answer, needle):
    ok, out = verdict(capsys, check_output_shape, answer)
    assert not ok and "❌" in out and needle in out


@pytest.mark.parametrize("garbage", ["(2, 7, 12)", 42, 3.5, torch.zeros(2, 7, 12), (2.0, 7, 12), (True, 7, 12), {}])
def test_1_1_garbage_never_raises(capsys, garbage):
    ok, out = verdict(capsys, check_output_shape, garbage)
    assert not ok and "❌" in out


# ---------------------------------------------------------------- 1.2
def count_params_solution(d_model, n_heads):
    return 4 * (d_model * d_model + d_model)


def test_1_2_reference_passes(capsys):
    ok, out = verdict(capsys, check_param_count, count_params_solution)
    assert ok and "✅" in out


def test_1_2_counting_with_torch_passes(capsys):
    import mha

    ok, _ = verdict(capsys, check_param_count,
                    lambda d, h: sum(p.numel() for p in mha.MultiHeadAttention(d, h).parameters()))
    assert ok


def test_1_2_float_and_tensor_results_are_accepted(capsys):
    assert verdict(capsys, check_param_count, lambda d, h: float(4 * (d * d + d)))[0]
    assert verdict(capsys, check_param_count, lambda d, h: torch.tensor(4 * (d * d + d)))[0]


@pytest.mark.parametrize("stub", STUBS)
def test_1_2_stub_is_not_done(capsys, stub):
    ok, out = verdict(capsys, check_param_count, stub)
    assert not ok and "还没完成" in out


@pytest.mark.parametrize("wrong, needle", [
    (lambda d, h: 4 * d * d, "忘了偏置"),
    (lambda d, h: 3 * (d * d + d), "漏掉了最终的 W_o"),
    (lambda d, h: 3 * d * d, "都没算偏置"),
    (lambda d, h: 4 * h * (d * d + d), "乘上了头数"),
    (lambda d, h: 4 * (d * (d // h) + d // h), "一个头"),
    (lambda d, h: d * d + d, "只数了一个 Linear"),
    (lambda d, h: 80, "提示"),  # hard-coded answer for d_model = 4
])
def test_1_2_wrong_answers_are_named(capsys, wrong, needle):
    ok, out = verdict(capsys, check_param_count, wrong)
    assert not ok and "❌" in out and needle in out


@pytest.mark.parametrize("garbage", [
    "80", 42, _raise_value_error, lambda d, h: float("nan"), lambda d, h: "80", lambda d, h: True,
    lambda d, h: torch.zeros(3), lambda d, h: [80], lambda: 80,
])
def test_1_2_garbage_never_raises(capsys, garbage):
    ok, out = verdict(capsys, check_param_count, garbage)
    assert not ok and "❌" in out


# ---------------------------------------------------------------- 1.3
SOLUTION_1_3 = {"linear": [2], "mha": [0, 1, 2, 3, 4, 5]}


def test_1_3_reference_passes(capsys):
    ok, out = verdict(capsys, check_changed_positions, SOLUTION_1_3)
    assert ok and "✅" in out


def test_1_3_other_spellings_pass(capsys):
    assert verdict(capsys, check_changed_positions, {"linear": (2,), "mha": range(6)})[0]
    assert verdict(capsys, check_changed_positions, {"linear": torch.tensor([2]), "mha": {5, 4, 3, 2, 1, 0}})[0]


@pytest.mark.parametrize("stub", [None, ..., {"linear": ..., "mha": ...}, {"linear": [2], "mha": ...}])
def test_1_3_stub_is_not_done(capsys, stub):
    ok, out = verdict(capsys, check_changed_positions, stub)
    assert not ok and "还没完成" in out


@pytest.mark.parametrize("wrong, needle", [
    ({"linear": [2], "mha": [2]}, "逐位置的 Linear"),
    ({"linear": [0, 1, 2, 3, 4, 5], "mha": [0, 1, 2, 3, 4, 5]}, "位置之间互不相干"),
    ({"linear": [2], "mha": [2, 3, 4, 5]}, "因果掩码"),
    ({"linear": [3], "mha": [1, 2, 3, 4, 5, 6]}, "从 1 开始"),
    ({"linear": [2], "mha": [1, 2, 3, 4, 5, 6]}, "从 1 开始"),
    ({"linear": [2], "mha": [0, 1, 3, 4, 5]}, "自己也会变"),
    ({"linear": [], "mha": [0, 1, 2, 3, 4, 5]}, "Linear 逐个位置"),
])
def test_1_3_wrong_answers_are_named(capsys, wrong, needle):
    ok, out = verdict(capsys, check_changed_positions, wrong)
    assert not ok and "❌" in out and needle in out


@pytest.mark.parametrize("garbage", [
    "all", 42, [2], {"linear": [2]}, {"linear": "2", "mha": "all"}, {"linear": [2.0], "mha": [0]},
    {"linear": [2], "mha": [0, -1]}, {"linear": [True], "mha": [0]}, _raise_value_error,
])
def test_1_3_garbage_never_raises(capsys, garbage):
    ok, out = verdict(capsys, check_changed_positions, garbage)
    assert not ok and "❌" in out


def test_summary_records_attempts(capsys):
    check_output_shape((2, 7, 12))
    check_param_count(None)
    capsys.readouterr()
    res = results("ch01")
    assert res["1.1"] == "pass" and res["1.2"] == "todo"
    assert set(res) == {"1.1", "1.2", "1.3"}
    assert not math.isnan(len(res))
