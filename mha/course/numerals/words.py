"""Chinese number words for 0 ... 99,999,999, and a strict reader for them.

The reading rules (the ones taught in Chinese primary school, made exact):

1. **Groups of four.** A number is cut into the 万 group (``n // 10000``) and
   the units group (``n % 10000``); each group of four digits is read with the
   units 千, 百, 十 and a bare last digit; a non-empty 万 group is followed by 万.
   ``99990000 -> 九千九百九十九万``.
2. **零.** Inside a group, a run of zeros between two non-zero digits is read as
   one 零 (``1001 -> 一千零一``, ``2026 -> 两千零二十六``). Zeros at the *end* of a
   group are silent (``1000 -> 一千``, ``10001000 -> 一千万一千``). When the 万
   group is not empty and the units group starts with a zero (1 ... 999), one 零
   joins them (``30500 -> 三万零五百``, ``10001 -> 一万零一``). The number 0 alone
   is 零.
3. **十 vs 一十.** A number that *starts* with a 1 in a 十 place drops the 一
   (``12 -> 十二``, ``100000 -> 十万``, ``150000 -> 十五万``); anywhere else the
   一 is spoken (``110 -> 一百一十``, ``1010 -> 一千零一十``, ``30010 -> 三万零一十``).
4. **两 vs 二.** A 2 directly before 千 is 两 (``2026 -> 两千零二十六``,
   ``12000 -> 一万两千``, ``20000000 -> 两千万``), and so is a 万 group that is
   exactly 2 (``20000 -> 两万``); everywhere else 2 is 二 (``二十``, ``十二``,
   ``二百``, ``二十二万``).

Every number has exactly one reading under these rules. :func:`parse` reads
every common writing (``二千``, ``一十二``, ``一百一``, ``贰仟``: see
:mod:`mha.course.numerals.reader`); ``parse(text, strict=True)`` accepts exactly the
rules' readings and refuses any other, saying how this course writes it
(spoken short forms such as ``一百一`` for 110 are named as such).
"""
from __future__ import annotations

__all__ = ["MAX_NUMBER", "DIGITS", "UNITS", "ALPHABET", "STANDARD_ALPHABET", "to_chinese", "digit_sources", "parse",
           "NumeralError"]

MAX_NUMBER = 99_999_999
DIGITS = "零一二三四五六七八九"
UNITS = "十百千万"
STANDARD_ALPHABET = "零一二两三四五六七八九十百千万"  # every character of a standard reading, in vocabulary order
ALPHABET = STANDARD_ALPHABET + "壹贰叁肆伍陆柒捌玖拾佰仟萬"  # ... and of every writing :func:`parse` accepts

_GROUP_UNITS = ("千", "百", "十", "")  # place names of the four digits of a group, high to low
_VALUE = {c: i for i, c in enumerate(DIGITS)} | {"两": 2}
_UNIT_VALUE = {"十": 10, "百": 100, "千": 1000}


class NumeralError(ValueError):
    """A string that is not a Chinese numeral under this module's rules."""


