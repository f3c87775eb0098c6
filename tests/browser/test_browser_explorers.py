"""The interactive figures on the website: every control changes the figure, in a real browser, offline.

Uses the session's server (tests/browser/conftest.py) (the strictly built site on 127.0.0.1) and its
browser setup (Debian chromium through playwright, every non-loopback request aborted
and recorded). On each page that holds an interactive figure (mha.course.page_figures, drawn by
the site's own vega-embed):

* each control (select, radio buttons, check box, slider) is changed the way a reader
  would; the vega view's parameter takes the new value and the data behind the drawn
  marks (their aria-labels and texts) changes;
* no console error, nothing requested outside the site;
* at phone width (390 px) neither the page nor the figure scrolls sideways;
* in the dark theme the figure is drawn with the dark theme (light text), and switching
  the theme redraws it without losing the reader's choices.

Screenshots of every figure before and after each change go to _build/screenshots/explorers/,
with report.json (bytes each figure page loads for its figures). Pages without a figure must
load none of the figure scripts (checked in the built HTML, no browser needed).
"""
from __future__ import annotations

import json
import pathlib
import re
from urllib.parse import urlparse

import pytest
from bs4 import BeautifulSoup

from site_pages import pages
from site_browser import CHROMIUM, CHROMIUM_ARGS, DESKTOP, PAGE_OVERFLOW, PHONE, SHOTS, network_gate

import book_ext  # (FIGURE_SCRIPTS, FIGURE_CSS: what a figure page loads)

import mha.course.page_figures as pf  # noqa: E402

SHOTS_DIR = SHOTS / "explorers"
PAGES = pages()
MAX_FIGURE_BYTES = 2_000_000  # what the figures may add to a page, uncompressed (issue 12: "aim: under 2 MB")


