"""Figure text on the website at a 390 px phone: every figure's smallest text >= 9 CSS px, measured.

Same setup as every browser test (tests/browser/conftest.py and tests/support/site_browser.py: the strictly built site served on 127.0.0.1, every
other request aborted and recorded; Debian chromium through playwright). Every page of _toc.yml is
opened at the phone viewport (390 px, as tests/browser/test_browser.py's phone pass) and measured:

* each image a notebook output shows (a chapter's PNG) carries its smallest text in image px (the
  ``tEXt`` chunk ``mha:smallest-text-px`` that ``mha.course.pictures.png_text`` writes when the chapter runs); the
  page shows it at ``rendered / natural`` of its size (``getBoundingClientRect`` against
  ``naturalWidth``), so a reader sees ``smallest * rendered / natural`` CSS px. An output image without
  the chunk fails by name (re-execute its chapter). The landing page's SVG carries the same number
  as its root attribute ``data-mha-smallest-text-px``.
* the text of the interactive figures (vega's SVG, drawn in the page) is measured from the DOM: its
  computed font size times the SVG's scale on screen (``getScreenCTM``).

* every PNG is sharp on a phone's 2-3x screen: at least ``MIN_PX_PER_CSS_PX`` (1.8) image pixels per
  CSS pixel it is shown at (``naturalWidth / rendered width``; the chapters store 2x PNGs whose
  output metadata keeps the 1x display width, mha.course.pictures.png_text).

The image bytes are the ones the site serves (fetched from the page's own URLs), read with Pillow.
Folded outputs are opened first, so a figure is measured at the width a reader sees when opening it.
The minimum per page goes to _build/screenshots/figure_text.json (and is printed).
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import re
from urllib.parse import urljoin

import pytest
from PIL import Image

import site_probe
from site_pages import ROOT, pages
from site_browser import CHROMIUM, CHROMIUM_ARGS, PHONE, SHOTS, phone_context

from mha.course.pictures.png_text import KEY, NO_TEXT
from mha.course.pictures.style import MIN_TEXT_PX

PAGES = pages()
REPORT = SHOTS / "figure_text.json"
MIN_PX_PER_CSS_PX = 1.8  # image px per CSS px of a PNG on the 390 px phone
SVG_ATTRIBUTE = re.compile(rb'<svg\b[^>]*\bdata-mha-smallest-text-px="([^"]+)"')

# Runs in the page: open folded outputs, load every image, then what each image and each SVG text shows.
MEASURE = r"""async () => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  const figures = [...document.querySelectorAll('.mha-vega-figure')];
  const drawn = () => figures.every(f => f.dataset.state === 'drawn');
  for (let i = 0; i < 100 && !drawn(); i++) await new Promise(r => setTimeout(r, 100));
  const imgs = [...document.querySelectorAll('article img')];
  imgs.forEach(i => { if (i.loading === 'lazy') i.loading = 'eager'; });
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => {
    i.addEventListener('load', r); i.addEventListener('error', r); setTimeout(r, 5000); })));
  const images = imgs.map((img, n) => ({
    index: n + 1, src: img.getAttribute('src'), url: img.currentSrc || img.src,
    output: !!img.closest('.cell_output, .output'), alt: (img.alt || '').slice(0, 60),
    natural: img.naturalWidth, rendered: img.getBoundingClientRect().width}));
  const texts = [...document.querySelectorAll('article svg text')].filter(t => t.textContent.trim()).map(t => {
    const m = t.getScreenCTM(), box = t.getBoundingClientRect();
    const figure = t.closest('.mha-vega-figure') || t.closest('svg'), n = figures.indexOf(figure) + 1;
    return {figure: figure.id || (n ? `interactive figure ${n}` : `svg ${figure.getAttribute('aria-label') || ''}`),
            text: t.textContent.trim().slice(0, 40), shown: box.width > 0 && box.height > 0,
            px: parseFloat(getComputedStyle(t).fontSize) * (m ? Math.sqrt(Math.abs(m.a * m.d - m.b * m.c)) : 1)};
  });
  return {images, texts, vega: figures.length, vega_drawn: drawn()};
}"""


def image_text_px(data: bytes) -> str | None:
    """The smallest text an image says it holds, in its own (natural) px: the PNG chunk or the SVG attribute."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return Image.open(io.BytesIO(data)).text.get(KEY)
    found = SVG_ATTRIBUTE.search(data[:4096])
    return found.group(1).decode() if found else None


