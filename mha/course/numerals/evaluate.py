"""Measuring a numeral model: exact match of greedy decoding on a list of numbers."""
from __future__ import annotations

from .words import to_chinese

__all__ = ["predict", "exact_match", "mistakes"]


def predict(model, numbers, batch_size: int = 1024) -> list[str]:
    """The model's greedy answer (a digit string) for each number's Chinese reading."""
    return model.translate([to_chinese(n) for n in numbers], batch_size=batch_size)


def exact_match(model, numbers, batch_size: int = 1024) -> float:
    """Fraction of numbers whose digits the model writes exactly right (greedy decoding)."""
    numbers = list(numbers)
    if not numbers:
        raise ValueError("exact_match needs at least one number")
    answers = predict(model, numbers, batch_size)
    return sum(a == str(n) for a, n in zip(answers, numbers)) / len(numbers)


def mistakes(model, numbers, batch_size: int = 1024) -> list[tuple[int, str, str]]:
    """``(number, Chinese reading, model's answer)`` for every number the model gets wrong."""
    numbers = list(numbers)
    answers = predict(model, numbers, batch_size)
    return [(n, to_chinese(n), a) for n, a in zip(numbers, answers) if a != str(n)]
