"""Chapter 13's in-browser playground on the website (``tools/book_ext.py`` calls :func:`setup`).

At the start of a build the trained model is exported to ONNX with its tables
(``tools/export_numerals_onnx.py``, into the git-ignored ``book/_generated/playground/``, served
as ``_static/numerals/``). The pages that hold the placeholder ``<div class="mha-numerals-playground">``
(one markdown cell of chapter 13) -- and no other page -- get ``tools/static/numerals-playground.js``
and its CSS, plus where the page finds the runtime, the model and the tables, and how many bytes
each is. The 14 MB runtime itself (``_vendor/onnxruntime-web/``, from npm by ``tools/fetch_assets.py``)
is loaded by that script only when the reader presses the button, which names the download's size.

The two big files are served gzip-compressed as well (the runtime by ``tools/fetch_assets.py``, the
model here): 14.2 + 1.0 MB become 3.7 + 0.4 MB. The page fetches those and inflates them itself
(``DecompressionStream``), so a reader on a slow link waits for about 4 MB on any host; a browser
without ``DecompressionStream`` fetches the plain files. The progress bar counts the bytes the page
receives against the size of the file it asked for (from this build, not the response's
``Content-Length``, which a compressing host gives for the compressed body).
"""
from __future__ import annotations

import json
import pathlib

import export_numerals_onnx
import fetch_assets

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "_generated" / "playground"
PLACEHOLDER_CLASS = "mha-numerals-playground"
SCRIPT = "numerals-playground.js"
CSS = "numerals-playground.css"
# Where the page's script finds its files, relative to _static/.
PAGE_CONFIG = {"runtime": fetch_assets.ORT_SCRIPT, "wasm": fetch_assets.ORT_WASM,
               "model": f"numerals/{export_numerals_onnx.ONNX_NAME}",
               "tables": f"numerals/{export_numerals_onnx.TABLES_NAME}"}
# The runtime's loader that ort.wasm.min.js imports (counted in the download's size).
RUNTIME_LOADER = "onnxruntime-web/ort-wasm-simd-threaded.mjs"


def _gzip_model(folder: pathlib.Path) -> None:
    """``numerals_4h.onnx.gz`` next to the exported graph (rewritten only when the graph changed)."""
    onnx = folder / export_numerals_onnx.ONNX_NAME
    packed = fetch_assets.gzip_bytes(onnx.read_bytes())
    target = onnx.with_name(onnx.name + ".gz")
    if not target.is_file() or target.read_bytes() != packed:
        target.write_bytes(packed)


def page_config(vendor: pathlib.Path = fetch_assets.VENDOR, out: pathlib.Path = OUT) -> dict:
    """What the page's script is told: the files (relative to _static/) and their sizes in bytes.

    ``files``: for the runtime (wasm) and the model, ``[plain bytes, gzip bytes]``; ``download``: the
    bytes starting the model fetches in a browser with DecompressionStream (the button says it)."""
    def size(rel):
        return ((vendor if rel.startswith("onnxruntime-web/") else out) / rel).stat().st_size

    files = {key: [size(PAGE_CONFIG[key]), size(PAGE_CONFIG[key] + ".gz")] for key in ("wasm", "model")}
    download = (sum(gz for _, gz in files.values()) + size(PAGE_CONFIG["runtime"]) + size(RUNTIME_LOADER)
                + size(PAGE_CONFIG["tables"]))
    return {**PAGE_CONFIG, "files": files, "download": download}


def has_playground(doctree) -> bool:
    """Whether a page's doctree holds the playground's placeholder (raw HTML of a markdown cell)."""
    from docutils import nodes

    marker = f'class="{PLACEHOLDER_CLASS}"'
    return doctree is not None and any(marker in n.astext() for n in doctree.findall(nodes.raw))


def _export(app, config):
    export_numerals_onnx.ensure_exported(OUT)
    _gzip_model(OUT / "numerals")
    config.html_static_path = [*config.html_static_path, str(OUT)]


def _add_playground(app, pagename, templatename, context, doctree):
    if not has_playground(doctree):
        return
    app.add_js_file(None, body=f"window.mhaNumeralsPlayground = {json.dumps(page_config())};")
    app.add_js_file(SCRIPT, loading_method="defer")
    app.add_css_file(CSS)


def setup(app):
    app.connect("config-inited", _export)
    app.connect("html-page-context", _add_playground)
