"""What every checker must do, whatever the exercise: the generic cases, once for all of them.

A stub is "not done yet"; garbage gets a named verdict (never the checker's own error branch,
never an exception); each call prints exactly one line and returns a bool. The chapter files
(tests/checkers/test_exercises_chNN.py) test what is specific to each exercise.
"""
import math
import re
import sys
import threading
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import mha.course.exercises as ex
import mha
from mha.course.numerals.data import decode_target
from exercise_support import STUBS, label, verdict, verdict_allowing_prints
from mha.course.exercises.records import RECORDS

# The checkers of the book's exercises.
CHECKERS = [getattr(ex, name) for name in ex.__all__ if name.startswith("check_")]
# Exercises whose answer is a value (a shape, a dict, numbers) or a class, not a function.
NOT_A_FUNCTION = {"1.1", "1.2", "1.3", "2.2", "3.1", "4.1", "4.2", "5.1", "5.2", "6.1", "6.2", "7.1", "8.1", "8.3", "8.4", "9.3", "9.4", "10.3",
                  "10.4", "11.2", "12.3"}
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
def test_garbage_gets_a_named_verdict(capsys, checker):
    """One test per checker over the whole garbage table; the assertion names the first garbage that slips."""
    for garbage in GARBAGE:
        ok, out = verdict(capsys, checker, garbage)  # verdict() also asserts the internal-error branch is not reached
        assert ok is False and "❌" in out, (label(garbage), out)


# ---------------------------------------------------------------- answers the checkers cannot even look at
class BrokenRepr:
    """An answer whose __repr__ raises: a verdict that quotes it must still be printed."""

    def __repr__(self):
        raise RuntimeError("repr boom")


class BrokenStr(Exception):
    """An exception whose message cannot be shown."""

    def __str__(self):
        raise ZeroDivisionError("str boom")


class OwnBaseException(BaseException):
    pass


class NoSuperInit(nn.Module):
    """A module whose __init__ forgets super().__init__(): even repr() of it fails."""

    def __init__(self, *args, **kwargs):
        self.args = args


def nested_tensor():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "nested tensors are a prototype"
        return torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])


def meta_tensor():
    return torch.ones(2, 3, device="meta")


def raise_system_exit(*args, **kwargs):
    sys.exit(3)


def raise_own_base_exception(*args, **kwargs):
    raise OwnBaseException("x")


def raise_broken_str(*args, **kwargs):
    raise BrokenStr()


# 13.2 builds and runs the trained model before it looks at the answer (~10 s a call): the generic
# cases below go through the same machinery for every checker, so 13.2 gets a few of them only.
QUICK_CHECKERS = [c for c in CHECKERS if c.exercise_id != "13.2"]
QUICK_FUNCTION_CHECKERS = [c for c in FUNCTION_CHECKERS if c.exercise_id != "13.2"]

UNSHOWABLE = [meta_tensor, nested_tensor, BrokenRepr, NoSuperInit]  # NoSuperInit: a module without super().__init__()


@pytest.mark.parametrize("checker", QUICK_CHECKERS, ids=lambda c: c.exercise_id)
def test_an_answer_that_cannot_be_shown_gets_a_verdict(capsys, checker):
    for make in UNSHOWABLE:
        ok, out = verdict(capsys, checker, make())
        assert ok is False and "❌" in out, (make.__name__, out)


def broken_reprs():
    return [BrokenRepr(), BrokenRepr()]


RETURNED = UNSHOWABLE + [broken_reprs]


@pytest.mark.parametrize("checker", QUICK_FUNCTION_CHECKERS, ids=lambda c: c.exercise_id)
def test_a_function_returning_what_cannot_be_shown_gets_a_verdict(capsys, checker):
    for make in RETURNED:
        ok, out = verdict(capsys, checker, lambda *args, **kwargs: make())
        assert ok is False and "❌" in out, (make.__name__, out)


@pytest.mark.parametrize("checker", QUICK_FUNCTION_CHECKERS + [ex.check_my_multihead_attention], ids=lambda c: c.exercise_id)
@pytest.mark.parametrize("crash, words", [(raise_system_exit, "sys.exit()"), (raise_own_base_exception, "OwnBaseException"),
                                          (raise_broken_str, "BrokenStr")], ids=["sys.exit", "BaseException", "broken __str__"])
def test_any_crash_gets_a_verdict(capsys, checker, crash, words):
    if checker.exercise_id == "8.3":  # the answer is a class: it crashes when it is built
        crash = type("Crashes", (nn.Module,), {"__init__": lambda self, *args, _crash=crash: _crash()})
    ok, out = verdict(capsys, checker, crash)
    assert ok is False and words in out, out


@pytest.mark.parametrize("answer", [NoSuperInit, lambda *args: nested_tensor(), raise_system_exit],
                         ids=["module without super().__init__()", "returns a nested tensor", "sys.exit"])
