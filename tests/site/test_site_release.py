"""What ships with a release, on the built site: every page's report link and licence footer,
the errata page, no Binder, the offline bundle served from its unpacked zip, and the PDF.

The PDF test prints the book as ``make pdf`` does (tools/book_pdf.py on the single-page build)
and reads it back with pypdf: every chapter in the TOC's order as a bookmark, Chinese text,
formulas rendered (no TeX source left), figures, page numbers."""
from __future__ import annotations

import html
import json
import re
import socket
import subprocess
import sys
import time
import unicodedata
import urllib.request
import zipfile
from urllib.parse import parse_qs, urljoin, urlparse

import nbformat
import pytest
from bs4 import BeautifulSoup

import bundle
import site_report
from site_build import jupyter_book, problems_in
from site_pages import ROOT, config, pages

PAGES = pages()
REPO = config()["repository"]["url"].rstrip("/")


@pytest.fixture(scope="module")
def site(built_site):
    assert (built_site.html / "index.html").is_file(), built_site.log[-3000:]
    return built_site.html


def soup(path):
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def page_title(doc) -> str:
    return re.sub(r" — .*$", "", doc.title.get_text()).strip()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_page_reports_and_names_the_licences(site, page):
    doc = soup(site / page.html)
    links = doc.select("article .mha-report a.mha-report-link")
    assert len(links) == 1, "no 报告问题 link at the end of the article"
    url = urlparse(links[0]["href"])
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert url.geturl().startswith(REPO + "/issues/new?")
    title = page_title(doc)
    assert title and title in query["title"] and title in query["page"]
    assert query["page"].endswith(site_report.site_url(REPO) + page.html)
    # the errata page is linked from the same block, and exists
    errata = doc.select_one(".mha-report a.mha-errata-link")["href"]
    target = (site / page.html).parent.joinpath(errata).resolve() if errata != "#" else site / page.html
    assert target == (site / "book" / "changelog.html").resolve() and target.is_file(), errata
    footer = doc.select_one(".extra_footer")
    assert footer is not None, "no licence footer"
    hrefs = [a["href"] for a in footer.find_all("a")]
    blob = f"{REPO}/blob/{config()['repository'].get('branch', 'main')}"
    assert f"{blob}/LICENSE" in hrefs and f"{blob}/LICENSE-CONTENT.md" in hrefs
    assert "MIT" in footer.get_text() and "CC BY-SA 4.0" in footer.get_text()
    assert any(h.startswith(REPO + "/releases/latest/download/") and h.endswith(".pdf") for h in hrefs)
    offers = [a.get("href", "") for a in doc.find_all("a") if "binder" in (a.get("href", "") + a.get_text()).lower()]
    assert not offers, f"Binder was removed (unreachable from mainland China): no page may offer it: {offers}"


def test_errata_page_shows_every_release_of_the_changelog(site):
    releases = re.findall(r"^## \[([^\]]+)\]", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert releases
    text = soup(site / "book" / "changelog.html").find("article").get_text()
    for version in releases:
        assert f"[{version}]" in text, version


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, tries: int = 50) -> bytes:
    for _ in range(tries):
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return r.read()
        except (ConnectionError, urllib.error.URLError):
            time.sleep(0.2)
    raise AssertionError(f"nothing answered at {url}")


@pytest.mark.slow
def test_site_bundle_serves_offline_from_its_unpacked_zip(site, tmp_path):
    version = site_report.version()
    zipped = bundle.site_zip(site, tmp_path / "release", version)
    assert zipped.name == site_report.names(version)["site"]
    with zipfile.ZipFile(zipped) as zf:
        zf.extractall(tmp_path / "unpacked")
    folder = tmp_path / "unpacked" / zipped.name.removesuffix(".zip")
    assert bundle.SERVE in (folder / "离线阅读.txt").read_text(encoding="utf-8")
    port = _free_port()
    # the one line the note gives the reader: python -m http.server, in the unpacked folder
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], cwd=folder,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}/"
        chapter = base + "book/03_linear_projection.html"
        html = _get(chapter).decode("utf-8")
        doc = BeautifulSoup(html, "html.parser")
        assert page_title(doc).startswith("3. 三个 Linear 投影")
        css = [urljoin(chapter, l["href"]) for l in doc.find_all("link", rel="stylesheet")]
        asset = next(u for u in css if "mha-site.css" in u)
        assert _get(asset) == (site / "_static" / "mha-site.css").read_bytes()
        for src in (doc.select_one("article img")["src"], "../pagefind/pagefind.js"):
            url = urljoin(chapter, src)
            assert _get(url) == (site / urlparse(url).path.lstrip("/")).read_bytes(), url
    finally:
        server.terminate()
        server.wait(10)


