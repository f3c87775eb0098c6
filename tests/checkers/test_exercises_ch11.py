"""Chapter 11 checkers, table-driven: honest answers in several styles pass, stubs are "not done", every
wrong answer fails with a verdict that names its mistake (``verdict`` asserts the checker's own error branch
is never reached). The generic stub and garbage answers are tried on every checker in
tests/checkers/test_exercises_common.py. 11.2 trains the chapter's 2-head model once (a few seconds, cached)."""
import decimal
import fractions

import numpy as np
import torch

from mha.course.exercises import check_ablation_prediction, check_head_costs, check_plateau
from mha.course.exercises.ch11 import ablation_reference
from exercise_support import verdict_allowing_prints, answers_for, mistakes_for, not_done_answers, raise_value_error, right_answers, wrong_answers


# ---------------------------------------------------------------- 11.1 the plateau's baseline
def plateau_ok(V, n):
    return (1 + (n - 1) / V) / n


def plateau_fraction(vocab, answers):  # renamed arguments, exact arithmetic
    return fractions.Fraction(1 + fractions.Fraction(answers - 1, vocab), answers)


def plateau_loop(V, n):  # averages the n answers one by one
    accs = [1.0] + [1 / V] * (n - 1)
    return sum(accs) / len(accs)


def test_an_answer_that_prints_passes(capsys):
    def noisy(V, n):
        print("V, n =", V, n)
        return plateau_ok(V, n)

    ok, last = verdict_allowing_prints(capsys, check_plateau, noisy)
    assert ok and "✅" in last, last


test_plateau_right = right_answers(answers_for(check_plateau, [
    plateau_ok,
    plateau_loop,
    plateau_fraction,  # an exact Fraction is a number
    lambda V, n: float(plateau_fraction(V, n)),
    lambda V, n: decimal.Decimal(1 + (n - 1) / V) / n,
    lambda V, n: np.float64(plateau_ok(V, n)),
    lambda V, n: torch.tensor(plateau_ok(V, n), dtype=torch.float64),
    lambda V, n: 1 / n + (n - 1) / (n * V),
]))

test_plateau_wrong = wrong_answers(mistakes_for(check_plateau, [
    (lambda V, n: 1 / n, ["1/n", "1/V 的机会"]),
    (lambda V, n: 1 / V, ["每个答案都靠猜"]),
    (lambda V, n: (1 + 1 / V) / 2, ["只对两个答案成立", "V=10, n=3"]),
    (lambda V, n: (1 + (n - 1) / 2) / n, ["不是 1/2"]),
    (lambda V, n: 1 / n + 1 / V, ["(n − 1)/(V n)"]),
    (lambda V, n: 1 / V + (1 - 1 / V) * 3 / 4, ["猜想上限", "一个全对"]),  # cell 10's other number
    (lambda V, n: (1 + (n - 1) / (V - 1)) / n, ["不是 1/(V − 1)"]),
    (lambda V, n: 100 * plateau_ok(V, n), ["百分数"]),
    (lambda V, n: 0.5625, ["V=10, n=3 时应该是 0.4000"]),  # the chapter's number, not the function
    (lambda V, n: None, ["返回了 None"]),
    (lambda V: 0.5, ["TypeError"]),
    (raise_value_error, ["ValueError: boom"]),
    (lambda V, n: float("nan"), ["有限的数"]),
    (lambda V, n: "0.5625", ["应该是一个数"]),
    (lambda V, n: [plateau_ok(V, n)], ["应该是一个数"]),
]))

test_plateau_not_done = not_done_answers(answers_for(check_plateau, [lambda V, n: ...]))


# ---------------------------------------------------------------- 11.2 predict an ablation
def test_the_ablation_reference_is_what_the_prompt_says():
    """Zeroing the head that looks 1 back leaves x[t-1] at a guess (1/8) and x[t-3] right, on 512 sequences:
    the reverse of the 1-head pair the page prints, so copying it fails."""
    acc1, acc3, head = ablation_reference()
    assert abs(acc1 - 1 / 8) < 0.03 and acc3 > 0.95 and head in (0, 1)


