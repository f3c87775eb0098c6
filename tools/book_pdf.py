"""``make pdf``: the whole book as one PDF, printed by Chromium from Sphinx's single-page HTML.

Route: ``jupyter-book build . --builder singlehtml`` writes every chapter, in the TOC's
order and with its numbers, into one page whose formulas are already KaTeX HTML (tools/site_math.py),
whose figures are the site's images and whose outputs are the stored ones. This script serves that
folder on 127.0.0.1, opens the page in the pinned Debian Chromium (playwright, as the browser tests
do), lets the page's own scripts draw the interactive figures (their static, default state) and the
self-checks (options, no answers: feedback appears only after a click), adds the print stylesheet
``tools/book_pdf.css`` (wrapped code, a page break before each chapter, no navigation) and a table
of contents, and prints with Chromium's ``outline`` (PDF bookmarks from the headings), ``tagged``
and page numbers in the footer. A LaTeX route would need a CJK TeX installation (xeCJK, ~1 GB)
and would lose the interactive figures and self-checks, which only exist as HTML.

Usage: ``python tools/book_pdf.py [SINGLEHTML_DIR] [OUT.pdf]`` (defaults: _build/singlehtml,
_build/release/mha-course-<version>.pdf).
"""
from __future__ import annotations

import os
import pathlib
import shutil
import sys
import time

