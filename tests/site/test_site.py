"""The website: strict build, self-hosted assets, formulas at build time, launch buttons, search, alt text.

The site is built once per session (fixture ``built_site``, tests/support/site_build.py);
these tests read the HTML it wrote. tests/browser/test_browser.py checks the same pages
in a real browser.
"""
from __future__ import annotations

import json
import pathlib
import re
import shutil
import subprocess

import fetch_assets  # tools/ (pyproject: pythonpath)
import pytest
from bs4 import BeautifulSoup

from site_build import problems_in
from site_pages import ROOT, colab_url, config, pages, repository

PAGES = pages()
NOTEBOOK_PAGES = [p for p in PAGES if p.is_notebook]
CJK = re.compile(r"[\u4e00-\u9fff]")
# Tags whose URL the browser fetches on its own (links <a href> are only followed when clicked).
LOADING = {"script": "src", "img": "src", "iframe": "src", "source": "src", "video": "src", "audio": "src",
           "embed": "src", "object": "data", "track": "src", "input": "src"}
LOADING_LINK_RELS = {"stylesheet", "preload", "modulepreload", "icon", "shortcut", "apple-touch-icon", "manifest",
                     "prefetch", "preconnect", "dns-prefetch"}
OUTSIDE = re.compile(r"^(https?:)?//", re.I)
CSS_URL = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])\s*((?:https?:)?//[^'")\s]+)""", re.I)


def soup(path: pathlib.Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def outside_loads(html: str) -> list:
    """URLs outside the site that a page would load by itself (scripts, styles, images, fonts, frames)."""
    doc = BeautifulSoup(html, "html.parser")
    found = []
    for tag, attr in LOADING.items():
        for el in doc.find_all(tag):
            if OUTSIDE.match(el.get(attr, "") or ""):
                found.append(f"<{tag} {attr}={el[attr]}>")
            for src in (el.get("srcset") or "").split(","):
                if OUTSIDE.match(src.strip()):
                    found.append(f"<{tag} srcset={src.strip()}>")
    for el in doc.find_all("link"):
        rels = {r.lower() for r in el.get("rel", [])}
        if rels & LOADING_LINK_RELS and OUTSIDE.match(el.get("href", "") or ""):
            found.append(f"<link rel={' '.join(rels)} href={el['href']}>")
    for el in doc.find_all("style"):
        found += [f"<style> {u}" for u in CSS_URL.findall(el.get_text())]
    for el in doc.find_all(style=True):
        found += [f"style= {u}" for u in CSS_URL.findall(el["style"])]
    return found


def html_files(site: pathlib.Path) -> list:
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.relative_to(site).parts)


@pytest.fixture(scope="module")
def site(built_site) -> pathlib.Path:
    assert (built_site.html / "index.html").is_file(), f"the build wrote no site:\n{built_site.log[-5000:]}"
    return built_site.html


# ---------------------------------------------------------------- the build itself

def test_strict_build_has_no_warnings(built_site):
    text = "\n".join(built_site.problems)
    assert not built_site.problems, f"`jupyter-book build . -W -n --keep-going` warned:\n{text}"
    assert built_site.returncode == 0, built_site.log[-5000:]


def test_warning_detector_sees_sphinx_warnings():
    log = ("reading sources... [100%] book/intro\n"
           "\x1b[91m/work/book/x.md:3: WARNING: undefined label: 'nope' [ref.ref]\x1b[39;49;00m\n"
           "build succeeded.\n")
    assert problems_in(log) == ["/work/book/x.md:3: WARNING: undefined label: 'nope' [ref.ref]"]
    assert problems_in("build succeeded.\n") == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_toc_page_is_built_in_chinese(site, page):
    doc = soup(site / page.html)
    assert doc.html.get("lang") == "zh-CN"
    assert doc.find("article") and doc.find("article").find("h1"), f"{page.html} has no title"


def test_chapters_are_numbered_across_parts(site):
    numbered = [p for p in PAGES if p.numbered]
    assert numbered, "the toc has no numbered chapters"
    for k, page in enumerate(numbered, start=1):
        number = soup(site / page.html).find("article").find("h1").find("span", class_="section-number")
        assert number is not None and number.get_text().strip() == f"{k}.", (page.docname, number)


# ---------------------------------------------------------------- nothing loads from outside

def test_outside_loads_detector_can_fail():
    bad = ('<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script>'
           '<link rel="stylesheet" href="//fonts.googleapis.com/css?family=Roboto">'
           '<style>@font-face{src:url(https://x.example/f.woff2)}</style>'
           '<a href="https://colab.research.google.com/x">ok: a link, not a load</a>'
           '<script src="../_static/mathjax/tex-mml-chtml.js"></script>')
    assert len(outside_loads(bad)) == 3


def test_no_page_loads_anything_from_outside_the_site(site):
    found = {p.relative_to(site).as_posix(): outside_loads(p.read_text(encoding="utf-8")) for p in html_files(site)}
    found = {k: v for k, v in found.items() if v}
    assert not found, f"pages load resources from outside the site (blocked or slow for many readers): {found}"


def test_stylesheets_load_nothing_from_outside(site):
    found = {}
    for css in (site / "_static").rglob("*.css"):
        urls = CSS_URL.findall(css.read_text(encoding="utf-8", errors="replace"))
        if urls:
            found[css.relative_to(site).as_posix()] = urls
    assert not found, f"stylesheets fetch from outside the site: {found}"


def test_formulas_are_html_and_mathml_written_at_build_time(site):
    with_math = [p for p in html_files(site) if soup(p).find(class_="math")]
    assert with_math, "no page has a formula; the landing page at least should"
    for path in with_math:
        doc = soup(path)
        scripts = [s["src"] for s in doc.find_all("script", src=True) if re.search("mathjax|katex", s["src"], re.I)]
        assert not scripts, f"{path.name} loads math JavaScript: {scripts}"
        maths = doc.find_all(class_="math")
        bare = [m.get_text()[:60] for m in maths if not m.find(class_="katex")]
        assert not bare, f"{path.name}: formulas not rendered: {bare[:3]}"
        assert all(m.find("math") for m in maths), f"{path.name}: a formula without MathML"
        css = [link["href"] for link in doc.find_all("link", rel="stylesheet") if "katex" in link["href"]]
        assert any((path.parent / h.split("?")[0]).resolve().is_file() for h in css), (path.name, css)
    assert list((site / "_static" / "katex" / "fonts").glob("*.woff2")), "KaTeX's fonts are missing"


def test_an_unrenderable_formula_is_a_build_warning(monkeypatch):
    import site_math  # tools/

    warned = []
    monkeypatch.setattr(site_math.LOGGER, "warning", lambda *a, **k: warned.append(a))
    try:
        good = site_math.render("W^O", False, None)
        bad = site_math.render(r"\notacommand{x}", True, None)
    finally:
        site_math.stop_server()
    assert "katex" in good and "<math" in good
    assert warned and "notacommand" in str(warned[0]) and "mha-math-error" in bad


def test_asset_install_is_skipped_when_current(tmp_path, monkeypatch):
    vendor = tmp_path / "_vendor"
    for entry in fetch_assets.PAGE_FILES:  # every file a page loads
        (vendor / entry).parent.mkdir(parents=True, exist_ok=True)
        (vendor / entry).write_text("/* stub */")
    (vendor / ".stamp").write_text(fetch_assets._stamp_text())
    fetch_assets.npm_ci()  # node_modules/ matches the lock (the site build installed it)
    monkeypatch.setattr(fetch_assets.shutil, "which", lambda name: None)  # npm "missing": must not be needed
    assert fetch_assets.ensure_assets(vendor, quiet=True) == vendor
    with pytest.raises(RuntimeError, match="npm is needed"):
        fetch_assets.npm_ci(tmp_path / "node_modules", quiet=True)


def test_every_package_json_pin_is_exact_and_locked_with_integrity():
    spec = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))
    pins = {**spec["dependencies"], **spec.get("devDependencies", {})}
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", v) for v in pins.values()), pins
    locked = fetch_assets.locked()
    for name, version in pins.items():
        assert locked[name].version == version and locked[name].integrity.startswith("sha512-"), (name, locked.get(name))


