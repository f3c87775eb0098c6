"""The built website in a real browser (headless Debian chromium driven by playwright).

The site (built once per session by the ``built_site`` fixture) is served on
127.0.0.1 by a thread; every request to any other host is aborted and recorded,
so the pages are checked as a reader without access to CDNs or Google sees them.

For every page of _toc.yml: no console errors, every formula rendered by the
KaTeX at build time (no raw TeX left in the text, no KaTeX errors, no math
JavaScript), every image
loaded, no sideways scrolling at phone width, and on notebook pages the Colab
link opens that notebook. A Chinese search finds the expected chapters.
Screenshots go to _build/screenshots/{desktop,phone}/.

Without a browser these tests skip with a message; with MHA_REQUIRE_BROWSER=1
(set by .ci/run) a missing browser is a failure.
"""
from __future__ import annotations

import json
import re
import time

import pytest

import site_probe
from site_browser import CHROMIUM, CHROMIUM_ARGS, DESKTOP, PAGE_OVERFLOW, PAGE_READY, PHONE, SHOTS, network_gate
from site_pages import ROOT, colab_url, pages

PAGES = pages()
NOTEBOOK_PAGES = [p for p in PAGES if p.is_notebook]
# A learner's query and the page that must be among its first three results (Pagefind splits
# the Chinese of query and pages alike, so compound terms are found).
SEARCHES = {
    "交叉注意力": "book/10_masks", "位置编码": "book/02_qkv_sources", "自注意力": "book/02_qkv_sources",
    "注意力权重": "book/05_parallel_attention", "缩放点积": "book/05_parallel_attention",
    "多头注意力": "book/01_what_is_mha", "因果掩码": "book/10_masks", "填充掩码": "book/10_masks",
    "分头": "book/04_split_heads", "拼接": "book/06_concat", "KV 缓存": "book/12_production",
    "交叉 注意力": "book/10_masks",
    # what learners type that the book does not write (tools/static/mha-search.js rewrites it)
    "为什么除以根号": "book/05_parallel_attention", "根号 d_k": "book/05_parallel_attention",
    "multi head attention": "book/01_what_is_mha", "Multi-Head Attention": "book/01_what_is_mha",
    "英文 query key value": "book/02_qkv_sources", "QKV 是什么": "book/02_qkv_sources",
    "self attention": "book/02_qkv_sources", "scaled dot product attention": "book/05_parallel_attention",
    "positional encoding": "book/02_qkv_sources", "causal mask": "book/10_masks", "怎么分头": "book/04_split_heads",
    "concat 是什么意思": "book/06_concat",
}
# First-visit weight (uncompressed bytes, cache off): a page with an interactive figure carries vega.
MAX_BYTES = 1.5e6
MAX_BYTES_FIGURES = 2.5e6
DARK = "dark"  # the phone pass reads the pages in the dark colour mode, the desktop pass in light



