"""A per-category test of the numeral model, from a writer independent of the training one.

:func:`write_independently` writes a number straight from its eight digits (it shares no code with
:func:`mha.course.numerals.to_chinese` or :mod:`mha.course.numerals.styles`, which make the training data);
:func:`category_tests` draws held-out numbers (:func:`mha.course.numerals.is_held_out`: never trained on)
for each category with its own uniform sampling; :func:`category_table` measures the model on each.
"""
from __future__ import annotations

import random

import torch

from .analysis import correct_rows
from .data import is_held_out, make_batch
from .words import MAX_NUMBER

__all__ = ["write_independently", "CATEGORIES", "category_tests", "category_table"]

_DIG = "零一二三四五六七八九"
_UP = "零壹贰叁肆伍陆柒捌玖"


def write_independently(n: int, two: str = "standard", yi_shi: bool = False, short: bool = False,
                        upper: bool = False, wan: str = "万") -> str:
    """Write ``0 <= n <= 99,999,999`` from its digits.

    Args:
        two: ``"standard"`` (两 before 千 and in 两万, else 二), ``"二"`` (always 二), ``"两百"`` (两 before 百 too).
        yi_shi: write a leading 十 as 一十.
        short: the spoken short form (drop the last unit when the last non-zero digit directly
            follows a non-zero digit one place up, or 万: 110 -> 一百一, 35000 -> 三万五, 10001000 -> 一千万一).
        upper: financial numerals (壹 ... 玖, 拾佰仟; a leading 十 is 壹拾); ``wan``: 万 or 萬.
    """
    if not 0 <= n <= MAX_NUMBER:
        raise ValueError(f"n must lie in [0, {MAX_NUMBER:,}], got {n}")
    if n == 0:
        return "零"
    digit_chars, units = (_UP, "仟佰拾") if upper else (_DIG, "千百十")
    places = [int(c) for c in f"{n:08d}"]  # places[0] = ten millions ... places[7] = ones
    first = next(i for i, d in enumerate(places) if d)
    last = max(i for i, d in enumerate(places) if d)
    drop_last_unit = short and _short_applies(n)
    out = []
    for g in (0, 4):  # the 万 group, then the units group
        group = places[g: g + 4]
        if not any(group):
            continue
        if g == 4 and any(places[:4]) and group[0] == 0:
            out.append("零")  # a zero bridges 万
        pending = False
        for k, d in enumerate(group):
            i = g + k
            if d == 0:
                pending = pending or any(group[:k])
                continue
            if pending:
                out.append("零")
                pending = False
            unit = units[k] if k < 3 else ""
            if k == 2 and i == first and d == 1 and not (yi_shi or upper):
                out.append(units[2])  # a leading 十 names the 1
                continue
            if d == 2 and not upper:
                liang = k == 0 or (two == "两百" and k == 1) or (k == 3 and g == 0 and i == first and not any(group[:3]))
                ch = "二" if two == "二" else ("两" if liang else "二")
            else:
                ch = digit_chars[d]
            if i == last and drop_last_unit:
                out.append(digit_chars[d])  # 一万二: the dropped unit takes 两 with it
                continue
            out.append(ch + unit)
        if g == 0:
            out.append(wan)
    return "".join(out)


def _nonzero(n):
    return sum(c != "0" for c in str(n))


def _short_applies(n):
    places = [int(c) for c in f"{n:08d}"]
    last = max(i for i, d in enumerate(places) if d)
    return 4 <= last <= 6 and (places[last - 1] != 0 or last == 4 and any(places[:4]))  # 一千万一 = 10001000


def _uniform(lo, hi):
    return lambda rng: rng.randrange(lo, hi)


def _any(rng):
    return rng.randrange(10 ** rng.randrange(2, 9))


def _with_zeros(count):
    def draw(rng):
        length = rng.randrange(4, 9)
        digits = [rng.randrange(1, 10) for _ in range(length)]
        for k in rng.sample(range(1, length), count):
            digits[k] = 0
        return int("".join(map(str, digits)))
    return draw


