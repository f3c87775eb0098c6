"""Helpers shared by the checker tests (tests/checkers/test_exercises_ch*.py).

A chapter file lists its cases in tables, one row a case, and turns each table into a parametrized test
(pytest collects the module-level ``test_*`` names the factories return)::

    RIGHT_A = answers_for(check_a, [answer, ...])
    WRONG_A = mistakes_for(check_a, [(answer, "a word the verdict names"), (answer, ["two", "words"]), ...])
    ...
    test_right_answers_pass = right_answers(RIGHT_A, RIGHT_B)
    test_wrong_answers_are_named = wrong_answers(WRONG_A, WRONG_B)
    test_garbage_gets_a_verdict = wrong_answers(every([check_a, check_b], [answer, ...]))  # only the ❌

The generic stub and garbage answers (None, ``...``, a function that raises NotImplementedError or returns
``...``, 42, a string, ``object()`` ...) are tried on every checker once, in tests/checkers/test_exercises_common.py;
a chapter file lists only the stubs and the garbage of its own exercises.
"""
import linecache
import re

import numpy as np
import pytest
import torch

from mha.course.exercises import results
from mha.course.exercises.verdicts import Verdict

# What a checker prints when it has a bug of its own; no answer a student can hand in may reach it.
INTERNAL_ERROR = "检查时出错"


def verdict(capsys, checker, answer):
    """Run a checker without recording it; assert it printed exactly one line; return (ok, line)."""
    ok = checker(answer, record=False)
    out = capsys.readouterr().out
    assert isinstance(ok, Verdict), f"a checker returns a Verdict, got {ok!r}"
    ok = bool(ok)
    assert out.count("\n") == 1, f"expected exactly one verdict line, got {out!r}"
    assert INTERNAL_ERROR not in out, f"the checker's own error branch was reached: {out!r}"
    return ok, out


def verdict_allowing_prints(capsys, checker, answer):
    """Like :func:`verdict` for an answer that prints while it runs: the verdict is the last line."""
    ok = bool(checker(answer, record=False))
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert INTERNAL_ERROR not in last, last
    return ok, last


def raise_not_implemented(*args):
    raise NotImplementedError


def raise_value_error(*args):
    raise ValueError("boom")


def return_ellipsis(*args):
    return ...


# What an untouched stub cell hands to a checker.
STUBS = [None, ..., raise_not_implemented, return_ellipsis]


# ---------------------------------------------------------------- one verdict
def passes(capsys, checker, answer):
    """The answer passes."""
    ok, out = verdict(capsys, checker, answer)
    assert ok is True and "✅" in out, out


def fails_with(capsys, checker, answer, *words):
    """The answer fails, and the verdict names every one of ``words``."""
    ok, out = verdict(capsys, checker, answer)
    assert ok is False and "❌" in out, out
    for word in words:
        assert word in out, (word, out)


def not_done(capsys, checker, answer):
    """The answer is (still) a stub: "not done yet", neither passed nor failed."""
    ok, out = verdict(capsys, checker, answer)
    assert ok is False and "⏳" in out and "还没完成" in out, out


# ---------------------------------------------------------------- tables
def answers_for(checker, answers):
    """Rows ``(checker, answer)`` of a right-answer or a not-done table."""
    return [(checker, answer) for answer in answers]


def mistakes_for(checker, cases):
    """Rows ``(checker, answer, words)`` of a wrong-answer table, from ``(answer, words)`` pairs."""
    return [(checker, answer, words) for answer, words in cases]


class Several(list):
    """Several garbage answers tried in one table row (the failure names the first that slips through)."""

    __name__ = "several answers"


def every(checkers, answers):
    """Rows ``(checker, Several(answers), ())``: each checker gets every answer in one row; only the ❌ is asserted."""
    return [(checker, Several(answers), ()) for checker in checkers]


