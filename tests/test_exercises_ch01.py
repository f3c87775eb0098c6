"""Tests for the chapter 01 checkers: reference passes, stubs are 'not done', wrong answers are named."""
import pytest
import torch

from mha.exercises import check_changed_positions, check_changed_positions_fn, check_output_shape, results
from exercise_support import STUBS, raise_value_error, verdict


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
SOLUTION_1_2 = {"linear": [2], "mha": [0, 1, 2, 3, 4, 5]}


def test_1_2_reference_passes(capsys):
    ok, out = verdict(capsys, check_changed_positions, SOLUTION_1_2)
    assert ok and "✅" in out


def test_1_2_other_spellings_pass(capsys):
    assert verdict(capsys, check_changed_positions, {"linear": (2,), "mha": range(6)})[0]
    assert verdict(capsys, check_changed_positions, {"linear": torch.tensor([2]), "mha": {5, 4, 3, 2, 1, 0}})[0]


@pytest.mark.parametrize("stub", [None, ..., {"linear": ..., "mha": ...}, {"linear": [2], "mha": ...}])
def test_1_2_stub_is_not_done(capsys, stub):
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
def test_1_2_wrong_answers_are_named(capsys, wrong, needle):
    ok, out = verdict(capsys, check_changed_positions, wrong)
    assert not ok and "❌" in out and needle in out


@pytest.mark.parametrize("garbage", [
    "all", 42, [2], {"linear": [2]}, {"linear": "2", "mha": "all"}, {"linear": [2.0], "mha": [0]},
    {"linear": [2], "mha": [0, -1]}, {"linear": [True], "mha": [0]}, raise_value_error,
])
def test_1_2_garbage_never_raises(capsys, garbage):
    ok, out = verdict(capsys, check_changed_positions, garbage)
    assert not ok and "❌" in out


# ---------------------------------------------------------------- 1.3
def changed_positions_solution(f, x, k):
    x2 = x.clone()
    x2[:, k] = x2[:, k] + 1.0
    with torch.no_grad():
        y, y2 = f(x), f(x2)
    moved = (y2 - y).abs().amax(dim=(0, 2)) > 1e-6
    return moved.nonzero().flatten().tolist()


def test_1_3_reference_passes(capsys):
    ok, out = verdict(capsys, check_changed_positions_fn, changed_positions_solution)
    assert ok and "✅" in out


def test_1_3_tensor_of_indices_and_other_change_pass(capsys):
    def fn(f, x, k):
        x2 = x.clone()
        x2[:, k] = torch.randn_like(x2[:, k]) * 3
        with torch.no_grad():
            return ((f(x2) - f(x)).abs().sum(dim=(0, 2)) > 1e-5).nonzero().flatten()
    assert verdict(capsys, check_changed_positions_fn, fn)[0]


@pytest.mark.parametrize("stub", STUBS)
def test_1_3_stub_is_not_done(capsys, stub):
    ok, out = verdict(capsys, check_changed_positions_fn, stub)
    assert not ok and "还没完成" in out


def _compares_inputs(f, x, k):
    x2 = x.clone()
    x2[:, k] += 1.0
    return ((x2 - x).abs().amax(dim=(0, 2)) > 0).nonzero().flatten().tolist()


def _mutates_input(f, x, k):
    y = f(x).detach().clone()
    x2 = x  # alias, not a copy
    x2[:, k] += 1.0
    return ((f(x2) - y).abs().amax(dim=(0, 2)) > 1e-6).nonzero().flatten().tolist()


def _aliased_both(f, x, k):
    x2 = x.clone()
    x2[:, k] += 1.0
    with torch.no_grad():
        return ((f(x2) - f(x2)).abs().amax(dim=(0, 2)) > 1e-6).nonzero().flatten().tolist()


def _wrong_axis(f, x, k):
    x2 = x.clone()
    x2[:, k] += 1.0
    with torch.no_grad():
        return ((f(x2) - f(x)).abs().amax(dim=(0, 1)) > 1e-6).nonzero().flatten().tolist()


def _bool_mask(f, x, k):
    x2 = x.clone()
    x2[:, k] += 1.0
    with torch.no_grad():
        return (f(x2) - f(x)).abs().amax(dim=(0, 2)) > 1e-6


def _one_based(f, x, k):
    return [p + 1 for p in changed_positions_solution(f, x, k)]


def _descending(f, x, k):
    return sorted(changed_positions_solution(f, x, k), reverse=True)


@pytest.mark.parametrize("wrong, needle", [
    (_compares_inputs, "比较的是输入 x"),
    (_mutates_input, "修改了输入 x"),
    (_aliased_both, "没改到"),
    (_wrong_axis, "第 1 维"),
    (_bool_mask, "布尔张量"),
    (_one_based, "从 0 开始"),
    (_descending, "从小到大"),
])
def test_1_3_wrong_answers_are_named(capsys, wrong, needle):
    ok, out = verdict(capsys, check_changed_positions_fn, wrong)
    assert not ok and "❌" in out and needle in out, out


@pytest.mark.parametrize("garbage", [
    "fn", 42, raise_value_error, lambda f, x, k: float("nan"), lambda f, x, k: torch.full((3,), float("nan")),
    lambda f, x, k: "0,1,2", lambda f, x, k: [0.0, 1.0], lambda f, x, k: torch.zeros(2, 2, dtype=torch.long),
    lambda f, x, k: f, lambda: [0],
])
def test_1_3_garbage_never_raises(capsys, garbage):
    ok, out = verdict(capsys, check_changed_positions_fn, garbage)
    assert not ok and "❌" in out


def test_summary_records_attempts(capsys):
    check_output_shape((2, 7, 12))
    check_changed_positions_fn(None)
    capsys.readouterr()
    res = results("ch01")
    assert res["1.1"] == "pass" and res["1.3"] == "todo"
    assert set(res) == {"1.1", "1.2", "1.3"}
