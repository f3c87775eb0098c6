"""What the website should contain, read from _config.yml and _toc.yml (shared by the site tests)."""
from __future__ import annotations

import dataclasses
import pathlib
import re
from urllib.parse import urlparse

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]


def config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


@dataclasses.dataclass(frozen=True)
class Page:
    docname: str          # "book/08_full_layer"
    source: pathlib.Path  # book/08_full_layer.ipynb
    numbered: bool

    @property
    def is_notebook(self) -> bool:
        return self.source.suffix == ".ipynb"

    @property
    def html(self) -> str:  # relative to _build/html
        return self.docname + ".html"

    @property
    def name(self) -> str:
        return pathlib.PurePosixPath(self.docname).name


def toc_entries() -> list:
    """(docname, numbered) for every page in _toc.yml, in reading order (root first)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    entries = [(toc["root"], False)]

    def walk(items, numbered):
        for item in items or []:
            if "file" in item:
                entries.append((item["file"], numbered))
            walk(item.get("sections"), numbered)

    for part in toc.get("parts", []):
        walk(part.get("chapters"), bool(part.get("numbered")))
    walk(toc.get("chapters"), bool(toc.get("numbered")))
    return entries


def pages() -> list:
    """The pages of _toc.yml whose source exists (other pages are still being written)."""
    found = []
    for docname, numbered in toc_entries():
        docname = re.sub(r"\.(md|ipynb)$", "", docname)
        for suffix in (".ipynb", ".md"):
            src = ROOT / (docname + suffix)
            if src.exists():
                found.append(Page(docname, src, numbered))
                break
    return found


def repository() -> tuple:
    repo = config()["repository"]
    return repo["url"].rstrip("/"), repo.get("branch", "main"), (repo.get("path_to_book") or "").strip("/")


def colab_url(page: Page) -> str:
    url, branch, book = repository()
    path = "/".join(p for p in (book, page.docname + ".ipynb") if p)
    return f"{config()['launch_buttons']['colab_url'].rstrip('/')}/github/{urlparse(url).path.strip('/')}/blob/{branch}/{path}"
