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

__all__ = ["FONT_FILE", "FAMILY", "cjk_font", "register_cjk_font", "required_characters", "use_cjk_fallback"]

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

    matplotlib (>= 3.6) looks a missing glyph up in the next family of ``font.sans-serif``, so Latin
    letters, digits and mathtext keep DejaVu Sans and Chinese labels come from the subset.
    """
    import matplotlib

    family = register_cjk_font()
    fallback = [f for f in matplotlib.rcParams["font.sans-serif"] if f != family]
    if "DejaVu Sans" in fallback:
        fallback.remove("DejaVu Sans")
    matplotlib.rcParams["font.family"] = ["sans-serif"]
    matplotlib.rcParams["font.sans-serif"] = ["DejaVu Sans", family, *fallback]


def cjk_font(size: float | None = None, weight: str = "normal") -> FontProperties:
    """``FontProperties`` of the shipped subset, for ``fontproperties=`` of any matplotlib text."""
    register_cjk_font()
    return FontProperties(fname=str(FONT_FILE), size=size, weight=weight)


def required_characters() -> str:
    """Every character the figures may draw with :func:`cjk_font`: ASCII, symbols, numerals, figure text."""
    from ..numerals.words import ALPHABET
    from .numerals import CHINESE_TEXT as numerals_text
    from .transformer import CHINESE_TEXT as transformer_text

    chars = set(ASCII) | set(EXTRA) | set(ALPHABET)
    for text in numerals_text + transformer_text:
        chars |= set(text)
    chars.discard("\n")
    return "".join(sorted(chars))