def _has_figure(page) -> bool:
    """A notebook page whose stored outputs hold an interactive figure (the site's mimetype)."""
    if not page.is_notebook:
        return False
    nb = json.loads(page.source.read_text(encoding="utf-8"))
    return any(pf.MIME_TYPE in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", []))


FIGURE_PAGES = [p for p in PAGES if _has_figure(p)]
PLAIN_PAGES = [p for p in PAGES if not _has_figure(p)]
ASSETS = [*book_ext.FIGURE_SCRIPTS, book_ext.FIGURE_CSS]

# Every figure drawn, in the page's current theme (the theme may switch to dark after the first draw).
DRAWN = """() => { const f = [...document.querySelectorAll('.mha-vega-figure')];
  const theme = document.documentElement.dataset.theme === 'dark' ? 'dark' : 'light';
  return f.length > 0 && f.every(e => e.dataset.state === 'drawn' && e.dataset.theme === theme); }"""
# When the page fetched vega, vega-lite and vega-embed: [path, started after the page's load event].
LIBRARIES_FETCHED = """() => { const nav = performance.getEntriesByType('navigation')[0];
  return performance.getEntriesByType('resource').filter(e => /vega[^/]*\\.min\\.js$/.test(new URL(e.name).pathname))
    .map(e => [new URL(e.name).pathname.split('/_static/')[1], e.startTime >= nav.loadEventStart]); }"""
# What the reader sees of a figure's data: every mark's aria-label (Vega-Lite writes its
# fields' values there) and every text drawn in it.
SIGNATURE = """el => [...el.querySelectorAll('svg [aria-roledescription]')].map(e => e.getAttribute('aria-label') || '')
  .concat([...el.querySelectorAll('svg text')].map(t => t.textContent)).join('\\n')"""
CONTROLS = """el => [...el.querySelectorAll('.vega-bindings input, .vega-bindings select')].map(e => ({
  tag: e.tagName.toLowerCase(), type: e.type, name: e.name, value: e.value, checked: e.checked,
  min: e.min, max: e.max, options: e.tagName === 'SELECT' ? [...e.options].map(o => o.value) : null}))"""


def test_the_book_has_figure_pages():
    names = {p.name for p in FIGURE_PAGES}
    expected = {"05_parallel_attention", "08_full_layer", "09_worked_example", "10_masks", "13_trained_heads"}
    assert expected <= names, names


# ---------------------------------------------------------------- the built HTML (no browser)

def _scripts(path: pathlib.Path) -> list:
    doc = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    return [s["src"].split("?")[0] for s in doc.find_all("script", src=True)] + \
        [link["href"].split("?")[0] for link in doc.find_all("link", href=True)]


@pytest.fixture(scope="module")
def site(built_site) -> pathlib.Path:
    assert (built_site.html / "index.html").is_file(), built_site.log[-3000:]
    return built_site.html


@pytest.mark.parametrize("page", FIGURE_PAGES, ids=lambda p: p.name)
def test_figure_pages_load_the_sites_own_vega(site, page):
    html = (site / page.html).read_text(encoding="utf-8")
    assert html.count('class="mha-vega-figure"') >= 1
    loaded = _scripts(site / page.html)
    glue, css = book_ext.FIGURE_SCRIPTS[-1], book_ext.FIGURE_CSS
    for asset in (glue, css):
        hits = [s for s in loaded if s.endswith("_static/" + asset)]
        assert len(hits) == 1, (asset, [s for s in loaded if "vega" in s or "mha-figures" in s])
        assert (site / page.html).parent.joinpath(hits[0]).resolve().is_file(), hits[0]
    # vega, vega-lite and vega-embed are not in the page: the glue fetches them, in this order, after load
    assert not [s for s in loaded if re.search(r"vega[^/]*\.min\.js$", s)], loaded
    doc = BeautifulSoup(html, "html.parser")
    tag = next(t for t in doc.find_all("script", src=True) if t["src"].split("?")[0].endswith(glue))
    assert tag.get("data-vega", "").split() == list(book_ext.FIGURE_SCRIPTS[:-1]), tag
    static = (site / page.html).parent.joinpath(tag["src"].split("?")[0]).resolve().parent
    assert all((static / lib).is_file() for lib in tag["data-vega"].split()), tag["data-vega"]
    assert "npm/vega" not in html and "vnd.mha.vegalite" not in html  # Altair's CDN html is not used here


@pytest.mark.parametrize("page", PLAIN_PAGES, ids=lambda p: p.name)
def test_pages_without_a_figure_load_none_of_it(site, page):
    loaded = _scripts(site / page.html)
    found = [s for s in loaded if re.search(r"vega|mha-figures", s)]
    assert not found, f"{page.html} has no interactive figure but loads {found}"


def test_other_html_pages_load_none_of_it(site):
    plain = [p for p in site.glob("*.html")]  # search, genindex, index redirect
    assert plain
    for path in plain:
        assert not [s for s in _scripts(path) if re.search(r"vega|mha-figures", s)], path.name


# ---------------------------------------------------------------- in the browser

def _change(page, figure, control) -> str:
    """Change one control as a reader would; return the value it now holds (as the DOM has it)."""
    sel = f'.vega-bindings [name="{control["name"]}"]'
    if control["tag"] == "select":
        new = control["options"][-1] if control["value"] != control["options"][-1] else control["options"][0]
        figure.locator(sel).select_option(new)
    elif control["type"] == "radio":
        new = control["value"]
        figure.locator(f'{sel}[value="{new}"]').check()
    elif control["type"] == "checkbox":
        new = "false" if control["checked"] else "true"
        figure.locator(sel).click()
    elif control["type"] == "range":
        new = control["max"] if control["value"] != control["max"] else control["min"]
        figure.locator(sel).evaluate(
            "(e, v) => { e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})); }", new)
    else:
        raise AssertionError(f"unknown control {control}")
    return new


def _signal(figure, name):
    return figure.evaluate("(el, n) => el.mhaResult.view.signal(n)", name)




def _watch(page, log):
    page.on("console", lambda m: log.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: log.append(f"uncaught: {e}"))
    page.on("response", lambda r: log.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    page.on("requestfailed", lambda r: log.append(f"request failed: {r.url} ({r.failure})"))


def _luminance(color: str) -> float:
    m = re.fullmatch(r"#([0-9a-f]{3}|[0-9a-f]{6})", color.lower())
    if m:
        digits = m.group(1) if len(m.group(1)) == 6 else "".join(c * 2 for c in m.group(1))
        r, g, b = (int(digits[i:i + 2], 16) for i in (0, 2, 4))
    else:
        m = re.match(r"rgba?\((\d+),\s*(\d+),\s*(\d+)", color)
        assert m, color
        r, g, b = (int(x) for x in m.groups())
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


@pytest.fixture(scope="module")
def explored(sync_playwright, server):
    SHOTS_DIR.mkdir(parents=True, exist_ok=True)
    outside, current = [], {"page": None}
    results = {"pages": {}, "phone": {}, "dark": {}, "toggle": {}, "plain_loads": {}}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)

        def context(**kw):
            ctx = browser.new_context(locale="zh-CN", service_workers="block", **kw)
            ctx.route("**/*", network_gate(outside, current))
            ctx.set_default_timeout(30_000)
            return ctx

        def open_drawn(ctx, p, label, log, **listeners):
            """A new page of ``ctx`` at ``p``, its console errors into ``log``, once its figures are drawn."""
            current["page"] = label
            page = ctx.new_page()
            _watch(page, log)
            for event, listener in listeners.items():
                page.on(event, listener)
            page.goto(f"{server}/{p.html}", wait_until="load")
            page.wait_for_function(DRAWN)
            return page

        desktop = context(viewport=DESKTOP)
        for p in FIGURE_PAGES:
            log, loaded = [], {}
            page = open_drawn(desktop, p, p.name, log, response=lambda r: loaded.__setitem__(r.url, r))
            sizes = {}
            for url, r in loaded.items():
                path = urlparse(url).path
                if any(path.endswith("/_static/" + a) for a in ASSETS):
                    sizes[path.rsplit("/_static/", 1)[1]] = len(r.body())
            spec_bytes = page.evaluate(
                "() => [...document.querySelectorAll('script.mha-vega-spec')]"
                ".reduce((n, s) => n + new TextEncoder().encode(s.textContent).length, 0)")
            libraries = page.evaluate(LIBRARIES_FETCHED)
            figures = []
            for i, figure in enumerate(page.locator(".mha-vega-figure").all()):
                figure.scroll_into_view_if_needed()
                figure.screenshot(path=str(SHOTS_DIR / f"{p.name}-{i}-0-before.png"))
                changes = []
                for k, control in enumerate(figure.evaluate(CONTROLS), start=1):
                    if control["type"] == "radio" and control["checked"]:
                        continue  # radio buttons: try every other option of the group
                    before = figure.evaluate(SIGNATURE)
                    new = _change(page, figure, control)
                    changed = True
                    try:
                        page.wait_for_function(
                            "([el, old]) => el.dataset.state === 'drawn' && "
                            f"({SIGNATURE})(el) !== old", arg=[figure.element_handle(), before], timeout=5_000)
                    except Exception:
                        changed = False
                    value = _signal(figure, control["name"])
                    shot = SHOTS_DIR / re.sub(r"[^\w.-]", "_", f"{p.name}-{i}-{k}-{control['name']}-{new}.png",
                                              flags=re.ASCII)
                    figure.screenshot(path=str(shot))
                    changes.append({"control": control["name"], "input": control["type"], "to": new,
                                    "signal": value, "data_changed": changed, "screenshot": shot.name})
                figures.append({"changes": changes, "alt": figure.get_attribute("aria-label")})
            page.close()
            results["pages"][p.name] = {"errors": log, "figures": figures, "asset_bytes": sizes,
                                        "spec_bytes": spec_bytes, "libraries": libraries}

        for p in PLAIN_PAGES[:3]:  # a few pages without a figure: what they actually request
            current["page"] = p.name
            requested = []
            page = desktop.new_page()
            page.on("request", lambda r: requested.append(urlparse(r.url).path))
            page.goto(f"{server}/{p.html}", wait_until="load")
            page.close()
            results["plain_loads"][p.name] = [u for u in requested if re.search(r"vega|mha-figures", u)]

        # the theme switch on a light page: the figure is redrawn dark and keeps the reader's choice
        p = FIGURE_PAGES[0]
        log = []
        page = open_drawn(desktop, p, p.name + ":toggle", log)
        figure = page.locator(".mha-vega-figure").first
        control = figure.evaluate(CONTROLS)[0]
        _change(page, figure, control)
        chosen = _signal(figure, control["name"])
        light = figure.get_attribute("data-theme")
        page.evaluate("() => { document.documentElement.dataset.theme = 'dark'; }")
        page.wait_for_function("() => document.querySelector('.mha-vega-figure').dataset.theme === 'dark'"
                               " && document.querySelector('.mha-vega-figure').dataset.state === 'drawn'")
        results["toggle"] = {"page": p.name, "control": control["name"], "before": light,
                             "chosen": chosen, "after_redraw": _signal(figure, control["name"]), "errors": log}
        page.close()
        desktop.close()

        phone = context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True)
        dark = context(viewport=DESKTOP, color_scheme="dark")
        for name, ctx in (("phone", phone), ("dark", dark)):
            for p in FIGURE_PAGES:
                log = []
                page = open_drawn(ctx, p, f"{p.name}:{name}", log)
                figure = page.locator(".mha-vega-figure").first
                figure.scroll_into_view_if_needed()
                figure.screenshot(path=str(SHOTS_DIR / f"{p.name}-{name}.png"))
                report = page.evaluate("""() => {
                  const figs = [...document.querySelectorAll('.mha-vega-figure')];
                  const label = document.querySelector('.mha-vega-figure svg .role-axis-label text');
                  return {
                    overflow_px: PAGE_OVERFLOW,
                    figure_overflow_px: Math.max(...figs.map(f => f.scrollWidth - f.clientWidth)),
                    figure_right: Math.max(...figs.map(f => f.getBoundingClientRect().right)),
                    drawn_width: Math.max(...figs.map(f => Math.max(...[...f.querySelectorAll('svg, .vega-bindings')]
                      .map(e => e.getBoundingClientRect().width)))),
                    width: document.documentElement.clientWidth,
                    page_theme: document.documentElement.dataset.theme,
                    figure_themes: figs.map(f => f.dataset.theme),
                    label_fill: label ? label.getAttribute('fill') : null,
                  }; }""".replace("PAGE_OVERFLOW", PAGE_OVERFLOW))
                if name == "phone" and p == FIGURE_PAGES[-1]:  # the phone can still drive a control
                    control = figure.evaluate(CONTROLS)[-1]
                    before = figure.evaluate(SIGNATURE)
                    _change(page, figure, control)
                    page.wait_for_function(f"([el, old]) => ({SIGNATURE})(el) !== old",
                                           arg=[figure.element_handle(), before])
                    figure.screenshot(path=str(SHOTS_DIR / f"{p.name}-{name}-after.png"))
                report["errors"] = log
                results[name][p.name] = report
                page.close()
        browser.close()
    results["outside"] = outside
    (SHOTS_DIR / "report.json").write_text(json.dumps(results, ensure_ascii=False, indent=1, default=str),
                                           encoding="utf-8")
    return results


