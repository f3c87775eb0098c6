"""What every checker must do, whatever the exercise: the generic cases, once for all of them.

A stub is "not done yet"; garbage gets a named verdict (never the checker's own error branch,
never an exception); each call prints exactly one line and returns a bool. The chapter files
(tests/test_exercises_chNN.py) test what is specific to each exercise.
"""
import numpy as np
import pytest
import torch

import mha.exercises as ex
from exercise_support import STUBS, verdict

CHECKERS = [getattr(ex, name) for name in ex.__all__ if name.startswith("check_")]
# Exercises whose answer is a value (a shape, a dict, numbers) or a class, not a function.
NOT_A_FUNCTION = {"1.1", "1.2", "5.1", "5.2", "6.1", "7.1", "8.3"}
FUNCTION_CHECKERS = [c for c in CHECKERS if c.exercise_id not in NOT_A_FUNCTION]
GARBAGE = [42, 3.5, "answer", b"bytes", object(), abs, lambda *a, **k: 1, lambda *a, **k: "text",
           (1, 2), [None], {}, {"x": 1}, torch.zeros(1), torch.zeros(2, 3).to_sparse(), np.zeros(3), True, type]


def test_every_exercise_has_a_checker():
    assert len(CHECKERS) >= 30
    assert len({c.exercise_id for c in CHECKERS}) == len(CHECKERS)


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.exercise_id)
@pytest.mark.parametrize("stub", [None, ...], ids=["None", "Ellipsis"])
def test_an_untouched_answer_is_not_done_yet(capsys, checker, stub):
    ok, out = verdict(capsys, checker, stub)
    assert ok is False and "还没完成" in out, out


@pytest.mark.parametrize("checker", FUNCTION_CHECKERS, ids=lambda c: c.exercise_id)
@pytest.mark.parametrize("stub", STUBS[2:], ids=["raise NotImplementedError", "return ..."])
def test_a_stub_function_is_not_done_yet(capsys, checker, stub):
    ok, out = verdict(capsys, checker, stub)
    assert ok is False and "还没完成" in out, out


@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.exercise_id)
@pytest.mark.parametrize("garbage", GARBAGE, ids=repr)
def test_garbage_gets_a_named_verdict(capsys, checker, garbage):
    ok, out = verdict(capsys, checker, garbage)  # verdict() also asserts the internal-error branch is not reached
    assert ok is False and "❌" in out, out
