"""Edits of the written pages that Sphinx's templates do not offer (run at build-finished).

Each edit is small and checked by tests/site/test_site.py on the built site:

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
  links, 列印 -> 打印), so the accessible name matches what the page says; sphinx-togglebutton's
  buttons are named by their visible hint (点击显示) instead of "Toggle hidden content";
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

DROPPED_SCRIPTS = ("fontawesome.js", "searchtools.js", "language_data.js", "searchindex.js")
_DROP = re.compile(r'[ \t]*<script[^>]*\bsrc="[^"]*?(?:%s)[^"]*"[^>]*>\s*</script>\n?'
                   % "|".join(re.escape(s) for s in DROPPED_SCRIPTS))
_PRELOAD = re.compile(r'[ \t]*<link rel="preload" as="script" href="[^"]*fontawesome[^"]*"\s*/>\n?')
# the hidden pair of sidebar buttons in the theme's own header (see the module docstring)
_HIDDEN_TOGGLES = re.compile(r'[ \t]*<button class="pst-navbar-icon sidebar-toggle (?:primary|secondary)-toggle"[^>]*>'
                             r'\s*<span[^>]*></span>\s*</button>\n?')
_ARTICLE = '<article class="bd-article">'
_TITLE = re.compile(r"<title>(.*?)(?: &#8212; [^<]*)?</title>")  # the search result's title: the page's, without the site's
_PRINT_H1 = re.compile(r'(<div id="jb-print-docs-body" class="onlyprint">\s*<h1>)')
_NUMBER = re.compile(r'<article class="bd-article"[^>]*>.*?<h1>(<span class="section-number">[^<]*</span>)', re.S)
LABELS = {
    'aria-label="Color mode" data-bs-title="Color mode"': 'aria-label="颜色模式" data-bs-title="颜色模式"',
    'title="System Settings"': 'title="跟随系统"',
    # buttons that show text ("搜索 Ctrl+K", "点击显示代码"): named by that text, not by a label
    # that differs from it (WCAG 2.5.3)
    ' title="搜索" aria-label="搜索" data-bs-placement="bottom" data-bs-toggle="tooltip">\n <i class="fa-solid fa-magnifying-glass"></i>':
        ' title="搜索" data-bs-placement="bottom" data-bs-toggle="tooltip">\n <i class="fa-solid fa-magnifying-glass"></i>',
    '<summary aria-label="Toggle hidden content">': "<summary>",
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
# the end of the launch menu, and the chapter's own .ipynb in the download menu
_LAUNCH_END = re.compile(r'(<div class="dropdown dropdown-launch-buttons">.*?)(\s*</ul>)', re.S)
_IPYNB = re.compile(r'href="([^"]*_sources/[^"]*\.ipynb)"')


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


_COPYRIGHT = re.compile(r"© Copyright (\d{4})\.")  # the footer (html_show_copyright)
SEARCH_SCRIPT = "mha-search.js"
# The two KaTeX fonts nearly every formula uses (letters in italic, digits and operators): asked for
# with the stylesheets instead of after the first layout, so on a slow link they do not queue
# behind the figures' scripts.
KATEX_FONTS = ("KaTeX_Main-Regular.woff2", "KaTeX_Math-Italic.woff2")


def edit_page(text: str, static: str, is_search: bool, unindexed: bool = False, repository: tuple = ()) -> str:
    """The edited HTML of one page; ``static`` is the page's relative path to ``_static/``;
    ``repository``: (url, release tag) for the local-run note of the launch menu (none without it)."""
    text = _HIDDEN_TOGGLES.sub("", _PRELOAD.sub("", _DROP.sub("", text)))
    if not unindexed:
        title = _TITLE.search(text)
        meta = f' data-pagefind-meta="title:{title.group(1)}"' if title else ""
        text = text.replace(_ARTICLE, f'<article class="bd-article" data-pagefind-body{meta}>', 1)
    number = _NUMBER.search(text)
    if number:
        text = _PRINT_H1.sub(lambda m: m.group(1) + number.group(1), text, count=1)
    for old, new in LABELS.items():
        text = text.replace(old, new)
    text = _COPYRIGHT.sub(r"© \1 版权所有。", text)
    ipynb = _IPYNB.search(text)
    if repository and ipynb and "mha-local-run" not in text:
        note = local_run_note(ipynb.group(1), *repository)
        text = _LAUNCH_END.sub(lambda m: m.group(1) + note + m.group(2), text, count=1)
    if 'class="katex"' in text:
        links = "".join(f'  <link rel="preload" as="font" type="font/woff2" crossorigin href="{static}katex/fonts/{f}" />\n'
                        for f in KATEX_FONTS)
        text = text.replace("</head>", links + "</head>", 1)
    if is_search:
        text = text.replace("</head>", f'  <script defer src="{static}{SEARCH_SCRIPT}"></script>\n</head>', 1)
    return text


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
