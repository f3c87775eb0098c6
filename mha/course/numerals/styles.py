"""The writing styles the model is trained on: the standard reading, rewritten as people also write it.

:func:`write` turns the standard reading (:func:`mha.course.numerals.to_chinese`) of a number into one
of the common writings that :func:`mha.course.numerals.read` accepts:

* ``"standard"``: 两千零二十六;
* ``"二"``: 二 before 千 and in 二万 (二千零二十六), ``"两百"``: 两 also before 百 (两百);
* ``"一十"``: a leading 十 spoken with its 一 (一十二, 一十五万);
* ``"short"``: the spoken short form when the number has one (一百一, 三万五, 两千五);
* ``"大写"``: financial numerals (贰仟零贰拾陆, 壹拾贰), with 万 or 萬.

This is the *training* writer; the chapter's per-category test uses an independent one
(:mod:`mha.course.numerals.categories`), so that a bug here cannot hide in the measurement.
"""
from __future__ import annotations

import random

from .words import to_chinese

__all__ = ["STYLES", "STYLE_WEIGHTS", "has_short_form", "write", "sample_style"]

STYLES = ("standard", "二", "两百", "一十", "short", "大写")
STYLE_WEIGHTS = (3, 1, 1, 1, 2, 2)  # relative frequency in training (a style a number lacks falls back to standard)
_UPPER = dict(zip("零一二两三四五六七八九十百千", "零壹贰贰叁肆伍陆柒捌玖拾佰仟"))
_UNIT_PLACE = {"十": 1, "百": 2, "千": 3, "万": 4}


def _short(words: str) -> str | None:
    """The spoken short form of a standard reading, or None: drop a final 十/百/千 that follows its next-higher unit."""
    if len(words) < 4 or words[-1] not in "十百千" or words[-3] not in "百千万":
        return None
    if _UNIT_PLACE[words[-3]] != _UNIT_PLACE[words[-1]] + 1:
        return None
    last = words[-2]
    return words[:-2] + ("二" if last == "两" else last)  # 一万两千 -> 一万二


def has_short_form(n: int) -> bool:
    """True when n has a spoken short form (110, 35000, 2500, 10001000; not 100, 1010, 30500)."""
    return _short(to_chinese(n)) is not None


def write(n: int, style: str, rng: random.Random | None = None) -> str:
    """The number ``n`` written in ``style`` (one of :data:`STYLES`); ``rng`` picks 万 or 萬 for 大写.

    A style that does not apply to ``n`` (no short form, no leading 十, no 2) gives the standard reading.
    """
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")
    words = to_chinese(n)
    if style == "二":
        return words.replace("两", "二")
    if style == "两百":
        return words.replace("二百", "两百")
    if style == "一十":
        return "一" + words if words.startswith("十") else words
    if style == "short":
        return _short(words) or words
    if style == "大写":
        wan = "萬" if rng is not None and rng.random() < 0.5 else "万"
        full = "一" + words if words.startswith("十") else words  # 壹拾贰: cheques write every digit
        return "".join(_UPPER.get(ch, wan if ch == "万" else ch) for ch in full)
    return words


def sample_style(rng: random.Random) -> str:
    """One style, drawn with :data:`STYLE_WEIGHTS`."""
    return rng.choices(STYLES, weights=STYLE_WEIGHTS)[0]
