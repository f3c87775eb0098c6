"""A phone reader finds the way, in Chinese: the chapter list and the page contents open by tap.

Same setup as every browser test (tests/browser/conftest.py and tests/support/site_browser.py: the strictly built site on 127.0.0.1, every other
request aborted; Debian chromium through playwright), on a 390 px phone with touch. On every page of
_toc.yml:

* tapping the visible chapter-list button (the article header's ☰) opens a dialog in which every
  page of the book has a link on screen; tapping the contents button opens one with this page's
  sections (pages with sections); the focus moves into the dialog and back to its button; Escape
  and a tap outside close each one. (pydata-sphinx-theme 0.17 wired only the hidden pair of
  buttons: a tap showed a tooltip and nothing else -- tools/site_html.py, tools/static/mha-site.js.)
* every string a reader meets outside the chapter text (visible text, aria-label, title,
  placeholder, alt), after the theme's scripts ran, is Chinese or a name (Colab, Ctrl, .ipynb);
  the test lists any English left. Mainland usage: no 列印.
"""
from __future__ import annotations

import re

import pytest

from site_pages import pages
from site_browser import CHROMIUM, CHROMIUM_ARGS, PHONE, network_gate, phone_context

PAGES = pages()

# Runs in the page with the side ("primary" / "secondary") whose dialog was just opened.
PANEL = r"""side => {
  const d = document.getElementById(`pst-${side}-sidebar-modal`);
  const r = d.getBoundingClientRect();
  const onScreen = a => { const b = a.getBoundingClientRect();
    return b.width > 0 && b.height > 0 && b.left >= -1 && b.right <= innerWidth + 1 && getComputedStyle(a).visibility !== 'hidden'; };
  const links = [...d.querySelectorAll('a[href]')].filter(onScreen);
  const active = document.activeElement;
  return {open: d.open, width: r.width, left: r.left, name: d.getAttribute('aria-label') || '',
          hrefs: links.map(a => new URL(a.href).pathname.replace(/^\/+/, '')),
          anchors: links.map(a => new URL(a.href).hash).filter(Boolean),
          focus_inside: d.contains(active)};
}"""
STATE = r"""side => ({open: document.getElementById(`pst-${side}-sidebar-modal`).open,
  focus: document.activeElement.matches(`.bd-header-article .${side}-toggle`)})"""

# Every reader-facing string outside the article's own text, after the scripts ran.
STRINGS = r"""() => {
  const out = [];
  const hidden = e => { for (let n = e; n && n !== document; n = n.parentElement) {
    const s = getComputedStyle(n); if (s.display === 'none' || s.visibility === 'hidden') return true; } return false; };
  const skip = 'article, script, style, code, pre, kbd, .katex, noscript, #jb-print-docs-body';
  document.querySelectorAll('*').forEach(e => {
    for (const a of ['aria-label', 'title', 'placeholder', 'alt', 'data-bs-title', 'data-bs-original-title']) {
      const v = e.getAttribute(a);
      if (v && !e.closest('article p, article li, .cell_output')) out.push([a, v.trim(), e.tagName.toLowerCase() + (e.className && typeof e.className === 'string' ? '.' + e.className.split(' ')[0] : '')]);
    }
  });
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {acceptNode: n =>
    (n.parentElement && !n.parentElement.closest(skip) && !hidden(n.parentElement)) ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT});
  while (walker.nextNode()) { const t = walker.currentNode.textContent.trim(); if (t) out.push(['text', t, walker.currentNode.parentElement.tagName.toLowerCase()]); }
  return out;
}"""
# Names that stay as they are: products, keys, file types, the book's code names.
NAMES = {"Colab", "Binder", "Ctrl", "K", ".ipynb", ".pdf", "PDF", "CITATION.cff", "PyTorch", "GitHub"}
_CJK = re.compile(r"[\u3400-\u9fff\uff00-\uffef]")
_WORD = re.compile(r"[A-Za-z]{3,}")


def english(strings) -> list:
    """The strings that hold an English word and no Chinese (names in NAMES pass)."""
    return sorted({(kind, text) for kind, text, _ in strings
                   if text not in NAMES and _WORD.search(text) and not _CJK.search(text)})


