"""The site's search: Pagefind (npm ``pagefind``) indexes ``_build/html`` after the build.

Pagefind's extended binary splits Chinese into words when it indexes a ``lang="zh-CN"`` page
and splits the reader's query the same way in the browser, so 交叉注意力 finds the pages
that say 交叉注意力. The index is cut into small chunks: a search fetches a few tens of KB,
not every page. ``tools/static/mha-search.js`` shows the results on ``search.html?q=...``
(the theme's search box and deep links send readers there).

What is indexed: the article of each page (``data-pagefind-body``, added by
``tools/site_html.py``), without formulas (KaTeX's HTML+MathML would show up as glyph soup
or TeX in snippets), code (cell sources and code blocks: a snippet of ``plt.show()`` tells a
learner nothing; names in the prose, ``nn.MultiheadAttention``, stay findable), cell outputs
(numbers, tables, self-checks) and heading anchors. What learners type that the book does not
write (根号, "multi head attention") is rewritten in the browser: ``tools/static/mha-search.js``.
"""
from __future__ import annotations

import pathlib
import shutil
import subprocess

import fetch_assets

EXCLUDE = (".katex", ".cell_output", ".cell_input", "div.highlight", "summary", ".headerlink", "script", "style")
BUNDLE = "pagefind"  # the index and its JavaScript, under _build/html/


def pagefind_command(site: pathlib.Path) -> list:
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is needed to build the search index (npm package pagefind): "
                           "install Node.js (Debian: apt-get install npm) and build again.")
    runner = fetch_assets.package_dir("pagefind") / "lib" / "runner" / "bin.cjs"
    cmd = [node, str(runner), "--site", str(site), "--output-subdir", BUNDLE]
    for selector in EXCLUDE:
        cmd += ["--exclude-selectors", selector]
    return cmd


def build_index(site: pathlib.Path) -> str:
    """Index ``site``; return Pagefind's log. A failure (or a page count of 0) raises."""
    shutil.rmtree(site / BUNDLE, ignore_errors=True)
    out = subprocess.run(pagefind_command(site), capture_output=True, text=True)
    log = out.stdout + out.stderr
    if out.returncode != 0 or not (site / BUNDLE / "pagefind.js").is_file():
        raise RuntimeError(f"Pagefind could not index {site}:\n{log}")
    return log