# Runs in the page once it has loaded: everything the checks need, in one round trip.
INSPECT = r"""async () => {
  const imgs = [...document.images];
  imgs.forEach(i => { if (i.loading === 'lazy') i.loading = 'eager'; });
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => {
    i.addEventListener('load', r); i.addEventListener('error', r); setTimeout(r, 5000); })));
  const broken = imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src'));
  const maths = [...document.querySelectorAll('.math')];
  const unrendered = maths.filter(m => !m.querySelector('.katex')).map(m => m.textContent.trim().slice(0, 100));
  const merrors = [...document.querySelectorAll('.katex-error, .mha-math-error')].map(m => m.getAttribute('title') || m.textContent);
  const skip = 'pre, code, script, style, textarea, noscript, .katex, .highlight';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {acceptNode: n =>
    (n.parentElement && !n.parentElement.closest(skip)) ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT});
  const tex = /\$\$|\\\(|\\\[|\\(frac|sqrt|text|mathrm|mathbf|top|cdot|times|left|right|begin|end|operatorname|dots|qquad)(?![a-zA-Z])|\$[^$\s][^$\n]{0,80}\$/;
  const raw = [];
  while (walker.nextNode()) { const t = walker.currentNode.textContent; if (tex.test(t)) raw.push(t.trim().slice(0, 120)); }
  return {
    title: document.title, lang: document.documentElement.lang,
    broken_images: broken, images: imgs.length,
    math: maths.length, rendered: maths.filter(m => m.querySelector('.katex .katex-mathml math')).length,
    math_scripts: [...document.scripts].map(s => s.src).filter(s => /mathjax|katex/i.test(s)),
    unrendered_math: unrendered, math_errors: merrors, raw_tex: raw,
    colab: [...document.querySelectorAll('a[href*="colab.research.google.com"]')].map(a => a.href),
    overflow_px: PAGE_OVERFLOW,
    clipped_inline: maths.filter(m => m.closest('article') && !m.closest('div.math')).filter(m => {
      const r = m.getBoundingClientRect(), box = m.closest('p, li, td, dd, div') || document.body;
      const b = box.getBoundingClientRect();
      return r.width > 0 && (r.right > Math.min(document.documentElement.clientWidth, b.right) + 1 || r.left < b.left - 1);
    }).map(m => m.textContent.trim().slice(0, 60)),
    wide_display: [...document.querySelectorAll('div.math > .katex-display')]
      .filter(d => d.scrollWidth > d.clientWidth + 1)
      .map(d => ({tabindex: d.getAttribute('tabindex'), shadow: /radial-gradient/.test(getComputedStyle(d).backgroundImage),
                  scrolls: getComputedStyle(d).overflowX === 'auto'})),
    widest: [...document.querySelectorAll('article *')]
      .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
      .slice(-3).map(e => `${e.tagName.toLowerCase()}.${[...e.classList].join('.')}: ${e.textContent.trim().slice(0, 60)}`),
  };
}""".replace("PAGE_OVERFLOW", PAGE_OVERFLOW)

def _visit(page, url: str, log: list) -> dict:
    start = time.perf_counter()
    page.goto(url, wait_until="load")
    page.wait_for_function(PAGE_READY, timeout=20_000)
    weight = site_probe.first_visit_bytes(page)  # what opening the page fetched (before INSPECT loads lazy images)
    report = page.evaluate(INSPECT)
    report["bytes"] = weight
    report["seconds"] = round(time.perf_counter() - start, 2)
    return report


