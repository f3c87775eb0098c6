"""A lenient reader of Chinese numerals 0 ... 99,999,999: every common way of writing a number.

:func:`read` accepts, besides the course's standard reading (:func:`mha.course.numerals.to_chinese`):

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
# (in Chinese: Reading.explain() and the CLI's --explain show them to the reader)
NOTES = {
    "financial": "大写数字",
    "traditional": "用繁体“萬”写“万”",
    "short": "口语简写（最后一个数字落在下一位上）",
    "zero_left_out": "省略了“零”（单位仍然说清了每一位）",
    "yi_shi": "写了“一十”，课程在这里写“十”",
    "bare_shi": "写了“十”，课程在这里写“一十”",
    "liang_er": "“两”和“二”的用法和课程不同（课程只在“千”前面和“两万”里用“两”）",
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
        """A short Chinese sentence for the reader: ``"标准读法"``, or the notes and how the course writes it."""
        if self.is_standard:
            return "标准读法"
        return "；".join(NOTES[k] for k in self.notes) + f"；课程写作 {self.standard}"


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
                raise NumeralError(f"{whole!r} 里有两个数字连在一起，中间缺了单位")
            if zero:
                raise NumeralError(f"{whole!r} 里连着两个“零”：一个“零”就代表中间所有连续的 0")
            if not started:
                raise NumeralError(f"{whole!r} 的“零”前面还没有数字")
            zero = True
        elif ch in _DIGIT:
            if digit is not None:
                raise NumeralError(f"{whole!r} 里有两个数字连在一起，中间缺了单位")
            digit = ch
        else:  # a unit
            unit = _UNIT[ch]
            if unit >= last_unit:
                raise NumeralError(f"{whole!r} 在同一组里重复或颠倒了单位千、百、十")
            if digit is None and unit != 10:
                raise NumeralError(f"{whole!r} 的“{ch}”前面缺一个数字（例如 一{ch}）")
            if digit == "两" and unit == 10:
                raise NumeralError(f"{whole!r} 在“十”前面用了“两”：20 写作 二十")
            skipped = unit * 10 < last_unit
            if zero and not skipped:
                raise NumeralError(f"{whole!r} 写了“零”，可是“{ch}”前面并没有跳过哪一位")
            if started and skipped and not zero:
                notes.add("zero_left_out")
            if digit is None:
                notes.add("bare_shi") if started else None
            elif unit == 10 and digit == "一" and not started:
                notes.add("yi_shi")
            total += (1 if digit is None else _DIGIT[digit]) * unit
            digit, last_unit, zero, started = None, unit, False, True
    if zero and digit is None:
        raise NumeralError(f"{whole!r} 的一组以“零”结尾：末尾的 0 不读出来")
    if zero and last_unit == 10:
        raise NumeralError(f"{whole!r} 写了“零”，可是最后一个数字前面并没有跳过哪一位")
    if digit is not None:
        if started and not zero and last_unit > 10:
            notes.add("short")  # 一百一 = 110, 三万五 = 35000: the digit counts one place down
            total += _DIGIT[digit] * last_unit // 10
        else:
            if digit == "两" and not before_wan:
                raise NumeralError(f"{whole!r} 的“两”后面没有单位：单独的 2 写作 二")
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
        '“两”和“二”的用法和课程不同（课程只在“千”前面和“两万”里用“两”）；课程写作 两千'
    """
    check_characters(text, ALPHABET)
    chars = set(text)
    notes = set()
    if chars & _FINANCIAL_ONLY:
        if chars & _ORDINARY_ONLY:
            raise NumeralError(f"{text!r} 把大写数字（壹贰叁……、拾佰仟）和普通数字混在一起了；"
                               f"只用其中一种来写")
        notes.add("financial")
    if "萬" in chars:
        notes.add("traditional")
    plain = to_ordinary(text)
    if plain == "零":
        return Reading(0, "零", tuple(sorted(notes)))
    if plain.count("万") > 1:
        raise NumeralError(f"{text!r} 里不止一个“万”（本课程只读一亿以下的数）")
    if plain.startswith("零"):
        raise NumeralError(f"{text!r} 以“零”开头：一个数从它第一个不是 0 的数字写起")
    if "万" in plain:
        high, low = plain.split("万")
        if not high:
            raise NumeralError(f"{text!r} 以“万”开头：“万”前面要有数字（例如 一万）")
        n = _group(high, text, False, notes, before_wan=True) * 10000 + (_group(low, text, True, notes) if low else 0)
    else:
        n = _group(plain, text, False, notes)
    if n > MAX_NUMBER:  # cannot happen with one 万 and groups <= 9999, kept as a guard
        raise NumeralError(f"{text!r} 大于 {MAX_NUMBER:,}")
    standard = to_chinese(n)
    if "financial" not in notes and _liang_er_differs(plain):
        notes.add("liang_er")
    return Reading(n, standard, tuple(k for k in NOTES if k in notes))
