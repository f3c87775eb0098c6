"""Figure alt texts written from the numbers the figure shows (chapter 13; usable by any chapter).

A chapter that draws measured heads, layers or steps records, in a hidden ``remove-cell``, the alt text it
wrote from its numbers and the texts each figure draws (``figure_texts``), keyed by the ``ALTS["key"]`` that
the check cell after the figure assigns. nbval keeps that record equal to a fresh run; these tests keep the
alt the site shows (the cell's ``mystnb.image.alt``) equal to the record, and fail when an alt names a head,
layer or training step that the figure does not draw.

    python tests/course/test_numerals_alts.py book/13_trained_heads.ipynb --write   # copy the record into the alts
"""
from __future__ import annotations

import json
import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHAPTERS = ["book/13_trained_heads.ipynb"]

# "第 2 层", "第 1、2 层"; "头 3"; "训练 300 步", "第 0、300、1000 步" (a list names each of its numbers)
NAMES = {"layer": re.compile(r"第 ?((?:\d+、)*\d+) ?层"), "head": re.compile(r"头 ?(\d+)"),
         "step": re.compile(r"((?:\d+、)*\d+) ?步")}
KEY = re.compile(r'ALTS(?:\["(\w+)"\] =| = \{"(\w+)")')


def named(text: str) -> set[tuple[str, int]]:
    """The heads, layers and steps a text names: ``{("head", 3), ("layer", 2), ("step", 300), ...}``."""
    return {(kind, int(n)) for kind, rx in NAMES.items() for m in rx.finditer(text) for n in m.group(1).split("、")}


def alt_problems(alt: str, texts) -> list[str]:
    """What ``alt`` names that none of the figure's ``texts`` names (empty: the alt describes what is drawn)."""
    shown = set().union(*(named(t) for t in texts)) if texts else set()
    return [f"{kind} {n}" for kind, n in sorted(named(alt) - shown)]


def _source(cell) -> str:
    return "".join(cell["source"])


def recorded(nb: dict) -> dict:
    """``{key: {"alt": ..., "texts": [...]}}``: the record the chapter printed (empty if it has none)."""
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and "ALTS.items()" in _source(cell):
            return json.loads("".join("".join(o["text"]) for o in cell["outputs"] if o.get("name") == "stdout"))
    return {}


def figures(nb: dict):
    """Yield ``(index, cell, key)`` for every cell with a PNG; key: the ALTS entry the next code cell records, or None."""
    cells = nb["cells"]
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code" or not any("image/png" in o.get("data", {}) for o in cell["outputs"]):
            continue
        after = next((c for c in cells[i + 1:] if c["cell_type"] == "code"), None)
        m = KEY.search(_source(after)) if after else None
        yield i, cell, (m.group(1) or m.group(2)) if m else None


def shown_alt(cell) -> str:
    return cell["metadata"].get("mystnb", {}).get("image", {}).get("alt", "")


def _load(path) -> dict:
    return json.loads((ROOT / path).read_text(encoding="utf-8"))


def test_the_checker_catches_an_alt_naming_what_is_not_drawn():
    drawn = ["第 2 层 头 1", "第 2 层 头 3", "训练 0 步", "训练 2500 步"]
    assert alt_problems("第 2 层头 1 和头 3 在训练第 0、2500 步", drawn) == []
    assert alt_problems("第 2 层头 2", drawn) == ["head 2"]
    assert alt_problems("第 1 层头 1", drawn) == ["layer 1"]
    assert alt_problems("训练第 0、300、2500 步", drawn) == ["step 300"]
    assert alt_problems("2 层 4 个头", drawn) == []          # a count is not a name


@pytest.mark.parametrize("path", CHAPTERS)
def test_each_measured_figure_has_its_own_alt_from_the_record(path):
    nb = _load(path)
    record = recorded(nb)
    assert record, f"{path}: no recorded alts (the remove-cell that prints ALTS)"
    keys = []
    for i, cell, key in figures(nb):
        alt = shown_alt(cell)
        assert alt, f"{path} cell {i}: a figure without alt text"
        images = sum("image/png" in o.get("data", {}) for o in cell["outputs"])
        assert images == 1, f"{path} cell {i}: {images} figures share one alt"
        if key is None:   # a diagram, not a measurement: it may not name heads, layers or steps
            assert not named(alt), f"{path} cell {i}: names {named(alt)} but records no alt from data"
            continue
        keys.append(key)
        assert alt == record[key]["alt"], f"{path} cell {i} ({key}): the alt is not the one written from the numbers"
    assert sorted(keys) == sorted(record), "every recorded alt belongs to exactly one figure"


@pytest.mark.parametrize("path", CHAPTERS)
def test_no_alt_names_a_head_layer_or_step_the_figure_does_not_draw(path):
    for key, entry in recorded(_load(path)).items():
        assert alt_problems(entry["alt"], entry["texts"]) == [], key


def write(path) -> None:
    """Copy each recorded alt into its figure cell's metadata (run after re-executing the chapter)."""
    nb = _load(path)
    record = recorded(nb)
    for _, cell, key in figures(nb):
        if key is not None:
            cell["metadata"].setdefault("mystnb", {}).setdefault("image", {})["alt"] = record[key]["alt"]
    (ROOT / path).write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] != "--write":
        sys.exit("usage: python tests/course/test_numerals_alts.py NOTEBOOK --write")
    write(sys.argv[1])