def test_vendor_node_modules_and_generated_files_are_not_committed():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files", "_vendor", "node_modules", "book/_generated"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    assert tracked == [], f"fetched/generated files are committed: {tracked[:5]}"
    ignored = subprocess.run(["git", "check-ignore", "_vendor/katex/x.css", "node_modules/katex/x.js",
                              "book/_generated/flow.svg", ".nox/colab/bin/python"], cwd=ROOT, capture_output=True,
                             text=True).stdout.split()
    assert len(ignored) == 4, ignored


# ---------------------------------------------------------------- what the pages carry

def test_no_page_loads_the_icon_script_or_the_sphinx_search_index(site):
    import site_html  # tools/

    found = {}
    for path in html_files(site):
        srcs = [s["src"] for s in soup(path).find_all("script", src=True)]
        bad = [s for s in srcs if any(d in s for d in site_html.DROPPED_SCRIPTS)]
        if bad:
            found[path.name] = bad
    assert not found, found


def test_every_icon_a_page_names_is_drawn_by_the_site_css(site):
    css = (ROOT / "tools" / "static" / "mha-icons.css").read_text(encoding="utf-8")
    drawn = set(re.findall(r"^\.fa-([a-z0-9-]+) \{ width", css, re.M))
    named = set()
    for path in html_files(site):
        for el in soup(path).find_all(class_=re.compile(r"^fa-")):
            named |= {c[3:] for c in el["class"] if c.startswith("fa-") and c not in ("fa-solid", "fa-lg", "fa-brands")}
    assert named and named <= drawn, f"icons without a rule in tools/static/mha-icons.css: {sorted(named - drawn)}"