@pytest.fixture(scope="module")
def tapped(sync_playwright, server):
    outside, current, results = [], {"page": None}, {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        ctx = phone_context(browser, outside, current)
        for p in PAGES:
            current["page"] = p.name
            page = ctx.new_page()
            errors = []
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            page.goto(f"{server}/{p.html}", wait_until="load")
            found = {"strings": page.evaluate(STRINGS), "errors": errors}
            for side in ("primary", "secondary"):
                button = page.locator(f".bd-header-article .{side}-toggle")
                if not button.count() or not button.is_visible():
                    found[side] = None
                    continue
                button.tap()
                _opens(page, side)
                panel = page.evaluate(PANEL, side)
                found["strings"] += page.evaluate(STRINGS)  # what the open panel says
                page.keyboard.press("Escape")
                panel["after_escape"] = page.evaluate(STATE, side)
                if panel["open"]:
                    button.tap()
                    page.wait_for_function(f"() => document.getElementById('pst-{side}-sidebar-modal').open", timeout=3_000)
                    # outside the panel: the primary one sits at the left, the contents at the right
                    x = PHONE["width"] - 8 if side == "primary" else 8
                    page.touchscreen.tap(x, PHONE["height"] // 2)
                    page.wait_for_timeout(200)
                    panel["after_outside_tap"] = page.evaluate(STATE, side)
                found[side] = panel
            results[p.name] = found
            page.close()
        browser.close()
    return {"pages": results, "outside": outside}


def _opens(page, side) -> bool:
    try:
        page.wait_for_function(f"() => document.getElementById('pst-{side}-sidebar-modal').open", timeout=3_000)
        return True
    except Exception:  # noqa: BLE001  (playwright's TimeoutError: the test reports the closed panel)
        return False


def test_pages_request_nothing_outside_the_site(tapped):
    assert not tapped["outside"], tapped["outside"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_chapter_list_opens_by_tap_with_every_chapter_on_screen(tapped, page):
    found = tapped["pages"][page.name]
    assert not found["errors"], found["errors"]
    panel = found["primary"]
    assert panel is not None, f"{page.html}: no visible chapter-list button at {PHONE['width']} px"
    assert panel["open"], f"{page.html}: tapping the chapter-list button opened nothing"
    missing = [p.html for p in PAGES if p.html not in panel["hrefs"]]
    assert not missing, f"{page.html}: the chapter list shows no link on screen to {missing} (on screen: {panel['hrefs']})"
    assert panel["name"] == "章节目录" and panel["focus_inside"], panel
    assert panel["after_escape"] == {"open": False, "focus": True}, f"Escape: {panel['after_escape']}"
    assert panel["after_outside_tap"]["open"] is False, "a tap outside the chapter list left it open"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_contents_open_by_tap_with_this_pages_sections(tapped, page):
    found = tapped["pages"][page.name]
    html = (server_root() / page.html).read_text(encoding="utf-8")
    sections = re.findall(r'<h2>.*?<a class="headerlink" href="(#[^"]+)"', html)
    panel = found["secondary"]
    if len(sections) < 2:
        pytest.skip(f"{page.html} has no sections to list")
    assert panel is not None, f"{page.html}: no visible contents button at {PHONE['width']} px"
    assert panel["open"], f"{page.html}: tapping the contents button opened nothing"
    missing = [s for s in sections if s not in panel["anchors"]]
    assert not missing, f"{page.html}: the contents show no link on screen to {missing}"
    assert panel["name"] == "本页目录" and panel["focus_inside"], panel
    assert panel["after_escape"] == {"open": False, "focus": True}, f"Escape: {panel['after_escape']}"
    assert panel["after_outside_tap"]["open"] is False, "a tap outside the contents left them open"


def server_root():
    from site_build import HTML

    return HTML


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_english_theme_string_left(tapped, page):
    left = english(tapped["pages"][page.name]["strings"])
    assert not left, f"{page.html}: strings a reader meets in English: {left}"
    taiwanese = [s for _, s, _ in tapped["pages"][page.name]["strings"] if "列印" in s]
    assert not taiwanese, taiwanese


def test_the_string_check_can_fail():
    assert english([("title", "Toggle primary sidebar", "button"), ("text", "章节目录", "span"),
                    ("text", "Colab", "span"), ("aria-label", "Search this book...", "input")]) == [
        ("aria-label", "Search this book..."), ("title", "Toggle primary sidebar")]


# Where the search field's text starts against its magnifier, on search.html and in the search dialog.
ICON = r"""() => [...document.querySelectorAll('form.bd-search')].filter(f => f.getBoundingClientRect().width > 0).map(f => {
  const icon = f.querySelector('.fa-magnifying-glass').getBoundingClientRect();
  const input = f.querySelector('input'), box = input.getBoundingClientRect();
  return {icon_right: icon.right, text_left: box.left + parseFloat(getComputedStyle(input).paddingLeft),
          placeholder: input.placeholder, label: input.getAttribute('aria-label')};
})"""


def test_search_icon_leaves_the_query_clear(sync_playwright, server):
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        ctx = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True, locale="zh-CN")
        ctx.route("**/*", network_gate([], {"page": "search"}))
        page = ctx.new_page()
        page.goto(f"{server}/search.html?q=%E6%A0%B9%E5%8F%B7", wait_until="load")
        fields = page.evaluate(ICON)
        page.goto(f"{server}/book/04_split_heads.html", wait_until="load")
        page.locator(".bd-header-article .search-button").tap()
        page.wait_for_function("() => document.getElementById('pst-search-dialog').open", timeout=3_000)
        fields += page.evaluate(ICON)
        browser.close()
    assert len(fields) >= 2, fields
    covered = [f for f in fields if f["icon_right"] > f["text_left"]]
    assert not covered, f"the magnifier covers the start of the query: {covered}"
    assert all(f["placeholder"] == "搜索本书……" for f in fields), fields


# ---------------------------------------------------------------- without Colab; on paper

LOCAL_RUN = r"""() => { const box = document.querySelector('.dropdown-launch-buttons .mha-local-run');
  if (!box) return null;
  const r = box.getBoundingClientRect(), a = box.querySelector('a[download]');
  return {shown: r.width > 0 && r.height > 0, left: r.left, right: r.right, text: box.textContent,
          href: a ? new URL(a.href).pathname : null, name: a ? a.textContent : ''}; }"""


@pytest.mark.parametrize("page", [p for p in PAGES if p.is_notebook][:1] + [p for p in PAGES if p.name == "13_trained_heads"],
                         ids=lambda p: p.name)
def test_launch_menu_tells_a_reader_without_colab_how_to_run_the_chapter(sync_playwright, server, page):
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        ctx = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True, locale="zh-CN")
        ctx.route("**/*", network_gate([], {"page": page.name}))
        tab = ctx.new_page()
        tab.goto(f"{server}/{page.html}", wait_until="load")
        tab.locator(".dropdown-launch-buttons > button").tap()
        tab.wait_for_timeout(300)
        found = tab.evaluate(LOCAL_RUN)
        download = tab.request.get(f"{server}{found['href']}") if found and found["href"] else None
        ipynb = download.body()[:20000] if download and download.ok else b""
        browser.close()
    assert found, f"{page.html}: the launch menu has no note for readers without Colab"
    assert found["shown"] and found["left"] >= 0 and found["right"] <= PHONE["width"], found
    assert found["href"].endswith(f"{page.name}.ipynb") and b'"cells"' in ipynb, found
    assert "pip install" in found["text"] and "make lab" in found["text"] and "jupyter lab" in found["text"], found["text"]


# Code lines that the printed page breaks between two letters, digits or underscores (inside a
# name such as shape/s), and controls that print although they do nothing on paper.
PRINTED = r"""() => {
  const shown = e => { const r = e.getBoundingClientRect(), s = getComputedStyle(e);
    return r.width > 0 && r.height > 0 && s.visibility !== 'hidden'; };
  const controls = [...document.querySelectorAll('article button, article input, article select, article summary, .vega-bindings, .mha-np-form')]
    .filter(shown).map(e => e.tagName.toLowerCase() + '.' + [...e.classList].join('.') + ' ' + (e.textContent || e.value || '').trim().slice(0, 30));
  const broken = [], range = document.createRange();
  let pres = 0;
  for (const pre of document.querySelectorAll('article pre')) {
    if (!shown(pre)) continue;
    pres++;
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    let prev = null, line = '';
    while (walker.nextNode()) {
      const n = walker.currentNode, t = n.textContent;
      for (let i = 0; i < t.length; i++) {
        if (t[i] === '\n') { prev = null; line = ''; continue; }
        range.setStart(n, i); range.setEnd(n, i + 1);
        const r = range.getClientRects()[0];
        if (!r) continue;
        if (prev && r.top > prev.top + 2 && /\w/.test(prev.ch) && /\w/.test(t[i])) broken.push(line.slice(-30) + '|' + t.slice(i, i + 10));
        prev = {top: r.top, ch: t[i]};
        line += t[i];
      }
    }
  }
  return {controls, broken, pres};
}"""


@pytest.mark.parametrize("name", ["04_split_heads", "13_trained_heads"])
def test_print_wraps_code_between_words_and_leaves_dead_controls_out(sync_playwright, server, name):
    page = next(p for p in PAGES if p.name == name)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        ctx = browser.new_context(viewport={"width": 520, "height": 900}, locale="zh-CN")  # a narrow handout column
        ctx.route("**/*", network_gate([], {"page": name}))
        tab = ctx.new_page()
        tab.goto(f"{server}/{page.html}", wait_until="load")
        tab.wait_for_timeout(500)
        tab.emulate_media(media="print")
        found = tab.evaluate(PRINTED)
        browser.close()
    assert found["pres"] >= 3, found
    assert not found["broken"], f"{page.html} printed: code lines broken inside a name: {found['broken'][:8]}"
    assert not found["controls"], f"{page.html} printed: controls on paper: {found['controls'][:8]}"
