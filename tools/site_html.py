"""Edits of the written pages that Sphinx's templates do not offer (run at build-finished).

The theme writes these parts from its own macros (pydata-sphinx-theme's webpack-macros.html and
layout.html), so an override would copy them. Instead each page is read by the standard library's
HTML parser (:class:`_Outline`: every element with its offsets) and each edit replaces the exact
span of one element or start tag; the rest of the page keeps its bytes. Each edit is small and
checked by tests/site/ on the built site:

- drop what the theme loads and the book does not need: Font Awesome's 1.5 MB icon script
  and its glyph table in the theme's CSS (the icons are drawn by ``tools/static/mha-icons.css``) and Sphinx's search code and
  index (``searchtools.js``, ``language_data.js``, ``searchindex.js``: the site searches
  with Pagefind, ``tools/site_search.py``, and only on search.html);
- mark each page's article as what Pagefind indexes (``data-pagefind-body``), titled as in ``<title>``;
- search.html loads ``mha-search.js`` (Pagefind's results for ``?q=``);
- pages with formulas preload KaTeX's two main fonts;
- the printed title (``#jb-print-docs-body h1``) keeps the chapter number of the article's h1;
- the launch menu (Binder, Colab) of a chapter ends with a few lines for readers who reach neither
  (Colab and Binder are often unreachable from mainland China): download this chapter's ``.ipynb``,
  ``pip install`` the course package and JupyterLab, or the repository's ``make lab``
  (:func:`local_run_note`; the install line is the one the Colab setup cell runs, from
  ``tools/setup_cell.py``);
- Chinese (mainland usage) for every label the themes leave in English or in Taiwanese usage
  (``LABELS``: the colour-mode switch, the sidebar buttons, the launch menu, the search box, heading
  links, 列印 -> 打印), so the accessible name matches what the page says; a search button that shows
  its text loses its aria-label; sphinx-togglebutton's buttons are named by their visible hint
  (点击显示) instead of "Toggle hidden content";
- the phone's chapter list and page contents open: pydata-sphinx-theme 0.17 wires only the first
  ``.primary-toggle`` / ``.secondary-toggle`` of a page (its issue #2451), which is its own header's
  pair that sphinx-book-theme always hides (``.bd-header button.sidebar-toggle {display: none}``);
  dropping that hidden pair leaves the visible buttons of the article header first, so the theme's
  own code opens its dialogs from them (``tools/static/mha-site.js`` names the dialogs and moves the
  focus).
"""
from __future__ import annotations

import pathlib
import re
from html.parser import HTMLParser

DROPPED_SCRIPTS = ("fontawesome.js", "searchtools.js", "language_data.js", "searchindex.js")
# the hidden pair of sidebar buttons in the theme's own header (see the module docstring)
HIDDEN_TOGGLES = {"pst-navbar-icon sidebar-toggle primary-toggle", "pst-navbar-icon sidebar-toggle secondary-toggle"}
# Attribute edits inside any start tag: the attribute text as written -> the new text.
LABELS = {
    'aria-label="Color mode" data-bs-title="Color mode"': 'aria-label="颜色模式" data-bs-title="颜色模式"',
    'title="System Settings"': 'title="跟随系统"',
    ' aria-label="Toggle hidden content"': "",  # sphinx-togglebutton's <summary>: named by its hint
    # the article header's sidebar buttons (icons only: the title is the name)
    'title="Toggle primary sidebar"': 'title="章节目录" aria-label="章节目录" aria-haspopup="dialog"',
    'title="Toggle secondary sidebar"': 'title="本页目录" aria-label="本页目录" aria-haspopup="dialog"',
    'aria-label="Launch interactive content"': 'aria-label="在线运行本章"',
    'title="Launch on Binder"': 'title="在 Binder 上运行"',
    'title="Launch on Colab"': 'title="在 Colab 上运行"',
    'alt="Binder logo"': 'alt="Binder 标志"',
    'alt="Colab logo"': 'alt="Colab 标志"',
    'title="列印成 PDF"': 'title="打印或存为 PDF"',
    'placeholder="Search this book..."': 'placeholder="搜索本书……"',
    'aria-label="Search this book..."': 'aria-label="搜索本书"',
    'title="Link to this heading"': 'title="本节链接" aria-label="本节链接"',
    'title="Link to this term"': 'title="本术语链接" aria-label="本术语链接"',
    'title="Link to this image"': 'title="本图链接" aria-label="本图链接"',
    '<nav class="bd-links bd-docs-nav" aria-label="Main">': '<nav class="bd-links bd-docs-nav" aria-label="章节">',
    '<nav aria-label="Page">': '<nav aria-label="本页">',
}
# A search button that shows its text ("搜索 Ctrl+K") is named by that text, not by a label that
# differs from it (WCAG 2.5.3): its aria-label goes; the icon-only one keeps it.
SHOWN_TEXT = "search-button__default-text"
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Element:
    """One element of a page: its tag, attributes and where its start tag and (once read) its end lie."""

    def __init__(self, tag, attrs, start, start_end, text):
        self.tag, self.attrs, self.start, self.start_end, self.text = tag, dict(attrs), start, start_end, text
        self.end_start = self.end = None  # the end tag's first character, and the character after it
        self.children = []


