"""Chinese text in figures: the shipped font subset covers every character, and no figure misses a glyph."""
import json
import pathlib
import subprocess
import sys
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from fontTools.ttLib import TTFont  # noqa: E402

from mha.course.numerals.words import ALPHABET  # noqa: E402
from mha.course.pictures import cjk, numerals as viz_numerals, transformer as viz_transformer  # noqa: E402
from mha.course.pictures import plot_block_heads, plot_head_panels, plot_head_table, plot_loss, plot_transformer  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
MISSING = ("missing from font", "Glyph")


def _cmap():
    return TTFont(str(cjk.FONT_FILE)).getBestCmap()


def test_subset_covers_every_character_the_figures_use():
    cmap = _cmap()
    needed = set(cjk.required_characters())
    assert set(ALPHABET) <= needed
    for text in viz_numerals.CHINESE_TEXT + viz_transformer.CHINESE_TEXT:
        assert set(text) - {"\n"} <= needed
    missing = sorted(c for c in needed if ord(c) not in cmap)
    assert not missing, f"run python tools/subset_font.py: the subset lacks {missing}"


def test_subset_is_small_renamed_and_licensed():
    font = TTFont(str(cjk.FONT_FILE))
    assert cjk.FONT_FILE.stat().st_size < 100_000
    assert font["name"].getDebugName(1) == cjk.FAMILY and "Noto" not in font["name"].getDebugName(1)
    license_text = (cjk.FONT_FILE.parent / "LICENSE-OFL.txt").read_text(encoding="utf-8")
    assert "SIL OPEN FONT LICENSE Version 1.1" in license_text and "Adobe" in license_text


def test_subset_is_what_the_tool_builds(tmp_path):
    source = pathlib.Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
    if not source.exists():
        pytest.skip("fonts-noto-cjk is not installed (apt-get install fonts-noto-cjk); the committed subset is used")
    import subset_font

    out = tmp_path / "font.otf"
    subset_font.build(source, out)
    assert out.read_bytes() == cjk.FONT_FILE.read_bytes(), "the committed subset is stale: run tools/subset_font.py"


def _figures():
    weights = torch.rand(2, 4, 5, 6).softmax(-1)  # (layers, h, L, S)
    rows, cols = list("20260"), list("两千零二十六")
    yield "plot_transformer", lambda: plot_transformer().figure
    for block in ("encoder", "decoder", "cross"):
        yield f"plot_block_heads[{block}]", lambda block=block: plot_block_heads(list(weights), block, rows, cols)
    yield "plot_head_panels", lambda: plot_head_panels(list(weights[0]), rows, cols,
                                                       [viz_numerals.step_label(s) for s in range(4)],
                                                       suptitle=viz_numerals.row_label("cross", 1), annotate=True)
    yield "plot_loss", lambda: plot_loss([2.0, 1.0, 0.1, 0.01], 20).figure
    labels = [viz_numerals.row_label(b, l) for b in ("encoder", "decoder", "cross") for l in range(2)]
    yield "plot_head_table", lambda: plot_head_table(torch.rand(6, 4) * 50, labels,
                                                     [viz_numerals.head_label(h) for h in range(4)]).figure


def _draw(make):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = make()
        fig.canvas.draw()  # glyphs are looked up while drawing
        plt.close(fig)
    return [str(w.message) for w in caught if any(m in str(w.message) for m in MISSING)]


@pytest.mark.parametrize("name, make", list(_figures()), ids=[n for n, _ in _figures()])
def test_figures_draw_every_glyph(name, make):
    assert _draw(make) == []


def test_a_missing_glyph_is_detected():
    """The check above can fail: a character outside the subset does raise the warning."""
    def make():
        fig, ax = plt.subplots()
        ax.set_title("龘", fontproperties=cjk.cjk_font())
        return fig

    assert _draw(make), "matplotlib no longer warns about missing glyphs: the figure tests would pass blindly"


