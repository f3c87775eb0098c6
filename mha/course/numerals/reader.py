"""A lenient reader of Chinese numerals 0 ... 99,999,999: every common way of writing a number.

:func:`read` accepts, besides the course's standard reading (:func:`mha.numerals.to_chinese`):

* 两 or 二 before 百, 千 and 万 (两百, 二千, 二万, 二十两万);
* 一十 anywhere (一十二, 一万一十) and a bare 十 inside (一百十二, 一万零十二);
* spoken short forms: a last digit right after 百, 千 or 万 counts one place down
  (一百一 = 110, 两千五 = 2500, 三万五 = 35000, 一万二 = 12000);
* a left-out 零 when the units still say every place (三万五百 = 30500);
* financial numerals (大写): 壹贰叁肆伍陆柒捌玖, 拾佰仟, 万 or 萬, 零 (贰仟零贰拾陆, 壹拾贰, 拾贰).

It refuses, with the reason, only what names no number: unknown characters,
two digits in a row, units out of order, a 零 that skips no place, 两 where no
unit follows, a mix of 大写 and ordinary digits. The :class:`Reading` it returns
says how the course writes the number and in which ways the input differs.
"""
from __future__ import annotations

from typing import NamedTuple

from .words import ALPHABET, MAX_NUMBER, NumeralError, check_characters, to_chinese

__all__ = ["Reading", "read", "FINANCIAL", "to_ordinary"]

FINANCIAL = dict(zip("壹贰叁肆伍陆柒捌玖拾佰仟萬", "一二三四五六七八九十百千万"))  # 大写 -> ordinary
_FINANCIAL_ONLY = set("壹贰叁肆伍陆柒捌玖拾佰仟")
_ORDINARY_ONLY = set("一二两三四五六七八九十百千")
_DIGIT = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"两": 2}
_UNIT = {"十": 10, "百": 100, "千": 1000}

# the notes a Reading may carry, one per way of writing that differs from the course's standard
NOTES = {
    "financial": "financial numerals (大写)",
    "traditional": "萬 for 万",
    "short": "spoken short form (the last digit counts one place down)",
    "zero_left_out": "零 left out (the units still name every place)",
    "yi_shi": "一十 where the course writes 十",
    "bare_shi": "十 without 一 where the course writes 一十",
    "liang_er": "两/二 chosen differently from the course (两 only before 千 and in 两万)",
}


class Reading(NamedTuple):
    """What :func:`read` found: the number, the course's standard reading of it, and how the input differs."""

    number: int
    standard: str
    notes: tuple  # keys of NOTES, empty when the input is the standard reading

    @property
    def is_standard(self) -> bool:
        return not self.notes

    def explain(self) -> str:
        """A short English sentence: ``"standard"`` or the notes and the standard reading."""
        if self.is_standard:
            return "standard reading"
        return "; ".join(NOTES[k] for k in self.notes) + f"; the course writes {self.standard}"


def to_ordinary(text: str) -> str:
    """``text`` with financial numerals and 萬 replaced by the ordinary characters (贰仟 -> 二千)."""
    return "".join(FINANCIAL.get(ch, ch) for ch in text)