test_ablation_right = right_answers(answers_for(check_ablation_prediction, [
    (0.125, 1.0),
    [1 / 8, 0.98],
    (torch.tensor(0.2), np.float64(0.95)),
    (0.1, 1),
    torch.tensor([0.125, 1.0]),  # two numbers measured by an experiment, as one tensor or array
    np.array([0.125, 1.0]),
]))

test_ablation_wrong = wrong_answers(mistakes_for(check_ablation_prediction, [
    ((1.0, 0.129), ["不会还有 1", "回看 1 步的头"]),  # the 1-head model's pair that the page prints
    ((1.0, 0.125), ["不会还有 1", "回看 1 步的头"]),  # the head that looks 3 back removed instead
    ((0.0, 1.0), ["1/V = 1/8"]),
    ((1.0, 1.0), ["独立"]),
    ((0.125, 0.125), ["回看 3 步的头没有被动"]),
    ((0.125, 0.5625), ["回看 3 步的头没有被动"]),
    ((0.5625, 0.5625), ["不会还有 0.5625"]),
    ((0.3, 1.0), ["差得超过 0.1"]),
    ((12.5, 100), ["0 和 1 之间"]),
    ({"x[t-1]": 0.125, "x[t-3]": 1.0}, ["两个数", "dict"]),
    (0.5625, ["两个数"]),
    ((0.125, 1.0, 0.5), ["两个数"]),
    (torch.tensor([0.125, 1.0, 0.5]), ["两个数"]),
    ((0.125, "1.0"), ["应该是一个数"]),
]))

test_ablation_not_done = not_done_answers(answers_for(check_ablation_prediction, [(..., ...), (1.0, ...)]))


# ---------------------------------------------------------------- 11.3 why not too many heads
def costs_ok(B, L, S, d_model, h):
    return B * L * S * d_model, min(d_model // h, L, S)


def costs_per_head(batch, queries, keys, width, heads):  # renamed arguments, counts head by head
    d_k = width // heads
    total = sum(batch * queries * keys * d_k for _ in range(heads))
    return [total, min(d_k, queries, keys)]


test_costs_right = right_answers(answers_for(check_head_costs, [
    costs_ok,
    costs_per_head,
    lambda B, L, S, d, h: (float(B * L * S * d), np.int64(min(d // h, L, S))),
    lambda B, L, S, d, h: (torch.tensor(B * h * L * S * (d // h)), min(L, S, d // h)),
]))

test_costs_wrong = wrong_answers(mistakes_for(check_head_costs, [
    (lambda B, L, S, d, h: (B * L * S * d * h, min(d // h, L, S)), ["多乘了一个 h"]),
    (lambda B, L, S, d, h: (B * h * L * S, min(d // h, L, S)), ["d_k 次乘法"]),
    (lambda B, L, S, d, h: (B * L * S * (d // h), min(d // h, L, S)), ["只算了一个头"]),
    (lambda B, L, S, d, h: (L * S * d, min(d // h, L, S)), ["还有 B 个样本"]),
    (lambda B, L, S, d, h: (B * L * S * d, d), ["不是 d_model"]),
    (lambda B, L, S, d, h: (B * L * S * d, d // h), ["行数 L 和列数 S", "min(d_k, L, S)"]),
    (lambda B, L, S, d, h: (B * L * S * d, min(L, S)), ["最大的秩应该是"]),
    (lambda B, L, S, d, h: (min(d // h, L, S), B * L * S * d), ["顺序反了"]),
    (lambda B, L, S, d, h: (2 * B * L * S * d, min(d // h, L, S)), ["加法不算"]),
    (lambda B, L, S, d, h: (B * L * S * d + B * h * L * S, min(d // h, L, S)), ["√d_k 不算在内"]),
    (lambda B, L, S, d, h: (B * h * L * S * d * h, min(d * h, L, S)), ["不是 d_model·h"]),
    (lambda B, L, S, d, h: B * L * S * d, ["两个整数"]),
    (lambda B, L, S, d, h: (B * L * S * d + 0.5, 1), ["应该是整数"]),
]))

test_costs_not_done = not_done_answers(answers_for(check_head_costs, [lambda B, L, S, d, h: (..., ...)]))