class _Outline(HTMLParser):
    """The elements of a page in document order, with their offsets in its text (no text is re-written)."""

    def __init__(self, text):
        super().__init__(convert_charrefs=False)
        self._lines = [0]
        for line in text.splitlines(keepends=True):
            self._lines.append(self._lines[-1] + len(line))
        self.elements, self._open, self._text = [], [], text
        self.feed(text)
        self.close()

    def _offset(self):
        line, col = self.getpos()
        return self._lines[line - 1] + col

    def handle_starttag(self, tag, attrs):
        start, text = self._offset(), self.get_starttag_text()
        el = _Element(tag, attrs, start, start + len(text), text)
        if self._open:
            self._open[-1].children.append(el)
        self.elements.append(el)
        if tag not in _VOID:
            self._open.append(el)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self._open.pop()

    def handle_endtag(self, tag):
        names = [el.tag for el in self._open]
        if tag not in names:
            return
        start = self._offset()
        while self._open:
            el = self._open.pop()
            el.end_start, el.end = start, self._text.index(">", start) + 1
            if el.tag == tag:
                break

    def first(self, tag, **attrs):
        """The first element ``tag`` whose attributes include ``attrs`` (``class_`` for class), or None."""
        want = {k.rstrip("_"): v for k, v in attrs.items()}
        return next((el for el in self.elements if el.tag == tag and all(el.attrs.get(k) == v for k, v in want.items())), None)


def local_run_note(ipynb_href: str, repo_url: str, ref: str, dist: str = "mha-course") -> str:
    """The launch menu's last item: how to run this chapter without Colab, in a few lines; ``ref`` is the
    release tag the chapter's own setup cell installs."""
    from html import escape

    name = escape(ipynb_href.rsplit("/", 1)[-1])
    clone = escape(repo_url.rstrip("/"))
    return (
        '\n      <li class="mha-local-run"><p><strong>打不开 Colab？</strong>在自己的电脑上运行本章：</p><ol>'
        f'<li><a href="{escape(ipynb_href)}" download>下载本章的 {name}</a></li>'
        f'<li>安装课程包和 JupyterLab：<code>pip install "{dist} @ git+{clone}@{escape(ref)}" jupyterlab</code></li>'
        f'<li>打开它：<code>jupyter lab {name}</code></li></ol>'
        f'<p>或者 <code>git clone {clone}</code>，在仓库里运行 <code>make lab</code>：版本锁定的环境，各章都在。</p></li>')


_COPYRIGHT = re.compile(r"© Copyright (\d{4})\.")  # the footer's text (html_show_copyright)
SEARCH_SCRIPT = "mha-search.js"
# The two KaTeX fonts nearly every formula uses (letters in italic, digits and operators): asked for
# with the stylesheets instead of after the first layout, so on a slow link they do not queue
# behind the figures' scripts.
KATEX_FONTS = ("KaTeX_Main-Regular.woff2", "KaTeX_Math-Italic.woff2")


def _whole_lines(text: str, start: int, end: int) -> tuple[int, int]:
    """``start``..``end`` widened by the blanks before it and one newline after it (a dropped element leaves no gap)."""
    while start and text[start - 1] in " \t":
        start -= 1
    return start, end + (text[end:end + 1] == "\n")