def _group(text: str, whole: str, after_wan: bool, notes: set, before_wan: bool = False) -> int:
    """The value (0 ... 9999) of one group of four places, leniently.

    ``after_wan``: this is the units group after a 万 (it may start with 零, a bare digit is a short form);
    ``before_wan``: the 万 group (a 两 may end it: 两万, 二十两万).
    """
    total, digit, last_unit = 0, None, 10000
    zero, started = False, after_wan  # a 零 is pending; something (a unit or the 万) came before
    for ch in text:
        if ch == "零":
            if digit is not None:
                raise NumeralError(f"{whole!r} has two digits in a row without a unit between them")
            if zero:
                raise NumeralError(f"{whole!r} has two 零 in a row: one 零 stands for any run of zeros")
            if not started:
                raise NumeralError(f"{whole!r} has 零 where no digit came before it")
            zero = True
        elif ch in _DIGIT:
            if digit is not None:
                raise NumeralError(f"{whole!r} has two digits in a row without a unit between them")
            digit = ch
        else:  # a unit
            unit = _UNIT[ch]
            if unit >= last_unit:
                raise NumeralError(f"{whole!r} repeats or reorders the units 千, 百, 十 within a group")
            if digit is None and unit != 10:
                raise NumeralError(f"{whole!r} has {ch} without a digit before it (e.g. 一{ch})")
            if digit == "两" and unit == 10:
                raise NumeralError(f"{whole!r} has 两 before 十: 20 is 二十")
            skipped = unit * 10 < last_unit
            if zero and not skipped:
                raise NumeralError(f"{whole!r} has 零 but no place is skipped before {ch}")
            if started and skipped and not zero:
                notes.add("zero_left_out")
            if digit is None:
                notes.add("bare_shi") if started else None
            elif unit == 10 and digit == "一" and not started:
                notes.add("yi_shi")
            total += (1 if digit is None else _DIGIT[digit]) * unit
            digit, last_unit, zero, started = None, unit, False, True
    if zero and digit is None:
        raise NumeralError(f"{whole!r} ends a group with 零: zeros at the end are silent")
    if zero and last_unit == 10:
        raise NumeralError(f"{whole!r} has 零 but no place is skipped before the last digit")
    if digit is not None:
        if started and not zero and last_unit > 10:
            notes.add("short")  # 一百一 = 110, 三万五 = 35000: the digit counts one place down
            total += _DIGIT[digit] * last_unit // 10
        else:
            if digit == "两" and not before_wan:
                raise NumeralError(f"{whole!r} has 两 where no unit follows: a lone 2 is 二")
            total += _DIGIT[digit]
    return total


def _liang_er_differs(plain: str) -> bool:
    """True when a 2 before a unit is written 两/二 otherwise than rule 4 (两 before 千 and in 两万)."""
    for i, ch in enumerate(plain[:-1]):
        if ch in "二两":
            want = "两" if plain[i + 1] == "千" or (plain[i + 1] == "万" and i == 0) else "二"
            if ch != want:
                return True
    return False


def read(text: str) -> Reading:
    """Read a Chinese numeral written in any common way (see the module doc); the reverse of many writings.

    Raises:
        TypeError: ``text`` is not a str.
        NumeralError: the text names no number in 0 ... 99,999,999; the message says why.

    Example:
        >>> read("两千零二十六").number, read("贰仟零贰拾陆").number, read("一万二").number
        (2026, 2026, 12000)
        >>> read("二千").explain()
        '两/二 chosen differently from the course (两 only before 千 and in 两万); the course writes 两千'
    """
    check_characters(text, ALPHABET)
    chars = set(text)
    notes = set()
    if chars & _FINANCIAL_ONLY:
        if chars & _ORDINARY_ONLY:
            raise NumeralError(f"{text!r} mixes financial numerals (大写: 壹贰叁..., 拾佰仟) with ordinary ones; "
                               f"write it in one of them")
        notes.add("financial")
    if "萬" in chars:
        notes.add("traditional")
    plain = to_ordinary(text)
    if plain == "零":
        return Reading(0, "零", tuple(sorted(notes)))
    if plain.count("万") > 1:
        raise NumeralError(f"{text!r} has more than one 万 (this course reads numbers below 1,0000,0000 only)")
    if plain.startswith("零"):
        raise NumeralError(f"{text!r} starts with 零: a number starts with its first non-zero digit")
    if "万" in plain:
        high, low = plain.split("万")
        if not high:
            raise NumeralError(f"{text!r} starts with 万: a digit must come before it (e.g. 一万)")
        n = _group(high, text, False, notes, before_wan=True) * 10000 + (_group(low, text, True, notes) if low else 0)
    else:
        n = _group(plain, text, False, notes)
    if n > MAX_NUMBER:  # cannot happen with one 万 and groups <= 9999, kept as a guard
        raise NumeralError(f"{text!r} is larger than {MAX_NUMBER:,}")
    standard = to_chinese(n)
    if "financial" not in notes and _liang_er_differs(plain):
        notes.add("liang_er")
    return Reading(n, standard, tuple(k for k in NOTES if k in notes))