def test_pages_are_indexed_by_pagefind_and_search_html_uses_it(site):
    assert (site / "pagefind" / "pagefind.js").is_file()
    entry = json.loads((site / "pagefind" / "pagefind-entry.json").read_text(encoding="utf-8"))
    assert "zh-cn" in entry["languages"], entry["languages"]
    assert entry["languages"]["zh-cn"]["page_count"] == len(PAGES), entry
    search = soup(site / "search.html")
    assert [s["src"] for s in search.find_all("script", src=True) if "mha-search" in s["src"]]
    for page in PAGES:
        article = soup(site / page.html).find("article")
        assert article.has_attr("data-pagefind-body"), page.html


def test_printed_title_keeps_the_chapter_number(site):
    for page in [p for p in PAGES if p.numbered]:
        doc = soup(site / page.html)
        printed = doc.find(id="jb-print-docs-body").find("h1").get_text()
        shown = doc.find("article").find("h1").find("span", class_="section-number").get_text()
        assert printed.startswith(shown), (page.html, printed, shown)
        assert "katex" not in str(doc.title) and "\\(" not in doc.title.get_text(), doc.title


# ---------------------------------------------------------------- launch buttons

@pytest.mark.parametrize("page", NOTEBOOK_PAGES, ids=lambda p: p.name)
def test_launch_buttons_point_at_this_notebook(site, page):
    doc = soup(site / page.html)
    hrefs = [a.get("href", "") for a in doc.find_all("a")]
    assert colab_url(page) in hrefs, [h for h in hrefs if "colab" in h]
    # no Binder (issue 31: out of reach in mainland China; repo2docker would install the whole test set)
    assert not [h for h in hrefs if "binder" in h.lower()]
    # the download button offers the .ipynb itself, which the site serves
    downloads = [a for a in doc.find_all("a") if a.get("href", "").endswith(page.name + ".ipynb")
                 and "_sources" in a.get("href", "")]
    assert downloads, "no .ipynb download link"
    assert (site / "_sources" / (page.docname + ".ipynb")).is_file()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_repository_button_uses_the_configured_url(site, page):
    hrefs = [a.get("href", "") for a in soup(site / page.html).find_all("a")]
    assert repository()[0] in hrefs


# ---------------------------------------------------------------- search, figures, copy buttons