@pytest.fixture(scope="module")
def browsed(sync_playwright, server):  # the browser check first: no site build just to skip
    """Open every page (desktop, then phone width) once; collect what the tests assert."""
    for sub in ("desktop", "phone"):
        (SHOTS / sub).mkdir(parents=True, exist_ok=True)
    outside, reports, searches = [], {}, {}
    current = {"page": None}
    gate = network_gate(outside, current)

    def watch(page, log):
        page.on("console", lambda m: log.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: log.append(f"uncaught: {e}"))
        page.on("response", lambda r: log.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
        page.on("requestfailed", lambda r: log.append(f"request failed: {r.url} ({r.failure})"))

    start = time.perf_counter()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        desktop = browser.new_context(viewport=DESKTOP, locale="zh-CN", service_workers="block")
        phone = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True,
                                    locale="zh-CN", service_workers="block", color_scheme="dark")
        phone.add_init_script(f"localStorage.setItem('mode', '{DARK}'); localStorage.setItem('theme', '{DARK}');")
        for ctx in (desktop, phone):
            ctx.route("**/*", gate)
            ctx.set_default_timeout(30_000)

        # the gate itself must work: a request to a CDN is aborted and recorded
        probe = desktop.new_page()
        current["page"] = "probe"
        probe.goto(f"{server}/book/intro.html", wait_until="load")
        probe.evaluate("() => fetch('https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js').then(() => 'ok', () => 'blocked')")
        probe.close()

        for view, ctx in (("desktop", desktop), ("phone", phone)):
            for p in PAGES:
                current["page"] = p.name
                log = []
                page = ctx.new_page()
                watch(page, log)
                site_probe.fresh(page)  # a first visit: the cache is off
                report = _visit(page, f"{server}/{p.html}", log)
                report["axe"] = site_probe.axe(page)
                report["mode"] = page.evaluate("() => document.documentElement.dataset.theme")
                page.screenshot(path=str(SHOTS / view / f"{p.name}.png"))
                page.close()
                report["errors"] = log
                reports[(view, p.name)] = report

        page = desktop.new_page()
        page.goto(f"{server}/book/intro.html", wait_until="load")
        page.wait_for_function(PAGE_READY)
        page.screenshot(path=str(SHOTS / "desktop" / "intro-full.png"), full_page=True)
        page.close()
        for view, ctx in (("desktop", desktop), ("phone", phone)):
            current["page"] = f"search:{view}"
            log = []
            page = ctx.new_page()
            watch(page, log)
            for i, query in enumerate(SEARCHES):
                found = site_probe.search(page, server, query)
                searches.setdefault(query, {"results": found, "errors": log})
                if i == 0:
                    page.screenshot(path=str(SHOTS / view / "search.png"))
                    searches[f"axe:{view}"] = site_probe.axe(page)
            page.close()
        browser.close()
    seconds = time.perf_counter() - start
    summary = {f"{v}/{n}": {"MB": round(r["bytes"]["total"] / 1e6, 2),
                            "axe_critical_serious": len(site_probe.severe(r["axe"])),
                            "axe_all": len(r["axe"]), "wide_formulas": len(r["wide_display"])} for (v, n), r in reports.items()}
    ranks = {q: [_doc(x["href"]) for x in r["results"][:3]] for q, r in searches.items() if not q.startswith("axe:")}
    (SHOTS / "report.json").write_text(json.dumps(
        {"seconds": round(seconds, 1), "summary": summary, "search_top3": ranks, "outside": outside, "searches": searches,
         "pages": {f"{v}/{n}": r for (v, n), r in reports.items()}}, ensure_ascii=False, indent=1), encoding="utf-8")
    return {"outside": outside, "pages": reports, "searches": searches, "seconds": seconds}


def test_the_network_gate_blocks_and_records_outside_requests(browsed):
    assert ("probe", "https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js") in browsed["outside"]


def test_pages_request_nothing_outside_the_site(browsed):
    outside = [(page, url) for page, url in browsed["outside"] if page != "probe"]
    assert not outside, f"pages asked for resources outside the site (blocked here, slow or blocked for readers): {outside}"


@pytest.mark.parametrize("view", ["desktop", "phone"])
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_console_errors(browsed, page, view):
    errors = browsed["pages"][(view, page.name)]["errors"]
    assert not errors, f"{page.html} ({view}): {errors}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_formula_is_rendered(browsed, page):
    r = browsed["pages"][("desktop", page.name)]
    assert not r["unrendered_math"], f"formulas not rendered at build time: {r['unrendered_math'][:5]}"
    assert not r["math_scripts"], f"a page loads math JavaScript: {r['math_scripts']}"
    assert not r["math_errors"], f"TeX errors: {r['math_errors'][:5]}"
    assert not r["raw_tex"], f"raw TeX visible in the text: {r['raw_tex'][:5]}"
    assert r["rendered"] >= r["math"]


def test_landing_page_formulas_are_typeset(browsed):
    r = browsed["pages"][("desktop", "intro")]
    assert r["math"] >= 2 and r["rendered"] >= r["math"], r


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_image_loads(browsed, page):
    r = browsed["pages"][("desktop", page.name)]
    assert not r["broken_images"], f"images that did not load: {r['broken_images']}"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES, ids=lambda p: p.name)
def test_colab_link_opens_this_notebook(browsed, page):
    links = browsed["pages"][("desktop", page.name)]["colab"]
    assert links and set(links) == {colab_url(page)}, links


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_phone_width_has_no_sideways_scrolling(browsed, page):
    r = browsed["pages"][("phone", page.name)]
    assert r["overflow_px"] <= 1, (f"{page.html} is {r['overflow_px']} px wider than a {PHONE['width']} px phone; "
                                   f"sticking out: {r['widest']}")