def test_the_slow_checker_gives_a_verdict_too(capsys, answer):
    ok, out = verdict(capsys, ex.check_continue_prefix, answer)
    assert ok is False and "❌" in out, out


def test_a_keyboard_interrupt_stops_the_check():
    def interrupted(*args):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        ex.check_dependency_matrix({"predict": {"causal": [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]],
                                                "roll": [[0, 0, 0, 1], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]},
                                    "matrix": interrupted}, record=False)
    assert sys.getprofile() is None and threading.getprofile() is None


def test_an_nn_module_without_super_init_is_named(capsys):
    ok, out = verdict(capsys, ex.check_my_multihead_attention, NoSuperInit)
    assert ok is False and "super().__init__()" in out, out


class NoIterArray(np.ndarray):
    def __iter__(self):
        raise AssertionError("a huge answer was turned into a list before its size was checked")


class NoIterTensor(torch.Tensor):
    def __iter__(self):
        raise AssertionError("a huge answer was turned into a list before its size was checked")


class NoIterList(list):
    def __iter__(self):
        raise AssertionError("a huge answer was iterated before its length was checked")


@pytest.mark.parametrize("checker, answer", [
    (ex.check_dot_product_variance_scaled, np.zeros(10**6).view(NoIterArray)),
    (ex.check_dot_product_variance_scaled, torch.zeros(10**6).as_subclass(NoIterTensor)),
    (ex.check_permuted_rows, {"queries": NoIterList(range(10**6)), "keys": [0, 1, 2, 3, 4]}),
], ids=["5.2 numpy", "5.2 torch", "1.1 list"])
def test_a_huge_answer_is_refused_by_its_size(capsys, checker, answer):
    ok, out = verdict(capsys, checker, answer)
    assert ok is False and "❌" in out, out


# ---------------------------------------------------------------- shortcuts however they are reached
def _safe_mask(mask):
    """A mask the fused kernel takes without NaN (no fully masked row)."""
    return None if mask is None else mask | ~mask.any(-1, keepdim=True)


def _attention_weights(q, k, v, mask=None):
    """5.3 done right: (output, weights), a query that sees no key gets zero weights."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        mask = mask != 0
        scores = scores.masked_fill(~mask, -1e9)
    weights = scores.softmax(-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ v, weights


def _sdpa_by(run):
    """An attention answer that also runs the fused kernel through ``run(q, k, v, mask)``; right in value."""
    def fn(q, k, v, mask=None):
        out, weights = _attention_weights(q, k, v, mask)
        return out + 0 * run(q, k, v, None), weights
    return fn


SDPA = F.scaled_dot_product_attention
# Each way of reaching the fused kernel the prompt forbids is named (the checker is no exam: switching the
# watch off is not a trick it fights, see mha/course/exercises/guard.py).
ATTENTION_SHORTCUTS = [
    (lambda q, k, v, m: SDPA(q, k, v, m), "F.scaled_dot_product_attention"),
    (lambda q, k, v, m: torch.ops.aten.scaled_dot_product_attention(q, k, v, m), "torch.ops.aten.scaled_dot_product_attention"),
    (lambda q, k, v, m: torch.ops.aten.scaled_dot_product_attention.default(q, k, v, m), "scaled_dot_product_attention.default"),
    (lambda q, k, v, m: torch._C._nn.scaled_dot_product_attention(q, k, v, m), "F.scaled_dot_product_attention"),
]


@pytest.mark.parametrize("run, words", ATTENTION_SHORTCUTS, ids=lambda x: x if isinstance(x, str) else "")
def test_a_fused_kernel_is_named_however_it_is_reached(capsys, run, words):
    ok, out = verdict(capsys, ex.check_attention_weights, _sdpa_by(run))
    assert ok is False and words in out, out
    assert sys.getprofile() is None


def test_a_right_answer_passes_under_the_watch(capsys):
    ok, out = verdict(capsys, ex.check_attention_weights, _attention_weights)
    assert ok is True, out


def test_printing_with_the_book_s_fmt_is_allowed(capsys):
    """An honest 5.3 that prints with mha.fmt while debugging passes (mha.fmt is no shortcut)."""
    def attention(q, k, v, mask=None):
        out, weights = _attention_weights(q, k, v, mask)
        print(mha.fmt(weights.flatten()[:2], 2))
        return out, weights
    ok, out = verdict_allowing_prints(capsys, ex.check_attention_weights, attention)
    assert ok is True, out


class LayerByHand(nn.Module):
    """Exercise 8.3 done right; the subclasses below swap in a shortcut for the attention step."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.h, self.d_k = n_heads, d_model // n_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def split(self, x):
        B, L, _ = x.shape
        return x.view(B, L, self.h, self.d_k).transpose(1, 2)

    def attend(self, q, k, v, mask):
        return _attention_weights(q, k, v, mask)  # a query that sees no key: zero weights, output b^O

    def forward(self, Q, K, V, mask=None, need_weights=False):
        if mask is not None:
            mask = (mask != 0)
            mask = mask[:, None] if mask.dim() == 3 else mask
        out, weights = self.attend(self.split(self.W_q(Q)), self.split(self.W_k(K)), self.split(self.W_v(V)), mask)
        B, h, L, d_k = out.shape
        out = self.W_o(out.transpose(1, 2).reshape(B, L, h * d_k))
        return (out, weights) if need_weights else out