@pytest.mark.parametrize("page", FIGURE_PAGES, ids=lambda p: p.name)
def test_every_control_changes_the_figure(explored, page):
    r = explored["pages"][page.name]
    assert r["figures"], "no figure drawn"
    for figure in r["figures"]:
        assert figure["alt"] and len(figure["alt"]) > 40, "the figure needs its description (alt text)"
        assert figure["changes"], "a figure without controls"
        for c in figure["changes"]:
            assert c["data_changed"], f"changing {c['control']} to {c['to']} did not change the figure: {c}"
            assert str(c["signal"]).lower() == str(c["to"]).lower(), c
    shots = list(SHOTS_DIR.glob(f"{page.name}-*-0-before.png"))
    assert shots and all(s.stat().st_size > 2000 for s in shots)


@pytest.mark.parametrize("page", FIGURE_PAGES, ids=lambda p: p.name)
def test_figure_pages_have_no_console_errors(explored, page):
    assert not explored["pages"][page.name]["errors"]
    assert not explored["phone"][page.name]["errors"] and not explored["dark"][page.name]["errors"]


def test_figure_pages_request_nothing_outside_the_site(explored):
    assert not explored["outside"], explored["outside"]


def test_pages_without_a_figure_request_no_figure_script(explored):
    assert explored["plain_loads"] and not any(explored["plain_loads"].values()), explored["plain_loads"]


