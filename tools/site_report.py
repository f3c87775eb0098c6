"""What travels with the book: licences in the footer, a report link on every page, the downloads.

Every URL is derived from ``_config.yml``'s ``repository.url`` (Jupyter Book hands it to the theme as
``html_theme_options["repository_url"]``) and the release version from ``pyproject.toml``:

- the footer of every page names both licences (code: MIT, ``LICENSE``; text and figures:
  CC BY-SA 4.0, ``LICENSE-CONTENT.md``) and links the latest PDF and offline bundles
  (``releases/latest/download/...``, attached by ``.github/workflows/release.yml``);
- every page of the book ends with 报告问题: a plain link to GitHub's new-issue form
  ``.github/ISSUE_TEMPLATE/mistake.yml``, prefilled with the page's title and address (nothing
  loads until a reader clicks it, so it costs nothing offline), and a link to the 勘误与更新记录
  page (``book/changelog.md``, fed from ``CHANGELOG.md``);
- the single-page build that ``make pdf`` prints gets neither the report block nor the footer
  links' explanations: see ``tools/book_pdf.py``.

``names(version)`` is the one place the release files are named (``make bundle``, ``make pdf``,
the release workflow and the site all use it).
"""
from __future__ import annotations

import pathlib
import tomllib
from urllib.parse import quote, urlencode, urlparse

ROOT = pathlib.Path(__file__).resolve().parents[1]
ISSUE_TEMPLATE = "mistake.yml"  # .github/ISSUE_TEMPLATE/
CHANGELOG_PAGE = "book/changelog"
REPORT_CLASS = "mha-report"
NO_REPORT = {"genindex", "search", "py-modindex"}


def version(root: pathlib.Path = ROOT) -> str:
    """The release version: ``[project] version`` in pyproject.toml."""
    with open(root / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["version"]


def names(ver: str | None = None) -> dict:
    """The release files: versioned (``make pdf``/``make bundle``) and the stable names the site links."""
    ver = ver or version()
    return {
        "pdf": f"mha-course-{ver}.pdf",
        "site": f"mha-course-{ver}-site.zip",
        "notebooks": f"mha-course-{ver}-notebooks.zip",
        "latest": {"pdf": "mha-course.pdf", "site": "mha-course-site.zip", "notebooks": "mha-course-notebooks.zip"},
    }


def site_url(repo_url: str) -> str:
    """The published site (GitHub Pages of the repository: .github/workflows/pages.yml)."""
    owner, name = urlparse(repo_url).path.strip("/").split("/")[:2]
    return f"https://{owner}.github.io/{name}/"


def issue_url(repo_url: str, title: str, page_url: str) -> str:
    """GitHub's new-issue form, its fields prefilled by their ids (``page`` in mistake.yml)."""
    query = urlencode({"template": ISSUE_TEMPLATE, "title": f"[勘误] {title}", "page": f"{title}\n{page_url}"},
                      quote_via=quote)
    return f"{repo_url.rstrip('/')}/issues/new?{query}"


def download_urls(repo_url: str) -> dict:
    latest = names()["latest"]
    return {k: f"{repo_url.rstrip('/')}/releases/latest/download/{v}" for k, v in latest.items()}


def footer_html(repo_url: str, branch: str = "main") -> str:
    repo = f"{repo_url.rstrip('/')}/blob/{branch}"
    dl = download_urls(repo_url)
    return (
        f'<p class="mha-licence">代码以 <a href="{repo}/LICENSE">MIT 许可</a>发布；'
        f'文字与图以 <a href="{repo}/LICENSE-CONTENT.md">CC BY-SA 4.0</a>（知识共享 署名-相同方式共享）发布。'
        f'引用本书：<a href="{repo}/CITATION.cff">CITATION.cff</a>。</p>'
        f'<p class="mha-downloads">离线阅读：<a href="{dl["pdf"]}">PDF</a> · '
        f'<a href="{dl["site"]}">网站离线包（zip）</a> · <a href="{dl["notebooks"]}">全部 notebook（zip）</a></p>')


def report_html(repo_url: str, title: str, page_url: str, changelog_href: str) -> str:
    return (
        f'<aside class="{REPORT_CLASS}" aria-label="报告问题">'
        f'<p>发现错误、看不懂，或者代码跑不通？'
        f'<a class="mha-report-link" href="{issue_url(repo_url, title, page_url)}" rel="noopener">报告问题</a>'
        f'（在 GitHub 上打开一张已填好本页标题和地址的表单）· '
        f'<a class="mha-errata-link" href="{changelog_href}">勘误与更新记录</a></p></aside>')


def _repo_url(config) -> str:
    url = (config.html_theme_options or {}).get("repository_url", "")
    if not url:
        raise RuntimeError("_config.yml has no repository.url: the report links and downloads are derived from it")
    return url


def _on_config_inited(app, config):
    options = dict(config.html_theme_options or {})
    options["extra_footer"] = footer_html(_repo_url(config), options.get("repository_branch") or "main")
    config.html_theme_options = options


def _add_report(app, pagename, templatename, context, doctree):
    if doctree is None or pagename in NO_REPORT or app.builder.name != "html" or "body" not in context:
        return
    import book_ext

    title = book_ext.plain_title(doctree, getattr(app.builder, "secnumbers", {}).get("", ())) or pagename
    page_url = site_url(_repo_url(app.config)) + pagename + ".html"
    changelog = "#" if pagename == CHANGELOG_PAGE else app.builder.get_relative_uri(pagename, CHANGELOG_PAGE)
    block = report_html(_repo_url(app.config), title, page_url, changelog)
    context["body"] += block


def setup(app):
    app.add_css_file("mha-report.css")
    app.connect("config-inited", _on_config_inited)
    app.connect("html-page-context", _add_report)
