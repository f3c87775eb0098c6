"""A small CJK font shipped with the package, so Chinese labels render everywhere.

matplotlib's default font (DejaVu Sans) has no Chinese glyphs, and Colab has
no CJK font installed: a Chinese label would come out as empty boxes. The
package therefore ships ``mha/course/data/fonts/mha-cjk-subset.otf``, a subset of
Noto Sans CJK SC (SIL Open Font License 1.1, see ``LICENSE-OFL.txt`` next to
it) holding printable ASCII plus exactly the Chinese characters that the
figures use. ``tools/subset_font.py`` rebuilds it from
:func:`required_characters`; a test fails when a figure needs a character the
subset lacks.
"""
from __future__ import annotations

import functools
import pathlib

from matplotlib import font_manager
from matplotlib.font_manager import FontProperties

__all__ = ["CHAPTER_TEXT", "FONT_FILE", "FAMILY", "cjk_font", "register_cjk_font", "required_characters",
           "source_characters", "use_cjk_fallback"]

FONT_FILE = pathlib.Path(__file__).resolve().parents[1] / "data" / "fonts" / "mha-cjk-subset.otf"
FAMILY = "MHA Course CJK"  # renamed: a modified OFL font must not keep the original's name
ASCII = "".join(chr(c) for c in range(0x20, 0x7F))
EXTRA = "−×→←↑↓…·≈≤≥①②③④（）：，、。；％"  # symbols that labels and tick marks may use


@functools.lru_cache(maxsize=None)
def register_cjk_font() -> str:
    """Add the shipped subset to matplotlib's font list (once); return its family name."""
    if not FONT_FILE.exists():
        raise FileNotFoundError(f"the CJK font subset is missing: {FONT_FILE} (run python tools/subset_font.py)")
    font_manager.fontManager.addfont(str(FONT_FILE))
    return FAMILY


def use_cjk_fallback() -> None:
    """Let every matplotlib text fall back to the shipped subset for glyphs DejaVu Sans lacks.

    matplotlib (>= 3.6) looks a missing glyph up in the next family of ``font.family``, so Latin
    letters, digits and mathtext keep DejaVu Sans and Chinese labels come from the subset.
    """
    import matplotlib

    family = register_cjk_font()
    # the fallback works across the families named in font.family (a generic "sans-serif" resolves to one)
    matplotlib.rcParams["font.family"] = ["DejaVu Sans", family]


def cjk_font(size: float | None = None, weight: str = "normal") -> FontProperties:
    """``FontProperties`` of the shipped subset, for ``fontproperties=`` of any matplotlib text."""
    register_cjk_font()
    return FontProperties(fname=str(FONT_FILE), size=size, weight=weight)


# Chinese characters that the chapters' own figure labels use (titles and axis labels written in a
# notebook cell rather than in a pictures module); tests/course/test_figure_text.py keeps it complete.
CHAPTER_TEXT = "位置变化量维度输入输出第个头句权重平均分数方差个数前向反向准确率训练步数损失回看距离内存峰值时间序列长度毫秒字节原始缩放后键值查询上且些偶写即参合同哪型奇好式弦归征显样案模源特答融"


def _is_cjk(c: str) -> bool:
    return "\u3000" <= c <= "\u9fff" or "\uff00" <= c <= "\uffef"


def source_characters() -> set:
    """The CJK characters written in the figure code (mha/course/pictures, the widgets' static figures and the
    the numbers they draw)."""
    here = pathlib.Path(__file__).resolve().parent
    chars = set()
    for path in sorted(here.glob("*.py")) + sorted((here.parent / "widgets").glob("*.py")) + sorted(
            (here.parent / "figure_data").glob("*.py")):
        chars |= {c for c in path.read_text(encoding="utf-8") if _is_cjk(c)}
    return chars


def required_characters() -> str:
    """Every character the figures may draw: ASCII, symbols, numerals, figure code and chapter labels."""
    from ..numerals.words import ALPHABET
    from .numerals import CHINESE_TEXT as numerals_text
    from .transformer import CHINESE_TEXT as transformer_text

    chars = set(ASCII) | set(EXTRA) | set(ALPHABET) | set(CHAPTER_TEXT) | source_characters()
    for text in numerals_text + transformer_text:
        chars |= set(text)
    chars.discard("\n")
    return "".join(sorted(chars))
