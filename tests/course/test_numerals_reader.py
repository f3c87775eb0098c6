"""mha.course.numerals.reader: every common way of writing a number is read, only non-numbers are refused.

Two independent writers from PyPI (cn2an, pycnnum: test-only dependencies) write the numbers in their own
styles (二千, 一百一, 大写, 萬); the reader must give back every number they wrote.
"""
import random

import cn2an
import pycnnum
import pytest

from mha.course.numerals import MAX_NUMBER, NumeralError, parse, to_chinese
from mha.course.numerals.reader import NOTES, read, to_ordinary


def _numbers():
    rng = random.Random(7)
    numbers = list(range(0, 3000)) + [rng.randrange(10 ** rng.randrange(1, 9)) for _ in range(4000)]
    numbers += [int("".join(rng.choice("0001") for _ in range(8))) for _ in range(1000)]  # zero-rich, repeated 1s
    return numbers + [MAX_NUMBER, 10 ** 7, 20000, 100000]


NUMBERS = _numbers()
WRITERS = {
    "cn2an": lambda n: cn2an.an2cn(n),                    # 二千零二十六, 一万零一十, 十五万
    "cn2an financial": lambda n: cn2an.an2cn(n, "up"),   # 贰仟零贰拾陆, 壹拾伍万
    "pycnnum": lambda n: pycnnum.num2cn(n),               # 一百一, 一千万一 (short forms)
    "pycnnum financial": lambda n: pycnnum.num2cn(n, upper=True),  # 拾贰, 叁萬零伍佰
    "pycnnum 两": lambda n: pycnnum.num2cn(n, alt_2=True),  # 两百, 两千两百二十两万
}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_reads_back_what_independent_writers_wrote(writer):
    write = WRITERS[writer]
    wrong = [(n, write(n)) for n in NUMBERS if read(write(n)).number != n]
    assert not wrong, wrong[:10]


def test_the_course_readings_are_standard_and_other_writings_are_named():
    for n in NUMBERS:
        reading = read(to_chinese(n))
        assert reading == (n, to_chinese(n), ()) and reading.is_standard and reading.explain() == "标准读法"
    nonstandard = [n for n in NUMBERS if cn2an.an2cn(n) != to_chinese(n)]
    assert len(nonstandard) > 1000
    for n in nonstandard:
        reading = read(cn2an.an2cn(n))
        assert reading.notes and reading.standard == to_chinese(n) and to_chinese(n) in reading.explain()


@pytest.mark.parametrize("text, number, notes", [
    ("二千零二十六", 2026, ("liang_er",)), ("两百", 200, ("liang_er",)), ("二万", 20000, ("liang_er",)),
    ("二万三千", 23000, ("liang_er",)), ("二十两万", 220000, ("liang_er",)),
    ("一十二", 12, ("yi_shi",)), ("一十万", 100000, ("yi_shi",)), ("一百十二", 112, ("bare_shi",)),
    ("一万零十二", 10012, ("bare_shi",)), ("一万一十", 10010, ("zero_left_out",)),
    ("三万五百", 30500, ("zero_left_out",)),
    ("一百一", 110, ("short",)), ("三万五", 35000, ("short",)), ("一万二", 12000, ("short",)),
    ("两千五", 2500, ("short",)), ("两万两", 22000, ("short",)), ("一千万一", 10001000, ("short",)),
    ("一万两千五", 12500, ("short",)), ("一万二千五", 12500, ("short", "liang_er")),
    ("贰仟零贰拾陆", 2026, ("financial",)), ("壹万", 10000, ("financial",)), ("拾贰", 12, ("financial",)),
    ("壹拾贰", 12, ("financial", "yi_shi")), ("叁萬零伍佰", 30500, ("financial", "traditional")),
    ("零", 0, ()), ("十二", 12, ()), ("三万零五百", 30500, ()),
])
def test_known_writings(text, number, notes):
    reading = read(text)
    assert (reading.number, reading.notes) == (number, notes)
    assert parse(text) == number
    assert all(k in NOTES for k in notes)


@pytest.mark.parametrize("text, needle", [
    ("", "输入是空的"), ("五零", "两个数字连在一起"), ("一二", "两个数字连在一起"), ("十十", "单位"),
    ("一千零一百", "没有跳过哪一位"), ("一十零五", "没有跳过哪一位"), ("两千零零一", "连着两个“零”"),
    ("一百零", "末尾的 0 不读出来"), ("零五", "以“零”开头"), ("万", "以“万”开头"),
    ("一万万", "不止一个“万”"), ("百", "前面缺一个数字"), ("两十", "在“十”前面用了“两”"), ("十两", "单独的 2 写作 二"),
    ("两", "单独的 2 写作 二"), ("壹百", "混在一起"), ("一亿", "'亿'"), ("2026", "第 1 个字 '2'"),
])
def test_refuses_only_what_is_not_a_number(text, needle):
    with pytest.raises(NumeralError) as info:
        read(text)
    assert needle in str(info.value), str(info.value)


def test_bad_types_and_ordinary_characters():
    with pytest.raises(TypeError, match="str"):
        read(2026)
    with pytest.raises(TypeError, match="bool"):
        parse("十二", strict="yes")
    assert to_ordinary("贰仟零贰拾陆萬") == "二千零二十六万"


def test_strict_keeps_the_old_behaviour():
    assert parse("两千", strict=True) == 2000
    for text in ("二千", "一十二", "一百一", "贰仟"):
        with pytest.raises(NumeralError):
            parse(text, strict=True)