def output_cells(notebook) -> dict:
    """sha256 of each PNG a notebook stores -> the id of its cell (to name a figure's cell in messages)."""
    if notebook.suffix != ".ipynb":
        return {}
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    return {hashlib.sha256(base64.b64decode(o["data"]["image/png"])).hexdigest(): c.get("id")
            for c in nb["cells"] for o in c.get("outputs", []) if "image/png" in o.get("data", {})}


def measure(page, url: str, cells: dict | None = None) -> dict:
    """Open ``url`` in ``page`` and measure every figure text: {"images": [...], "texts": [...]}."""
    page.goto(url, wait_until="load")
    found = page.evaluate(MEASURE)
    for img in found["images"]:
        data = page.context.request.get(urljoin(url, img["url"])).body()
        img["cell"] = (cells or {}).get(hashlib.sha256(data).hexdigest())
        img["smallest"] = image_text_px(data)
        img["png"] = data[:8] == b"\x89PNG\r\n\x1a\n"
        img["bytes"] = len(data)
        if img["rendered"]:
            img["px_per_css_px"] = round(img["natural"] / img["rendered"], 2)
        if img["smallest"] not in (None, NO_TEXT) and img["natural"]:
            img["css_px"] = round(float(img["smallest"]) * img["rendered"] / img["natural"], 2)
    return found


def problems(name: str, found: dict) -> list:
    """Every figure text below MIN_TEXT_PX CSS px, and every output image that does not say its size."""
    bad = []
    for img in found["images"]:
        cell = f"cell {img['cell']}, " if img.get("cell") else ""
        label = f"{name}: image {img['index']} ({cell}{img['src'].rsplit('/', 1)[-1]}, alt {img['alt']!r})"
        if img["smallest"] is None:
            if img["output"] or img["src"].endswith(".svg"):
                bad.append(f"{label} carries no {KEY} (re-execute the chapter with mha.course.pictures imported)")
        elif img["smallest"] != NO_TEXT:
            if not img["rendered"]:
                bad.append(f"{label} is not shown (0 px wide): its text cannot be read")
            elif img["css_px"] < MIN_TEXT_PX:
                bad.append(f"{label}: smallest text {img['smallest']} px in a {img['natural']} px image shown "
                           f"{img['rendered']:.0f} px wide = {img['css_px']:.1f} CSS px (want >= {MIN_TEXT_PX})")
    for t in found["texts"]:
        if t["shown"] and t["px"] < MIN_TEXT_PX:
            bad.append(f"{name}: {t['figure']!r}, text {t['text']!r} is {t['px']:.1f} CSS px "
                       f"(want >= {MIN_TEXT_PX})")
    return bad


def soft(name: str, found: dict) -> list:
    """Every PNG shown with fewer than MIN_PX_PER_CSS_PX image px per CSS px."""
    return [f"{name}: image {i['index']} ({'cell ' + i['cell'] + ', ' if i.get('cell') else ''}"
            f"{i['src'].rsplit('/', 1)[-1]}): {i['natural']} px shown {i['rendered']:.0f} CSS px wide = "
            f"{i['px_per_css_px']:.2f} px per CSS px (want >= {MIN_PX_PER_CSS_PX}; re-execute the chapter)"
            for i in found["images"] if i["png"] and i.get("px_per_css_px") is not None
            and i["px_per_css_px"] < MIN_PX_PER_CSS_PX]


def smallest(found: dict):
    sizes = [i["css_px"] for i in found["images"] if "css_px" in i] + [t["px"] for t in found["texts"] if t["shown"]]
    return round(min(sizes), 2) if sizes else None


