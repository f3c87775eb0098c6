"""The training writer (mha.course.numerals.styles) and the independent test writer (mha.course.numerals.categories) agree,
every writing reads back, training never sees a held-out number, and the category tests are what they say."""
import random

import pytest

from mha.course.numerals import is_held_out, read, to_chinese
from mha.course.numerals.categories import CATEGORIES, category_tests, write_independently
from mha.course.numerals.data import MAX_SOURCE_LEN, SRC_ID, training_batch
from mha.course.numerals.styles import STYLES, has_short_form, write

NUMBERS = list(range(0, 20_000)) + random.Random(5).sample(range(20_000, 100_000_000), 20_000)
OPTIONS = {"standard": {}, "二": {"two": "二"}, "两百": {"two": "两百"}, "一十": {"yi_shi": True},
           "short": {"short": True}, "大写": {"upper": True}}


@pytest.mark.parametrize("style", STYLES)
def test_two_independent_writers_agree_and_read_back(style):
    rng = random.Random(0)
    for n in NUMBERS:
        text = write_independently(n, **OPTIONS[style])
        assert write(n, style, None) == text, (n, style)
        assert read(text).number == n and len(text) <= MAX_SOURCE_LEN and all(ch in SRC_ID for ch in text)
        assert read(write(n, style, rng)).number == n


def test_styles_change_what_they_should():
    assert [write(n, s) for n, s in [(2026, "二"), (200, "两百"), (12, "一十"), (110, "short"), (35000, "short"),
                                     (12000, "short"), (2026, "大写"), (150000, "大写"), (100, "short")]] == [
        "二千零二十六", "两百", "一十二", "一百一", "三万五", "一万二", "贰仟零贰拾陆", "壹拾伍万", "一百"]
    assert write_independently(30500, upper=True, wan="萬") == "叁萬零伍佰"
    assert has_short_form(110) and not has_short_form(1010) and not has_short_form(30500)
    with pytest.raises(ValueError, match="style"):
        write(12, "roman")


def test_training_batches_mix_styles_and_never_hold_out():
    rng = random.Random(1)
    seen_styles = set()
    for _ in range(50):
        batch = training_batch(rng, 64)
        assert not any(map(is_held_out, batch.numbers))
        for n, text in zip(batch.numbers, batch.words):
            reading = read(text)
            assert reading.number == n
            seen_styles |= set(reading.notes)
    assert {"financial", "traditional", "short", "yi_shi", "liang_er"} <= seen_styles


def test_category_tests_are_held_out_and_match_their_names():
    tests = category_tests(per_category=100)
    assert list(tests) == list(CATEGORIES) and tests == category_tests(per_category=100)
    for name, (numbers, writings) in tests.items():
        assert len(set(numbers)) == len(numbers) >= 50 and all(map(is_held_out, numbers)), name
        assert [read(w).number for w in writings] == numbers, name
    assert all(len(str(n)) == 6 and str(n)[0] == "1" for n in tests["十X万…（6 位，首位 1）"][0])
    assert all(str(n).count("0") == 2 for n in tests["恰好两个 0"][0])
    assert all(0 < n % 10_000 < 1000 and n >= 10_000 for n in tests["零跨过万（X万零Y）"][0])
    assert all(read(w).notes == ("short",) or "liang_er" in read(w).notes
               for w in tests["写法：口语简写（一百一、三万五）"][1])
    assert all(w != to_chinese(n) for n, w in zip(*tests["写法：大写（萬）"]))