def test_notebook_bundle_holds_every_chapter(tmp_path):
    version = site_report.version()
    zipped = bundle.notebooks_zip(tmp_path, version)
    top = zipped.name.removesuffix(".zip")
    with zipfile.ZipFile(zipped) as zf:
        names = set(zf.namelist())
        for page in (p for p in PAGES if p.is_notebook):
            name = f"{top}/{page.name}.ipynb"
            assert name in names, name
            nb = nbformat.reads(zf.read(name).decode("utf-8"), as_version=4)
            assert any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), f"{name} has no stored outputs"
        assert {f"{top}/LICENSE", f"{top}/LICENSE-CONTENT.md"} <= names


# ---------------------------------------------------------------- the PDF

@pytest.fixture(scope="module")
def pdf(tmp_path_factory):
    pypdf = pytest.importorskip("pypdf", reason="pypdf is pinned in requirements.txt")
    import book_pdf

    folder = tmp_path_factory.mktemp("pdf")
    # the log goes to a file, not a pipe: a node server outliving the build cannot hang the test
    with open(folder / "build.log", "w+", encoding="utf-8") as log:
        code = subprocess.run([jupyter_book(), "build", ".", "--builder", "singlehtml", "-W", "-n", "--keep-going"],
                              cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, timeout=600).returncode
        log.seek(0)
        text = log.read()
    assert code == 0 and not problems_in(text), text[-3000:]
    path = folder / "book.pdf"
    book_pdf.print_pdf(ROOT / "_build" / "singlehtml", path)
    return pypdf.PdfReader(path)


def _outline(reader, items=None, depth=0):
    for item in reader.outline if items is None else items:
        if isinstance(item, list):
            yield from _outline(reader, item, depth + 1)
        else:
            yield depth, item.title, reader.get_destination_page_number(item)


@pytest.mark.slow
def test_pdf_has_every_chapter_in_order_as_a_bookmark(pdf, site):
    marks = list(_outline(pdf))
    # the book's title, then one bookmark per page of the TOC, at the same depth
    depth = marks[1][0]
    tops = [(title, number) for d, title, number in marks if d == depth and title != "目录"]
    expected = [page_title(soup(site / p.html)) for p in PAGES[1:]]
    found = [t for t, _ in tops if re.match(r"\d+\. |核心概念|公式汇总|参考资料|勘误", t)]
    assert len(found) == len(expected), (found, expected)
    for got, want in zip(found, expected):
        # a formula in a title (7's W^O) is left out of the bookmark; every other word is kept
        assert all(word in want for word in got.split()), (got, want)
    numbers = [n for t, n in tops if t in found]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers), "chapters must start on new pages"
    # the table of contents on the first page gives the same pages, one line per chapter
    toc = unicodedata.normalize("NFKC", pdf.pages[0].extract_text()).split("目录", 1)[-1]
    listed = [int(m) for m in re.findall(r"(\d+)\s*$", toc, re.M)][:len(expected)]
    assert listed == [n + 1 for n in numbers], (listed, numbers)


@pytest.mark.slow
def test_pdf_text_formulas_figures_and_page_numbers(pdf):
    texts = [unicodedata.normalize("NFKC", p.extract_text()) for p in pdf.pages]
    total = len(texts)
    assert total > 100
    whole = "\n".join(texts)
    flat = re.sub(r"\s", "", whole)  # pypdf puts spaces between Chinese and Latin runs
    for words in ("多头注意力", "缩放点积", "分头", "掩码", "代码MIT许可", "CCBY-SA4.0"):
        assert words in flat, words
    # formulas are KaTeX's rendering, never their TeX source
    for tex in ("\\frac", "\\sqrt", "\\mathrm", "\\text{", "$$"):
        assert tex not in whole, tex
    # page numbers in the footer: "n / total" on every page
    assert all(re.search(rf"\b{i + 1} / {total}\b", t) for i, t in enumerate(texts))
    images = sum(len(p.images) for p in pdf.pages)
    assert images >= 40, f"only {images} raster figures in the PDF"
    # self-checks are printed with their question and options (ch01's first) and without any
    # feedback, which names the right answer (jupyterquiz's data in the page)
    from mha.course import selfcheck

    first = selfcheck.questions("1.1")[0]
    plain = lambda text: unicodedata.normalize("NFKC", re.sub(r"<[^>]+>|\s", "", html.unescape(text)))  # noqa: E731
    printed = unicodedata.normalize("NFKC", flat)  # the PDF's text uses CJK radicals (⾃ for 自)
    assert plain(first["question"])[:24] in printed
    assert all(plain(a["answer"]) in printed for a in first["answers"])
    page = (ROOT / "_build" / "singlehtml" / "book.html").read_text(encoding="utf-8")
    feedback = [re.sub(r"<[^>]+>|\s", "", json.loads(f'"{f}"'))[:12]
                for f in re.findall(r'"feedback": *"((?:[^"\\]|\\.)*)"', page)]
    assert len(feedback) > 20
    assert not [f for f in feedback if f in flat]