@pytest.mark.parametrize("view", ["desktop", "phone"])
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_inline_formula_is_cut_off(browsed, page, view):
    r = browsed["pages"][(view, page.name)]
    assert not r["clipped_inline"], f"{page.html} ({view}): inline formulas past the edge of their line: {r['clipped_inline']}"


@pytest.mark.parametrize("view", ["desktop", "phone"])
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_wide_display_formulas_scroll_and_show_it(browsed, page, view):
    bad = [w for w in browsed["pages"][(view, page.name)]["wide_display"]
           if not (w["scrolls"] and w["shadow"] and w["tabindex"] == "0")]
    assert not bad, f"{page.html} ({view}): wide formulas that do not scroll, show no edge shadow or take no focus: {bad}"


def test_chapter_13_opening_formula_fits_a_desktop_column(browsed):
    # it used to lose "99990000" at the right edge; other wide formulas scroll (report.json counts them)
    assert not browsed["pages"][("desktop", "13_trained_heads")]["wide_display"]


def _doc(href: str) -> str:
    return re.sub(r"\.html.*$", "", href)


@pytest.mark.parametrize("query", SEARCHES)
def test_chinese_search_ranks_the_page_in_the_top_three(browsed, query):
    result = browsed["searches"][query]
    assert not result["errors"], result["errors"]
    ranked = [_doc(r["href"]) for r in result["results"]]
    assert SEARCHES[query] in ranked[:3], f"searching {query!r} should rank {SEARCHES[query]} in the top 3: {ranked[:5]}"


TEX = re.compile(r"\\[a-zA-Z]+|\$|\^\{|_\{")


def test_search_snippets_show_no_raw_tex(browsed):
    raw = [(q, r["snippet"]) for q, s in browsed["searches"].items() if not q.startswith("axe:")
           for r in s["results"] if TEX.search(r["snippet"])]
    assert not raw, f"search snippets with TeX source: {raw[:3]}"


# code in a snippet: a call, an assignment, a cell's fold hint (the index holds prose only: tools/site_search.py)
CODE = re.compile(r"\b(?:plt|torch|np|mha)\.\w+\(|\w+ = \w+[.(]|点击(?:显示|隐藏)代码")


def test_search_snippets_are_prose(browsed):
    code = [(q, r["snippet"]) for q, s in browsed["searches"].items() if not q.startswith("axe:")
            for r in s["results"][:3] if CODE.search(r["snippet"])]
    assert not code, f"search snippets showing code: {code[:3]}"


def _is_figure_page(page) -> bool:
    html = (ROOT / "_build" / "html" / page.html).read_text(encoding="utf-8")
    return "vega-embed" in html


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_first_visit_weight(browsed, page):
    weight = browsed["pages"][("desktop", page.name)]["bytes"]
    limit = MAX_BYTES_FIGURES if _is_figure_page(page) else MAX_BYTES
    assert weight["total"] <= limit, (f"{page.html} fetches {weight['total'] / 1e6:.2f} MB on a first visit "
                                      f"(limit {limit / 1e6} MB); largest: {weight['largest']}")
    assert not weight["fontawesome"], f"{page.html} fetches Font Awesome (icons are CSS masks): {weight['fontawesome']}"
    assert not [u for _, u in weight["largest"] if "searchindex" in u]


@pytest.mark.parametrize("view", ["desktop", "phone"])
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_serious_accessibility_violations(browsed, page, view):
    r = browsed["pages"][(view, page.name)]
    assert r["mode"] == ("light" if view == "desktop" else DARK)
    assert not site_probe.severe(r["axe"]), f"{page.html} ({view}, {r['mode']}): {site_probe.severe(r['axe'])}"


@pytest.mark.parametrize("view", ["desktop", "phone"])
def test_search_page_is_accessible(browsed, view):
    assert not site_probe.severe(browsed["searches"][f"axe:{view}"])
