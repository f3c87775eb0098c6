"""Build ``mha/course/data/fonts/mha-cjk-subset.otf``: the characters our figures use, cut from Noto Sans CJK SC.

Run after changing the Chinese text of a figure (``mha.course.pictures.cjk.required_characters``)::

    python tools/subset_font.py [path/to/NotoSansCJK-Regular.ttc]

The source font comes from Debian's ``fonts-noto-cjk`` (``apt-get install fonts-noto-cjk``);
it is licensed under the SIL Open Font License 1.1, which allows subsetting and
redistribution with the license attached. The subset gets a new family name
(a Modified Version must not use the original's name) and keeps the copyright
and license name records; ``LICENSE-OFL.txt`` is written next to it. Output is
byte-for-byte reproducible (no timestamp).
"""
from __future__ import annotations

import pathlib
import sys

from fontTools import subset
from fontTools.ttLib import TTCollection, TTFont

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mha.course.pictures.cjk import FAMILY, FONT_FILE, required_characters  # noqa: E402

DEFAULT_SOURCE = pathlib.Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
SOURCE_FAMILY = "Noto Sans CJK SC"
POSTSCRIPT = "MHACourseCJK-Regular"
DEBIAN_COPYRIGHT = pathlib.Path("/usr/share/doc/fonts-noto-cjk/copyright")


def load_source(path: pathlib.Path) -> TTFont:
    """The Simplified Chinese face of a Noto CJK collection (or the font itself for an .otf)."""
    if path.suffix.lower() == ".ttc":
        for font in TTCollection(str(path)).fonts:
            if font["name"].getDebugName(1) == SOURCE_FAMILY:
                return font
        raise SystemExit(f"{path} holds no {SOURCE_FAMILY!r} face")
    return TTFont(str(path))


def ofl_text() -> str:
    """The OFL 1.1 text, as Debian ships it in the package's copyright file."""
    lines = DEBIAN_COPYRIGHT.read_text(encoding="utf-8").splitlines()
    start = lines.index("License: SIL-1.1", lines.index("License: SIL-1.1") + 1) + 1
    text = []
    for line in lines[start:]:
        if not line.startswith(" "):
            break
        text.append("" if line.strip() == "." else line[1:])
    return "\n".join(text).strip() + "\n"


def build(source: pathlib.Path = DEFAULT_SOURCE, out: pathlib.Path = FONT_FILE) -> str:
    font = load_source(source)
    chars = required_characters()
    missing = [c for c in chars if ord(c) not in font.getBestCmap()]
    if missing:
        raise SystemExit(f"the source font lacks {missing}")
    options = subset.Options()
    options.name_IDs = [0, 1, 2, 3, 4, 5, 6, 13, 14]  # copyright, names, version, license
    options.name_languages = [0x0409]
    options.layout_features = ["kern", "liga"]
    options.notdef_outline = True
    options.recalc_timestamp = False
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=[ord(c) for c in chars])
    subsetter.subset(font)
    copyright_line = font["name"].getDebugName(0)
    name = font["name"]
    for record in list(name.names):
        if record.nameID in (1, 3, 4, 6, 16, 17):
            name.removeNames(nameID=record.nameID)
    name.setName(FAMILY, 1, 3, 1, 0x409)
    name.setName(f"{FAMILY} Regular", 4, 3, 1, 0x409)
    name.setName(f"{POSTSCRIPT};subset of {SOURCE_FAMILY} for mha", 3, 3, 1, 0x409)
    name.setName(POSTSCRIPT, 6, 3, 1, 0x409)
    cff = font["CFF "].cff
    top = cff.topDictIndex[0]
    cff.fontNames = [POSTSCRIPT]
    for key, value in (("FullName", f"{FAMILY} Regular"), ("FamilyName", FAMILY)):
        if hasattr(top, key):
            setattr(top, key, value)
    out.parent.mkdir(parents=True, exist_ok=True)
    font.recalcTimestamp = False  # keep the source's date: the same bytes on every rebuild
    font.save(str(out))
    license_file = out.parent / "LICENSE-OFL.txt"
    license_file.write_text(
        f"{out.name} is a subset of {SOURCE_FAMILY} (Noto CJK, https://github.com/notofonts/noto-cjk),\n"
        f"renamed to {FAMILY!r} and cut to the characters the course's figures use by tools/subset_font.py.\n\n"
        f"Copyright: {copyright_line}\n"
        "Noto is a trademark of Google Inc.\n\n" + ofl_text(), encoding="utf-8")
    return chars


if __name__ == "__main__":
    source = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_SOURCE
    chars = build(source)
    print(f"wrote {FONT_FILE.relative_to(ROOT)} ({FONT_FILE.stat().st_size:,} bytes, {len(chars)} characters)")
