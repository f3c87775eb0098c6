"""Chapter 13's chance baseline for where a head looks while writing a 0: only the words in which a 0 is written."""
import pytest

pytest.importorskip("torch")

from mha.course.numerals import make_batch  # noqa: E402
from mha.course.numerals.analysis import zero_step_kind_shares  # noqa: E402


def test_shares_are_averaged_over_zero_steps_of_the_words_that_write_them():
    # 105 一百零五: one 0, kinds 2 digit / 1 unit / 1 零; 20 二十: one 0, 1 digit / 1 unit;
    # 1000 一千: three 0s, 1 digit / 1 unit; 37 三十七 and 0 零 write no 0 that counts.
    shares = zero_step_kind_shares(make_batch([105, 20, 1000, 37, 0]))
    assert shares == pytest.approx({"digit": (2 / 4 + 1 / 2 + 3 * 1 / 2) / 5, "unit": (1 / 4 + 1 / 2 + 3 * 1 / 2) / 5,
                                    "万": 0.0, "零": (1 / 4) / 5})


def test_no_zero_step_gives_zero_shares():
    assert zero_step_kind_shares(make_batch([37, 0])) == {"digit": 0.0, "unit": 0.0, "万": 0.0, "零": 0.0}