@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_figures_have_alt_text(site, page):
    article = soup(site / page.html).find("article") or soup(site / page.html)
    bad = []
    for img in article.find_all("img"):
        alt = (img.get("alt") or "").strip()
        if not alt or re.search(r"\.(png|svg|jpe?g|gif)$", alt, re.I) or alt.startswith(("../", "_images")):
            bad.append(img.get("src"))
    assert not bad, (
        f"{page.source.name}: images without a description (alt text): {bad}. In a notebook, give the figure "
        'cell the metadata {"mystnb": {"image": {"alt": "一句中文描述"}}}.')


def test_landing_page_figure_is_drawn_from_the_code(site):
    from book_ext import render_flow_svg
    imgs = [i for i in soup(site / "book/intro.html").find_all("img") if i["src"].endswith("flow.svg")]
    assert len(imgs) == 1 and len(imgs[0]["alt"]) > 40, imgs
    built = (site / "book" / imgs[0]["src"]).resolve().read_bytes()
    assert built == render_flow_svg(), "the landing figure is stale: rebuild (it is regenerated by every build)"


def test_flow_grid_draws_every_step_with_its_shape_in_the_shipped_font():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mha.course.pictures.flow import flow_shapes
    from mha.course.pictures.flow_grid import plot_flow_grid

    ax = plot_flow_grid(B=3, L=5, d_model=64, n_heads=4)
    texts = [t.get_text() for t in ax.texts]
    plt.close(ax.figure)
    for label, shape in flow_shapes(3, 5, 64, 4):
        assert label in texts and shape in texts, (label, shape)
    assert "(3, 4, 5, 16)" in texts  # split heads: (B, h, L, d_k)
    from mha.course.pictures.cjk import required_characters

    assert set("".join(texts)) <= set(required_characters()), "a label outside the shipped CJK font subset"
    with pytest.raises(ValueError, match="divisible"):
        plot_flow_grid(d_model=10, n_heads=4)
    with pytest.raises(ValueError, match="ncols"):
        plot_flow_grid(ncols=0)


def test_landing_figure_alt_text_states_every_shape(site):
    from mha.course.pictures.flow import flow_shapes

    alt = [i for i in soup(site / "book/intro.html").find_all("img") if i["src"].endswith("flow.svg")][0]["alt"]
    for _, shape in flow_shapes():
        assert re.sub(r"\d+[x×]\d+=", "", shape) in alt, shape


def test_landing_page_chapter_links_match_the_numbering(site):
    """intro.md writes "第 N 章" by hand: each must point at the page numbered N."""
    links = [a for a in soup(site / "book/intro.html").find("article").find_all("a", href=True)
             if re.fullmatch(r"第 \d+ 章", a.get_text().strip())]
    assert len(links) >= 6, links
    for a in links:
        n = re.search(r"\d+", a.get_text()).group()
        target = soup(site / "book" / a["href"].split("#")[0]).find("article").find("h1")
        number = target.find("span", class_="section-number")
        assert number is not None and number.get_text().strip() == f"{n}.", (a.get_text(), a["href"])


@pytest.mark.parametrize("page", NOTEBOOK_PAGES, ids=lambda p: p.name)
def test_code_cells_have_copy_buttons(site, page):
    doc = soup(site / page.html)
    assert any("copybutton" in s["src"] for s in doc.find_all("script", src=True))
    assert doc.select("div.cell div.highlight pre"), "no code cell found"


@pytest.mark.parametrize("page", NOTEBOOK_PAGES, ids=lambda p: p.name)
def test_no_widget_javascript(site, page):
    """Live explorers are tagged remove-output; no widget state or widget manager reaches the site."""
    html = (site / page.html).read_text(encoding="utf-8")
    assert "application/vnd.jupyter.widget-state+json" not in html
    assert "application/vnd.jupyter.widget-view+json" not in html
    assert "require.min.js" not in html and "html-manager" not in html


def test_phone_viewport_meta(site):
    meta = soup(site / "book/intro.html").find("meta", attrs={"name": "viewport"})
    assert meta and "width=device-width" in meta["content"]