def label(answer):
    """A short readable name for an answer in a test id."""
    name = getattr(answer, "__name__", None)
    qualname = getattr(answer, "__qualname__", "")
    if "<locals>" in qualname and (getattr(answer, "__closure__", None) or name != "<lambda>"):
        # made by a helper: patched(...), shapes_changed(...), make_class(...)
        return _cut(qualname.split(".<locals>")[0] + f"({_closure_text(answer)})", 60)
    if name == "<lambda>":
        return _lambda_text(answer)
    if isinstance(name, str) and callable(answer):
        return name
    return _cut(re.sub(r" at 0x[0-9a-f]+", "", repr(answer)), 40)


def _cut(text, n):
    return text if len(text) <= n else text[:n - 3] + "..."


def _closure_text(fn):
    """What a helper-made function was made from: the values its closure holds."""
    parts = []
    code = getattr(fn, "__code__", None)  # a class made by a helper has none
    for name, cell in zip(code.co_freevars if code else (), getattr(fn, "__closure__", None) or ()):
        value = cell.cell_contents
        parts += [f"{k}={label(v)}" for k, v in (value.items() if isinstance(value, dict) else [(name, value)])]
    return ", ".join(parts) or "..."


def _lambda_text(fn):
    """The source text of a lambda's body, as far as the code object's positions tell."""
    spans = [p for p in fn.__code__.co_positions() if None not in p and (p[0], p[2]) != (p[1], p[3])]
    if not spans:
        return "lambda"
    (line, col), (end_line, end_col) = min((p[0], p[2]) for p in spans), max((p[1], p[3]) for p in spans)
    lines = [linecache.getline(fn.__code__.co_filename, n) for n in range(line, end_line + 1)]
    if not all(lines):
        return "lambda"
    lines[-1] = lines[-1][:end_col]
    lines[0] = lines[0][col:]
    return "lambda: " + _cut(" ".join(" ".join(lines).split()), 50)


def _ids(rows):
    return [f"{row[0].exercise_id}-{label(row[1])}" for row in rows]


def recorded(capsys, chapter, *attempts):
    """Run each ``(checker, answer)`` attempt the way a notebook does (recorded); return ``results(chapter)``."""
    for checker, answer in attempts:
        checker(answer)
    capsys.readouterr()
    return results(chapter)


# What a function handed in for a mask exercise may return instead (beyond the generic garbage).
RETURNED_GARBAGE = [
    lambda *a: float("nan"),
    lambda *a: torch.full((4, 4), float("nan")),
    lambda *a: torch.zeros(2, 2, dtype=torch.int8),
    lambda *a: torch.zeros(7, dtype=torch.complex64),
    lambda *a: torch.zeros(4, 4, dtype=torch.complex64),
    lambda *a: torch.zeros(7),
    lambda *a: np.zeros((1, 1, 1, 4), dtype=bool),
    lambda *a: np.tril(np.ones((4, 4), dtype=bool)),
    lambda *a: (torch.zeros(1), torch.zeros(1)),
    lambda *a: {"q": "x"},
    lambda: None,  # wrong number of arguments
]


# ---------------------------------------------------------------- tests made from tables
def _table_test(tables, check):
    """A test parametrized over the rows of ``tables``; each row is checked with ``check(capsys, *row)``."""
    rows = [row for table in tables for row in table]

    @pytest.mark.parametrize("row", rows, ids=_ids(rows))
    def test(capsys, row):
        check(capsys, *row)
    return test


def _named(capsys, checker, answer, words):
    for one in (answer if isinstance(answer, Several) else [answer]):
        try:
            fails_with(capsys, checker, one, *((words,) if isinstance(words, str) else words))
        except AssertionError as e:
            raise AssertionError(f"{label(one)}: {e}") from None


def right_answers(*tables):
    """A test over rows ``(checker, answer)``: each answer passes."""
    return _table_test(tables, passes)


def wrong_answers(*tables):
    """A test over rows ``(checker, answer, words)``: each answer fails with a verdict naming every word
    (``words``: one string or a sequence of them; empty: only the ❌ is asserted)."""
    return _table_test(tables, _named)


def not_done_answers(*tables):
    """A test over rows ``(checker, answer)``: each answer is a stub, "not done yet"."""
    return _table_test(tables, not_done)