def _repeated(rng):
    length = rng.randrange(4, 9)
    s = [str(rng.randrange(1, 10))] + [str(rng.randrange(10)) for _ in range(length - 1)]
    run = rng.randrange(3, length + 1)
    start = rng.randrange(length - run + 1)
    s[start: start + run] = [s[start] if start else s[0]] * run
    return int("".join(s))


def _round(rng):
    head = rng.randrange(2, 4)  # two or three non-zero digits, then zeros
    length = rng.randrange(head + 1, 9)
    return int("".join(str(rng.randrange(1, 10)) for _ in range(head))) * 10 ** (length - head)


# name -> (draw a number, keep it?, writing options)
CATEGORIES = {
    "2–3 位数": (_uniform(10, 1000), None, {}),  # only ~90 such numbers are held out
    **{f"{k} 位数": (_uniform(10 ** (k - 1), 10 ** k), None, {}) for k in range(4, 9)},
    "开头是十（十X、十X万…）": (lambda rng: rng.choice([rng.randrange(11, 20), rng.randrange(100_001, 200_000)]), None, {}),
    "十X万…（6 位，首位 1）": (_uniform(100_000, 200_000), None, {}),
    "恰好一个 0": (_with_zeros(1), None, {}),
    "恰好两个 0": (_with_zeros(2), None, {}),
    "零跨过万（X万零Y）": (lambda rng: rng.randrange(1, 10_000) * 10_000 + rng.randrange(1, 1000), None, {}),
    "三个以上相同数字相连": (_repeated, None, {}),
    "整数（两三个非零数字后全是 0）": (_round, None, {}),
    "写法：二千、二万": (_any, lambda n: "2" in f"{n:08d}"[0:5:4] or n // 10_000 == 2, {"two": "二"}),
    "写法：两百": (_any, lambda n: f"{n:08d}"[1] == "2" or f"{n:08d}"[5] == "2", {"two": "两百"}),
    "写法：一十开头": (lambda rng: rng.choice([rng.randrange(11, 20), rng.randrange(100_001, 200_000)]), None,
                {"yi_shi": True}),
    "写法：口语简写（一百一、三万五）": (_any, _short_applies, {"short": True}),
    "写法：大写（万）": (_any, None, {"upper": True}),
    "写法：大写（萬）": (_any, None, {"upper": True, "wan": "萬"}),
}


def category_tests(per_category: int = 400, seed: int = 13) -> dict:
    """``{category: (numbers, writings)}``: ``per_category`` distinct held-out numbers per category
    (all of them where fewer exist: 2–3 digit numbers)."""
    rng = random.Random(seed)
    out = {}
    for name, (draw, keep, options) in CATEGORIES.items():
        seen = {}
        for _ in range(200 * per_category):
            if len(seen) == per_category:
                break
            n = draw(rng)
            if is_held_out(n) and (keep is None or keep(n)):
                seen[n] = write_independently(n, **options)
        if len(seen) < min(per_category, 50):
            raise RuntimeError(f"{name}: found only {len(seen)} held-out numbers")
        out[name] = (list(seen), list(seen.values()))
    return out


@torch.no_grad()
def category_table(model, tests=None) -> dict:
    """``{category: (right, total)}``: exact match of ``model`` on each category's writings.

    Measured under teacher forcing, which counts exactly the numbers greedy decoding writes right
    (:mod:`mha.course.numerals.analysis`) in one forward pass per category.
    """
    tests = category_tests() if tests is None else tests
    out = {}
    for name, (numbers, writings) in tests.items():
        batch = make_batch(numbers, writings)
        logits = model(batch.src, batch.src_mask, batch.tgt_in)  # (B, T, V)
        out[name] = (int(correct_rows(logits, batch).sum()), len(numbers))
    return out
