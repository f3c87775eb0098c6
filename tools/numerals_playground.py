"""Chapter 13's in-browser playground on the website (``tools/book_ext.py`` calls :func:`setup`).

At the start of a build the trained model is exported to ONNX with its tables
(``tools/export_numerals_onnx.py``, into the git-ignored ``book/_generated/playground/``, served
as ``_static/numerals/``). The pages that hold the placeholder ``<div class="mha-numerals-playground">``
(one markdown cell of chapter 13) -- and no other page -- get ``tools/static/numerals-playground.js``
and its CSS, plus where the page finds the runtime and the tables. The 14 MB runtime itself
(``_vendor/onnxruntime-web/``, from npm by ``tools/fetch_assets.py``) is loaded by that script
only when the reader starts the model.
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
               "tables": f"numerals/{export_numerals_onnx.TABLES_NAME}"}


def has_playground(doctree) -> bool:
    """Whether a page's doctree holds the playground's placeholder (raw HTML of a markdown cell)."""
    from docutils import nodes

    marker = f'class="{PLACEHOLDER_CLASS}"'
    return doctree is not None and any(marker in n.astext() for n in doctree.findall(nodes.raw))


def _export(app, config):
    export_numerals_onnx.ensure_exported(OUT)
    config.html_static_path = [*config.html_static_path, str(OUT)]


def _add_playground(app, pagename, templatename, context, doctree):
    if not has_playground(doctree):
        return
    app.add_js_file(None, body=f"window.mhaNumeralsPlayground = {json.dumps(PAGE_CONFIG)};")
    app.add_js_file(SCRIPT, loading_method="defer")
    app.add_css_file(CSS)


def setup(app):
    app.connect("config-inited", _export)
    app.connect("html-page-context", _add_playground)
