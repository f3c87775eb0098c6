"""``make bundle``: the built website and all notebooks as two zips named with the release version.

- ``_build/release/mha-course-<version>-site.zip``: ``_build/html`` (``make book``) under one folder
  ``mha-course-<version>-site/`` with a note 离线阅读.txt at its top. The pages need a server (the
  search, the interactive figures and the in-browser model fetch files, which browsers refuse on
  ``file://``): unpack, then in that folder run ``python -m http.server`` and open
  http://127.0.0.1:8000 (tests/site/test_site_release.py does exactly this).
- ``_build/release/mha-course-<version>-notebooks.zip``: every chapter notebook (``book/*.ipynb``,
  with stored outputs) under ``mha-course-<version>-notebooks/``, with the licences.

Usage: ``python tools/bundle.py [HTML_DIR] [OUT_DIR]``. Entries are written in sorted order with a
fixed timestamp, so the same site gives the same zip.
"""
from __future__ import annotations

import pathlib
import sys
import time
import zipfile

import site_report

ROOT = pathlib.Path(__file__).resolve().parents[1]
STAMP = (2026, 1, 1, 0, 0, 0)
SERVE = "python -m http.server"
README_SITE = f"""多头注意力，一步一步 {{version}}：网站离线包

在这个文件夹里运行（需要 Python 3）：

    {SERVE}

然后用浏览器打开 http://127.0.0.1:8000 。直接双击 index.html 也能读正文，但搜索、交互图和网页里的模型需要这个本机服务器。

代码：MIT 许可（LICENSE）；文字与图：CC BY-SA 4.0（LICENSE-CONTENT.md）。
"""
README_NOTEBOOKS = """多头注意力，一步一步 {version}：全部 notebook

每个 notebook 的第一格安装课程包 mha（Colab 里直接运行即可）；本地请先 pip install "mha-course[course]"，
或在仓库里运行 make lab。

代码：MIT 许可（LICENSE）；文字与图：CC BY-SA 4.0（LICENSE-CONTENT.md）。
"""
LICENCES = ("LICENSE", "LICENSE-CONTENT.md", "CITATION.cff")


def _add(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, STAMP)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    zf.writestr(info, data)


def write_zip(out: pathlib.Path, top: str, files: dict, notes: dict) -> pathlib.Path:
    """``files``: name inside ``top/`` -> path on disk; ``notes``: name -> text."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".partial")
    with zipfile.ZipFile(tmp, "w", compresslevel=9) as zf:
        for name, text in sorted(notes.items()):
            _add(zf, f"{top}/{name}", text.encode("utf-8"))
        for name in sorted(files):
            _add(zf, f"{top}/{name}", files[name].read_bytes())
    tmp.replace(out)
    return out


def site_zip(html: pathlib.Path, out_dir: pathlib.Path, version: str) -> pathlib.Path:
    if not (html / "index.html").is_file():
        raise FileNotFoundError(f"no built site at {html}: run `make book` first")
    name = site_report.names(version)["site"]
    files = {p.relative_to(html).as_posix(): p for p in html.rglob("*") if p.is_file() and p.name != ".buildinfo"}
    files.update({n: ROOT / n for n in LICENCES})
    return write_zip(out_dir / name, name.removesuffix(".zip"), files, {"离线阅读.txt": README_SITE.format(version=version)})


def notebooks_zip(out_dir: pathlib.Path, version: str) -> pathlib.Path:
    name = site_report.names(version)["notebooks"]
    files = {p.name: p for p in sorted((ROOT / "book").glob("*.ipynb"))}
    if not files:
        raise FileNotFoundError("no notebooks in book/")
    files.update({n: ROOT / n for n in LICENCES})
    return write_zip(out_dir / name, name.removesuffix(".zip"), files, {"README.txt": README_NOTEBOOKS.format(version=version)})


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    html = pathlib.Path(argv[0]) if argv else ROOT / "_build" / "html"
    out_dir = pathlib.Path(argv[1]) if len(argv) > 1 else ROOT / "_build" / "release"
    version = site_report.version()
    start = time.perf_counter()
    for path in (site_zip(html, out_dir, version), notebooks_zip(out_dir, version)):
        print(f"{path} ({path.stat().st_size / 1e6:.1f} MB)")
    print(f"bundled in {time.perf_counter() - start:.0f} s; to read the site offline: unpack, cd into it, {SERVE}")


if __name__ == "__main__":
    main()