class LayerByAten(LayerByHand):
    def attend(self, q, k, v, mask):
        return torch.ops.aten.scaled_dot_product_attention(q, k, v, _safe_mask(mask)), None


class LayerByNativeMHA(LayerByHand):
    def forward(self, Q, K, V, mask=None):
        w = torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight])
        b = torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias])
        return torch._native_multi_head_attention(Q, K, V, Q.shape[-1], self.h, w, b, self.W_o.weight, self.W_o.bias)[0]


@pytest.mark.parametrize("cls, words", [(LayerByHand, None), (LayerByAten, "torch.ops.aten.scaled_dot_product_attention"),
                                        (LayerByNativeMHA, "现成的 torch._native_multi_head_attention")],
                         ids=lambda x: x.__name__ if isinstance(x, type) else "")
def test_a_layer_using_a_fused_kernel_is_named(capsys, cls, words):
    ok, out = verdict(capsys, ex.check_my_multihead_attention, cls)
    assert (ok is True) if words is None else (ok is False and words in out), out


def _greedy_by_the_model(model, src, src_mask, prefix):
    return decode_target(model.greedy_ids(src, src_mask))


def test_the_model_s_own_decoding_is_refused(capsys):
    ok, out = verdict(capsys, ex.check_continue_prefix, _greedy_by_the_model)
    assert ok is False and "model.greedy_ids" in out, out


def test_a_verdict_is_its_bool_and_a_notebook_shows_nothing_for_it(capsys):
    """The check cell's last line is the checker call: no stray True/False under the printed verdict."""
    from IPython.core.formatters import DisplayFormatter

    from mha.course.exercises.verdicts import Verdict

    checker = CHECKERS[0]
    ok = checker(None, record=False)
    capsys.readouterr()
    assert isinstance(ok, Verdict) and not ok and ok == False  # noqa: E712  (it equals the bool)
    assert Verdict(True) == True and Verdict(True) != Verdict(False)  # noqa: E712
    formatter = DisplayFormatter()
    assert formatter.format(ok) == ({}, {})
    assert formatter.format(True) != ({}, {})  # a plain bool would show


def test_the_summary_lists_exercises_in_order_and_leaves_reference_answers_out(capsys):
    """ch02's checkers are defined 2.2 before 2.1; the summary still lists 2.1 first. A reference-solution
    cell calls the checker with record=False: it is not counted (issue 27)."""
    from mha.course.exercises.verdicts import _REGISTRY
    saved = {k: list(v) for k, v in _REGISTRY["ch02"].items()}
    try:
        for entry in _REGISTRY["ch02"].values():
            entry[1] = None
        ex.check_pe_shift_matrix(None)  # the student's cell, still a stub
        ex.check_pe_bug({"crashes": (2, 3), "silently_wrong": (1, 3), "fixed": None}, record=False)  # a reference cell
        capsys.readouterr()
        assert list(ex.results("ch02")) == ["2.1", "2.2", "2.3"]
        assert ex.results("ch02") == {"2.1": "todo", "2.2": None, "2.3": None}
        ex.summary("ch02")
        lines = capsys.readouterr().out.splitlines()
        assert [re.search(r"\d+\.\d+", line).group() for line in lines[1:4]] == ["2.1", "2.2", "2.3"], lines
        assert lines[-1] == "通过 0 / 3", lines
    finally:
        for k, v in saved.items():
            _REGISTRY["ch02"][k] = v


# ---------------------------------------------------------------- exercises as records
def test_the_which_family_reads_records():
    assert {"1.1", "1.2", "3.1", "4.1", "5.1", "9.3"} <= set(RECORDS)


@pytest.mark.parametrize("record", list(RECORDS.values()), ids=lambda r: r.id)
def test_each_wrong_answer_of_a_record_gets_its_own_verdict(capsys, record):
    """The record is what the checker reads: each typical wrong answer, put into the otherwise right answer,
    fails with that answer's why."""
    checker = next(c for c in CHECKERS if c.exercise_id == record.id)
    truth = record.right()
    for key, ask in record.asks.items():
        for wrong, why in ask.wrongs:
            answer = list(wrong) if key == "" else {**truth, key: list(wrong)}
            ok, out = verdict(capsys, checker, answer)
            assert ok is False and why[:20] in out, (key, wrong, out)