def test_figures_render_without_a_system_cjk_font(tmp_path):
    """A fresh process whose matplotlib sees no system fonts at all (like Colab, which has no CJK font)."""
    code = (
        "import warnings, matplotlib; matplotlib.use('Agg')\n"
        "from matplotlib import font_manager\n"
        "font_manager.fontManager.ttflist = [f for f in font_manager.fontManager.ttflist\n"
        "                                    if 'matplotlib' in f.fname]  # bundled DejaVu only\n"
        "from mha.course.pictures import plot_transformer\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    plot_transformer().figure.canvas.draw()\n"
        "bad = [str(x.message) for x in w if 'missing' in str(x.message) or 'Glyph' in str(x.message)]\n"
        "assert not bad, bad\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr


def test_chapter_13_stored_outputs_have_no_missing_glyph_warnings():
    nb = json.loads((ROOT / "book" / "13_trained_heads.ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
            assert not any(m in text for m in ("missing from font", "findfont")), text


@pytest.mark.parametrize("L, S", [(9, 11), (9, 15), (5, 6)])
def test_heatmaps_are_readable_on_a_phone(L, S):
    """Smallest text >= 9 CSS px when a 390 px phone shows the figure in its ~358 px column."""
    maps = [torch.rand(4, L, S).softmax(-1) for _ in range(2)]
    rows, cols = [str(i % 10) for i in range(L)], list("六千零七十万八千零九十两百万")[:S] + ["零"] * max(0, S - 14)
    for fig in (viz_numerals.plot_block_heads(maps, "cross", rows, cols, layer=1),
                plot_head_panels([m[0] for m in maps] * 2, rows, cols, ["训练 0 步"] * 4),
                plot_head_table(torch.rand(6, 4), ["交叉注意力 第 1 层"] * 6, ["头 1"] * 4).figure,
                plot_loss([1.0, 0.5, 0.1], 20).figure):
        fig.canvas.draw()
        assert viz_numerals.smallest_text_css_px(fig) >= 9.0, fig.get_size_inches()
        plt.close(fig)
    wide = plt.figure(figsize=(12, 3))
    wide.text(0.5, 0.5, "十", fontsize=10)
    assert viz_numerals.smallest_text_css_px(wide) < 9.0  # the old 4-panel rows: 10 pt on a 12 inch figure
    plt.close(wide)


@pytest.mark.parametrize("block, word, number", [("encoder", "六千零七十万八千零九十", 60708090), ("decoder", None, 60708090),
                                                 ("cross", "六千零七十万八千零九十", 60708090), ("cross", "一百四十九万零五", 1490005)])
def test_heatmap_labels_do_not_overlap(block, word, number):
    """No two tick labels touch: 11 characters (六千零七十万八千零九十) get one panel a row, "<bos>" stands upright."""
    reads, writes = ["<bos>"] + list(str(number)), list(str(number)) + ["<eos>"]
    rows, cols = {"encoder": (list(word or ""), list(word or "")), "decoder": (reads, reads),
                  "cross": (writes, list(word or ""))}[block]
    maps = [torch.rand(4, len(rows), len(cols)).softmax(-1) for _ in range(2)]
    fig = viz_numerals.plot_block_heads(maps, block, rows, cols, layer=1)
    try:
        assert viz_numerals.overlapping_labels(fig) == []
        assert viz_numerals.smallest_text_css_px(fig) >= 9.0
    finally:
        plt.close(fig)


def test_overlapping_labels_sees_labels_that_touch():
    fig, ax = plt.subplots(figsize=(1.0, 1.0))
    ax.set_xticks(range(11))
    ax.set_xticklabels(list("六千零七十万八千零九十"), fontproperties=viz_numerals.cjk_font(viz_numerals.TICK_PT))
    try:
        assert viz_numerals.overlapping_labels(fig)   # 11 characters on one inch: they collide
    finally:
        plt.close(fig)


def test_chapter_13_stored_heatmaps_keep_9_css_px_text():
    """The stored PNG (tight bounding box) shown 358 CSS px wide: TICK_PT text stays >= 9 CSS px."""
    import base64
    import io

    from PIL import Image

    nb = json.loads((ROOT / "book" / "13_trained_heads.ipynb").read_text(encoding="utf-8"))
    widths = []
    for cell in nb["cells"]:
        if not any(f in "".join(cell["source"]) for f in ("plot_block_heads(", "plot_head_panels(", "plot_head_table(")):
            continue
        for out in cell.get("outputs", []):
            if "image/png" in out.get("data", {}):
                png = Image.open(io.BytesIO(base64.b64decode(out["data"]["image/png"]))).size[0]
                # a 2x PNG is shown at the CSS width in its metadata (mha.course.pictures.png_text)
                widths.append(out.get("metadata", {}).get("image/png", {}).get("width", png))
    assert len(widths) == 6   # encoder, decoder, cross, zero- and mean-ablation tables, training snapshots
    assert all(viz_numerals.TICK_PT * 100 / 72 * min(1.0, 358 / w) >= 9.0 for w in widths), widths