def _read_group(group: int, leading: bool, exact_two: bool) -> list[tuple[str, int | None]]:
    """Read 1 <= group <= 9999 (rules 2-4) as ``(character, place)`` pairs.

    ``place`` is the power of ten (3 = 千 ... 0 = ones) of the digit that a
    character names, and None for 零 and the unit characters.

    Args:
        leading: this group opens the number (rule 3: a leading 1 in the 十 place is dropped).
        exact_two: read a bare 2 as 两 (the 万 group of 20000, rule 4).
    """
    digits = [group // 1000, group // 100 % 10, group // 10 % 10, group % 10]
    out: list[tuple[str, int | None]] = []
    pending_zero = False
    started = False
    for place, (digit, unit) in zip((3, 2, 1, 0), zip(digits, _GROUP_UNITS)):
        if digit == 0:
            pending_zero = started  # zeros before the first digit are not read inside a group
            continue
        if pending_zero:
            out.append(("零", None))
            pending_zero = False
        if unit == "十" and digit == 1 and leading and not started:
            out.append(("十", place))  # rule 3: 十二, 十万 (the 十 names the digit 1)
        else:
            two = digit == 2 and (unit == "千" or (unit == "" and exact_two and not started))
            out.append(("两" if two else DIGITS[digit], place))  # rule 4
            if unit:
                out.append((unit, None))
        started = True
    return out


def _reading(n: int) -> list[tuple[str, int | None]]:
    """The reading of n as ``(character, place)`` pairs; place = power of ten of the digit a character names."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be an int, got {type(n).__name__}")
    if not 0 <= n <= MAX_NUMBER:
        raise ValueError(f"n must lie in [0, {MAX_NUMBER:,}], got {n:,}")
    if n == 0:
        return [("零", 0)]
    high, low = divmod(n, 10000)
    out: list[tuple[str, int | None]] = []
    if high:
        out += [(c, None if p is None else p + 4) for c, p in _read_group(high, leading=True, exact_two=high == 2)]
        out.append(("万", None))
    if low:
        if high and low < 1000:
            out.append(("零", None))  # rule 2: the units group starts with a zero
        out += _read_group(low, leading=not high, exact_two=False)
    return out


def to_chinese(n: int) -> str:
    """The Chinese reading of ``0 <= n <= 99,999,999`` under the module's rules.

    Example:
        >>> [to_chinese(n) for n in (2026, 30500, 12, 99990000)]
        ['两千零二十六', '三万零五百', '十二', '九千九百九十九万']
    """
    return "".join(c for c, _ in _reading(n))


def digit_sources(n: int) -> list[int | None]:
    """For each Arabic digit of n (left to right), the index of the Chinese character that names it.

    Zeros are named by no character (None): they are implied by 零 or by the
    units around them. The 1 of a leading 十 is named by the 十 itself.

    Example:
        >>> to_chinese(30500), digit_sources(30500)
        ('三万零五百', [0, None, 3, None, None])
    """
    digits = str(n)
    where = {p: i for i, (_, p) in enumerate(_reading(n)) if p is not None}
    return [where.get(len(digits) - 1 - k) if d != "0" else None for k, d in enumerate(digits)]


_SHORT_FORM_PLACE = {"百": 10, "千": 100, "万": 1000}  # 一百一 = 110, 三千五 = 3500, 一万一 = 11000


def _spoken_short_form(text: str) -> int | None:
    """The number a spoken short form names (``一百一`` -> 110), or None if ``text`` is not one.

    Everyday speech drops the unit after a final digit that directly follows 百, 千 or 万:
    that digit then counts in the next place down. (After 十 nothing is dropped: 十一 is 11.)
    """
    if len(text) < 3 or text[-2] not in _SHORT_FORM_PLACE or _VALUE.get(text[-1], 0) == 0:
        return None
    try:
        n = _value(text[:-1], text) + _VALUE[text[-1]] * _SHORT_FORM_PLACE[text[-2]]
    except NumeralError:
        return None
    return n if n <= MAX_NUMBER and to_chinese(n) != text else None


def _value(text: str, whole: str) -> int:
    """Lenient value of a string over the alphabet (may accept non-canonical forms)."""
    if text.count("万") > 1:
        raise NumeralError(f"{whole!r} 里不止一个“万”（本课程只读一亿以下的数）")
    if "万" in text:
        high, low = text.split("万")
        if not high:
            raise NumeralError(f"{whole!r} 以“万”开头：“万”前面要有数字（例如 一万）")
        return _group_value(high, whole) * 10000 + (_group_value(low, whole) if low else 0)
    return _group_value(text, whole)


def _group_value(text: str, whole: str) -> int:
    total, digit, last_unit = 0, None, 10000
    for ch in text:
        if ch in _VALUE:
            if digit is not None and (digit != 0 or _VALUE[ch] == 0):
                raise NumeralError(f"{whole!r} 里有两个数字连在一起，中间缺了单位")
            digit = _VALUE[ch]
        elif ch in _UNIT_VALUE:
            unit = _UNIT_VALUE[ch]
            if unit >= last_unit:
                raise NumeralError(f"{whole!r} 在同一组里重复或颠倒了单位千、百、十")
            if digit == 0:
                raise NumeralError(f"{whole!r} 的“零”后面直接跟着单位")
            total += (1 if digit is None else digit) * unit
            digit, last_unit = None, unit
        else:  # 万 was split off by the caller
            raise NumeralError(f"{whole!r} 的“万”位置不对")
    if digit:
        total += digit
    if total > 9999:
        raise NumeralError(f"{whole!r} 有一组大于 9999")
    return total


def check_characters(text, alphabet: str) -> None:
    """Refuse a non-str (TypeError), an empty string or one with a character outside ``alphabet`` (NumeralError)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not text:
        raise NumeralError("输入是空的：请写一个中文数字，例如 两千零二十六")
    unknown = [(i, ch) for i, ch in enumerate(text) if ch not in alphabet]
    if unknown:
        listed = "、".join(f"第 {i + 1} 个字 {ch!r}" for i, ch in unknown[:5])  # counted from 1, as readers do
        raise NumeralError(f"{text!r} 里有不是数字用字的字符：{listed}；"
                           f"可以用的字：{alphabet}")


def parse(text: str, strict: bool = False) -> int:
    """The number a Chinese numeral names: any common writing, or (``strict=True``) the standard reading only.

    Without ``strict`` this is ``mha.course.numerals.reader.read(text).number``: 二千, 一十二, 一百一,
    贰仟零贰拾陆 are all read (see :mod:`mha.course.numerals.reader`, whose :class:`~mha.course.numerals.reader.Reading`
    also says how the course writes the number). With ``strict=True`` only the module's rules are accepted,
    the inverse of :func:`to_chinese`.

    Raises:
        NumeralError: for an empty string, a character outside :data:`ALPHABET`
            (:data:`STANDARD_ALPHABET` when strict)
            (named, with its position), or a string that does not follow the
            rules; when the string names a number in a non-standard way the
            message gives the standard reading (``二千`` -> ``两千``).

    Example:
        >>> parse("三万零五百")
        30500
    """
    if not isinstance(strict, bool):
        raise TypeError(f"strict must be a bool, got {type(strict).__name__}")
    if not strict:
        from .reader import read

        return read(text).number
    check_characters(text, STANDARD_ALPHABET)
    spoken = _spoken_short_form(text)
    if spoken is not None:
        raise NumeralError(f"{text!r} 是 {spoken} 的口语简写（最后一个数字落在下一位上）；"
                           f"本课程把它写全：{to_chinese(spoken)!r}")
    n = _value(text, text)
    if n > MAX_NUMBER:  # cannot happen with one 万 and groups <= 9999, kept as a guard
        raise NumeralError(f"{text!r} 大于 {MAX_NUMBER:,}")
    canonical = to_chinese(n)
    if canonical != text:
        raise NumeralError(f"{text!r} 不是本课程写 {n} 的方式：标准读法是 {canonical!r}")
    return n