import site_report
from local_server import serve

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("MHA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CSS = pathlib.Path(__file__).with_name("book_pdf.css")
PRINT_PAGE = "book.html"  # the single page, copied to the folder's root so its relative links resolve
FOOTER = ('<div style="width:100%;font-size:8px;color:#555;text-align:center;">'
          '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')

# Marks each chapter's section (singlehtml puts <span id="document-DOCNAME"> before it), writes
# the table of contents after the title page's heading, and drops the title's "#" permalink signs.
PREPARE = r"""(meta) => {
  const chapters = [];
  for (const marker of document.querySelectorAll('span[id^="document-"]')) {
    const section = marker.nextElementSibling;
    if (!section || section.tagName !== 'SECTION') continue;
    section.classList.add('mha-chapter');
    const h = section.querySelector('h1, h2');
    if (!h) continue;
    // an anchor of our own: docutils' ids (id1, id2...) repeat from one chapter to the next
    const anchor = document.createElement('span');
    anchor.id = 'mha-pdf-chapter-' + chapters.length;
    section.prepend(anchor);
    const title = h.cloneNode(true);
    title.querySelectorAll('.headerlink').forEach(e => e.remove());
    // a formula in a title as its TeX source (W^O), as the site's <title> has it
    title.querySelectorAll('.katex').forEach(k => {
      const tex = k.querySelector('annotation');
      k.replaceWith(tex ? tex.textContent : k.textContent);
    });
    chapters.push([anchor.id, title.textContent.trim()]);
  }
  const first = document.querySelector('article section');
  const h1 = first && first.querySelector('h1');
  const nav = document.createElement('nav');
  nav.className = 'mha-pdf-toc';
  nav.innerHTML = '<p class="mha-pdf-meta"></p><h2 class="mha-pdf-toc-title">目录</h2><ol></ol>';
  nav.querySelector('.mha-pdf-meta').textContent = meta;
  const list = nav.querySelector('ol');
  for (const [id, text] of chapters) {
    const li = document.createElement('li');
    const a = document.createElement('a');
    a.href = '#' + id;
    a.textContent = text;
    li.appendChild(a);
    list.appendChild(li);
  }
  if (h1) h1.after(nav);
  return chapters;
}"""

# The second pass: each entry of the table of contents gets its page number.
PAGE_NUMBERS = r"""(pages) => {
  for (const a of document.querySelectorAll('.mha-pdf-toc a')) {
    const n = pages[a.getAttribute('href').slice(1)];
    if (n === undefined) continue;
    const span = document.createElement('span');
    span.className = 'mha-pdf-page';
    span.textContent = n;
    a.appendChild(span);
  }
}"""

# Ready to print: every image decoded, every interactive figure drawn (vega's svg or canvas).
READY = r"""() => {
  const imgs = [...document.images].every(i => i.complete);
  const figs = [...document.querySelectorAll('.mha-vega-figure')].every(f => f.querySelector('svg, canvas'));
  return imgs && figs && document.fonts.status === 'loaded';
}"""


def single_page(folder: pathlib.Path) -> pathlib.Path:
    """The singlehtml builder writes the root document (book/intro) with links relative to the root."""
    found = sorted(folder.glob("book/*.html"))
    if len(found) != 1:
        raise RuntimeError(f"expected one page in {folder}/book/ from `jupyter-book build . --builder singlehtml`, "
                           f"found {[p.name for p in found]}")
    target = folder / PRINT_PAGE
    shutil.copyfile(found[0], target)
    return target


def print_pdf(folder: pathlib.Path, out: pathlib.Path) -> list:
    """Print the single page in ``folder`` to ``out``; returns the chapter titles in order."""
    from playwright.sync_api import sync_playwright

    page_file = single_page(folder)
    version = site_report.version()
    meta = f"版本 {version} · 代码 MIT 许可，文字与图 CC BY-SA 4.0"
    out.parent.mkdir(parents=True, exist_ok=True)
    options = dict(format="A4", print_background=True, outline=True, tagged=True, display_header_footer=True,
                   header_template="<span></span>", footer_template=FOOTER,
                   margin={"top": "16mm", "bottom": "16mm", "left": "15mm", "right": "15mm"})
    with serve(folder) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        ctx = browser.new_context(viewport={"width": 900, "height": 1200}, locale="zh-CN", color_scheme="light",
                                  service_workers="block")
        ctx.add_init_script("localStorage.setItem('mode', 'light'); localStorage.setItem('theme', 'light');")
        # offline: only the local server answers (the PDF must not depend on a CDN either)
        ctx.route("**/*", lambda r: r.continue_() if r.request.url.startswith(base) or r.request.url.startswith("data:")
                  else r.abort())
        page = ctx.new_page()
        page.goto(f"{base}/{page_file.name}", wait_until="load", timeout=120_000)
        page.add_style_tag(content=CSS.read_text(encoding="utf-8"))
        chapters = page.evaluate(PREPARE, meta)
        page.wait_for_function(READY, timeout=120_000)
        page.emulate_media(media="print")
        page.wait_for_timeout(500)
        # first pass: where each chapter starts (Chromium names a destination for every linked id);
        # the table of contents is one page, so writing the numbers in moves no chapter
        first = page.pdf(**options)
        starts = chapter_pages(first, [cid for cid, _ in chapters])
        page.evaluate(PAGE_NUMBERS, starts)
        page.pdf(path=str(out), **options)
        browser.close()
    return [title for _, title in chapters]


def chapter_pages(pdf: bytes, ids: list) -> dict:
    """The page (1-based) each of ``ids`` starts on, from the PDF's named destinations."""
    import io

    try:
        import pypdf
    except ImportError as exc:
        raise RuntimeError("make pdf needs pypdf (pinned in requirements.txt): pip install -r requirements.txt") from exc
    reader = pypdf.PdfReader(io.BytesIO(pdf))
    named = {name.lstrip("/"): dest for name, dest in reader.named_destinations.items()}
    missing = [i for i in ids if i not in named]
    if missing:
        raise RuntimeError(f"the printed PDF has no destination for the chapters {missing}")
    return {i: reader.get_destination_page_number(named[i]) + 1 for i in ids}


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    folder = pathlib.Path(argv[0]) if argv else ROOT / "_build" / "singlehtml"
    out = pathlib.Path(argv[1]) if len(argv) > 1 else ROOT / "_build" / "release" / site_report.names()["pdf"]
    start = time.perf_counter()
    chapters = print_pdf(folder, out)
    print(f"PDF: {out} ({out.stat().st_size / 1e6:.1f} MB, {len(chapters)} chapters and pages, "
          f"printed in {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