@pytest.mark.parametrize("page", FIGURE_PAGES, ids=lambda p: p.name)
def test_figures_fit_a_phone(explored, page):
    r = explored["phone"][page.name]
    assert r["overflow_px"] <= 1, f"the page scrolls sideways by {r['overflow_px']} px"
    # the figure itself: drawn narrower than a 390 px screen less the page's margins, no inner scrolling
    # (measured against PHONE's width: the browser may widen the layout for other content of the page)
    assert r["drawn_width"] <= PHONE["width"] - 30 and r["figure_overflow_px"] <= 1, r
    assert r["figure_right"] <= r["width"], r


@pytest.mark.parametrize("page", FIGURE_PAGES, ids=lambda p: p.name)
def test_figures_follow_the_dark_theme(explored, page):
    r = explored["dark"][page.name]
    assert r["page_theme"] == "dark" and set(r["figure_themes"]) == {"dark"}, r
    assert r["label_fill"] and _luminance(r["label_fill"]) > 0.6, f"axis labels not light on a dark page: {r}"


def test_switching_the_theme_redraws_and_keeps_the_choice(explored):
    t = explored["toggle"]
    assert t["before"] == "light" and not t["errors"], t
    assert t["after_redraw"] == t["chosen"], t


def test_the_figures_libraries_are_fetched_after_the_page_has_loaded(explored):
    """On a slow link the text and the formulas' fonts come first; the 1.3 MB of vega after them."""
    for name, r in explored["pages"].items():
        # fetched together (they finish in any order), run in order: async = false; the drawn figures show it
        assert sorted(path for path, _ in r["libraries"]) == sorted(book_ext.FIGURE_SCRIPTS[:-1]), (name, r["libraries"])
        assert all(after for _, after in r["libraries"]), (name, r["libraries"])


def test_figures_add_less_than_two_megabytes(explored):
    for name, r in explored["pages"].items():
        assert set(r["asset_bytes"]) == set(ASSETS), (name, r["asset_bytes"])
        total = sum(r["asset_bytes"].values()) + r["spec_bytes"]
        assert total < MAX_FIGURE_BYTES, f"{name}: the figures add {total} bytes"