def _edits(text: str, page: _Outline, static: str, is_search: bool, unindexed: bool, repository: tuple):
    """(start, end, new text) of each edit of one page (see the module docstring), in any order."""
    head = next((el for el in page.elements if el.tag == "head"), None)
    for el in page.elements:
        src, href = el.attrs.get("src") or "", el.attrs.get("href") or ""
        if (el.tag == "script" and any(d in src for d in DROPPED_SCRIPTS)
                or el.tag == "link" and el.attrs.get("rel") == "preload" and el.attrs.get("as") == "script"
                and "fontawesome" in href
                or el.tag == "button" and el.attrs.get("class") in HIDDEN_TOGGLES):
            yield (*_whole_lines(text, el.start, el.end or el.start_end), "")
            continue
        tag = el.text
        for old, new in LABELS.items():
            tag = tag.replace(old, new)
        if el.tag == "button" and any(c.attrs.get("class") == SHOWN_TEXT for c in el.children):
            tag = re.sub(r' aria-label="[^"]*"', "", tag)
        if tag != el.text:
            yield el.start, el.start_end, tag
    article, title = page.first("article", class_="bd-article"), page.first("title")
    if article is not None and not unindexed and "data-pagefind-body" not in article.attrs:
        name = text[title.start_end:title.end_start].split(" &#8212; ")[0] if title and title.end_start else None
        meta = f' data-pagefind-meta="title:{name}"' if name is not None else ""
        yield article.start, article.start_end, article.text.replace(">", f" data-pagefind-body{meta}>", 1)
    h1 = next((el for el in page.elements if article and el.tag == "h1" and article.start < el.start < (article.end or len(text))
               and el.children and el.children[0].attrs.get("class") == "section-number"
               and el.children[0].start == el.start_end), None)
    printed = page.first("div", id="jb-print-docs-body")
    if (h1 is not None and printed is not None and printed.children and printed.children[0].tag == "h1"
            and not printed.children[0].children):
        number = h1.children[0]
        at = printed.children[0].start_end
        yield at, at, text[number.start:number.end]
    launch = page.first("div", class_="dropdown dropdown-launch-buttons")
    ipynb = next((el for el in page.elements if "_sources/" in (el.attrs.get("href") or "")
                  and el.attrs["href"].endswith(".ipynb")), None)
    done = any("mha-local-run" in (el.attrs.get("class") or "").split() for el in page.elements)
    menu = launch and next((el for el in page.elements if el.tag == "ul" and el.start > launch.start and el.end_start), None)
    if repository and ipynb is not None and menu and not done:
        at = len(text[:menu.end_start].rstrip())
        yield at, at, local_run_note(ipynb.attrs["href"], *repository)
    links = ""  # each once: an incremental build edits the pages it did not rewrite again
    present = {el.attrs.get("href") or el.attrs.get("src") for el in page.elements if el.tag in ("link", "script")}
    if any(el.attrs.get("class") == "katex" for el in page.elements):
        links += "".join(f'  <link rel="preload" as="font" type="font/woff2" crossorigin href="{static}katex/fonts/{f}" />\n'
                         for f in KATEX_FONTS if f"{static}katex/fonts/{f}" not in present)
    if is_search and f"{static}{SEARCH_SCRIPT}" not in present:
        links += f'  <script defer src="{static}{SEARCH_SCRIPT}"></script>\n'
    if links and head is not None and head.end_start is not None:
        yield head.end_start, head.end_start, links


def edit_page(text: str, static: str, is_search: bool, unindexed: bool = False, repository: tuple = ()) -> str:
    """The edited HTML of one page; ``static`` is the page's relative path to ``_static/``;
    ``repository``: (url, release tag) for the local-run note of the launch menu (none without it).

    The page is read by an HTML parser (:class:`_Outline`); each edit replaces the exact span of one
    element or start tag, so the rest of the page keeps its bytes."""
    page = _Outline(text)
    for start, end, new in sorted(_edits(text, page, static, is_search, unindexed, repository),
                                  key=lambda e: (e[0], e[1]), reverse=True):
        text = text[:start] + new + text[end:]
    return _COPYRIGHT.sub(r"© \1 版权所有。", text)


# Font Awesome's glyph table inside the theme's stylesheet (.fa-rocket:before{content:"\\f135"}, about
# 1,900 rules, 86 KB of its 397 KB): unused, since mha-icons.css draws the icons the pages name.
_FA_GLYPHS = re.compile(r'(?:\.fa-[a-z0-9-]+:(?:before|after),?)+\{content:"[^"]*"\}')


def edit_static(static: pathlib.Path) -> None:
    """sphinx-togglebutton's script names its buttons by their visible hint; the theme's stylesheet
    loses Font Awesome's glyph table (it blocks the first paint: every byte counts on a slow link)."""
    theme_css = static / "styles" / "pydata-sphinx-theme.css"
    if theme_css.is_file():
        css = theme_css.read_text(encoding="utf-8")
        theme_css.write_text(_FA_GLYPHS.sub("", css), encoding="utf-8")
    path = static / "togglebutton.js"
    if path.is_file():
        js = path.read_text(encoding="utf-8")
        path.write_text(js.replace('aria-label="Toggle hidden content"', 'aria-label="${toggleHintShow}"'),
                        encoding="utf-8")


def edit_site(outdir: pathlib.Path, repository: tuple = ()) -> int:
    """Edit every page of the built site; return how many. ``repository``: (url, release tag), see edit_page."""
    count = 0
    for path in outdir.rglob("*.html"):
        rel = path.relative_to(outdir)
        if rel.parts[0] in ("_static", "_sources", "pagefind"):
            continue
        static = "../" * (len(rel.parts) - 1) + "_static/"
        text = path.read_text(encoding="utf-8")
        new = edit_page(text, static, rel.as_posix() == "search.html", rel.as_posix() in ("search.html", "genindex.html"),
                        repository)
        if new != text:
            path.write_text(new, encoding="utf-8")
        count += 1
    edit_static(outdir / "_static")
    return count