@pytest.fixture(scope="module")
def measured(sync_playwright, server):
    outside, current, results = [], {"page": None}, {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        ctx = phone_context(browser, outside, current)
        for p in PAGES:
            current["page"] = p.name
            page = ctx.new_page()
            results[p.name] = measure(page, f"{server}/{p.html}", output_cells(p.source))
            page.close()
        browser.close()
    summary = {name: {"min_css_px": smallest(f), "images": len(f["images"]), "svg_texts": len(f["texts"]),
                      "below": problems(name, f), "soft": soft(name, f),
                      "min_px_per_css_px": min((i["px_per_css_px"] for i in f["images"] if i["png"] and i.get("px_per_css_px")),
                                               default=None),
                      "png_bytes": sum(i["bytes"] for i in f["images"] if i["png"])} for name, f in results.items()}
    SHOTS.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps({"phone": PHONE, "min_text_px": MIN_TEXT_PX, "summary": summary, "pages": results,
                                  "outside": outside}, ensure_ascii=False, indent=1), encoding="utf-8")
    print("\nsmallest figure text per page (CSS px, 390 px phone):",
          ", ".join(f"{n} {s['min_css_px']}" for n, s in summary.items()))
    return {"pages": results, "outside": outside}


def test_measured_pages_request_nothing_outside_the_site(measured):
    assert not measured["outside"], measured["outside"]


def test_the_book_shows_measured_figures(measured):
    """The measure sees the chapters' figures (not a page of nothing): PNG outputs and vega's text."""
    found = measured["pages"]
    assert sum(1 for f in found.values() for i in f["images"] if i["output"] and i["cell"]) >= 40  # served as stored
    assert all(f["vega_drawn"] for f in found.values())
    assert sum(f["vega"] for f in found.values()) >= 5 and any(f["texts"] for f in found.values())


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_figure_text_is_at_least_9_css_px_on_a_phone(measured, page):
    bad = problems(page.name, measured["pages"][page.name])
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_png_has_at_least_1_8_image_px_per_css_px_on_a_phone(measured, page):
    bad = soft(page.name, measured["pages"][page.name])
    assert not bad, "\n".join(bad)


# ---------------------------------------------------------------- the measure itself can fail

def _png(width: int, height: int, text_px: str | None) -> bytes:
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    if text_px is not None:
        info.add_text(KEY, text_px)
    buf = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buf, format="PNG", pnginfo=info)
    return buf.getvalue()


BAD_PAGE = """<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"></head><body>
<article><div class="cell_output"><img src="small.png" alt="20 px text, 1000 px image shown 300 px wide"
 style="width: 300px"></div>
<div class="cell_output"><img src="plain.png" alt="no chunk"></div>
<div class="cell_output"><img src="fine.png" alt="14 px text at natural size"></div>
<div class="cell_output mha-vega-figure" id="tiny" data-state="drawn">
 <svg width="150" height="50" viewBox="0 0 300 100"><text x="10" y="50" font-size="12">头 1</text></svg></div>
</article></body></html>"""


def test_the_measure_flags_small_scaled_text_and_images_that_do_not_say(sync_playwright, tmp_path):
    (tmp_path / "index.html").write_text(BAD_PAGE, encoding="utf-8")
    (tmp_path / "small.png").write_bytes(_png(1000, 200, "20.00"))
    (tmp_path / "plain.png").write_bytes(_png(200, 100, None))
    (tmp_path / "fine.png").write_bytes(_png(200, 100, "14.00"))
    outside = []
    with site_probe.serve(tmp_path) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = phone_context(browser, outside, {"page": "bad"}).new_page()
        found = measure(page, f"{url}/index.html")
        browser.close()
    bad = problems("bad", found)
    assert len(bad) == 3, bad
    assert "image 1 (small.png" in bad[0] and "= 6.0 CSS px" in bad[0]  # 20 * 300 / 1000
    assert "image 2 (plain.png" in bad[1] and KEY in bad[1]
    assert "'tiny'" in bad[2] and "6.0 CSS px" in bad[2]  # 12 px in an SVG drawn at half its viewBox
    assert smallest(found) == 6.0 and not outside
    # sharpness: 1000 px shown 300 wide is 3.33 px per CSS px; the two 200 px PNGs at natural size are 1.0
    assert [b.split(":")[1].split("(")[1].split(")")[0] for b in soft("bad", found)] == ["plain.png", "fine.png"]
