"""The website's renderer for interactive figures: a myst-nb MIME render plugin.

Registered in pyproject.toml under the entry-point group ``myst_nb.mime_renderers``
(myst-nb >= 1.0, ``myst_nb.core.render.MimeRenderPlugin``). For the html builder it puts
:data:`~mha.course.page_figures.MIME_TYPE` (the Vega-Lite spec a cell stored, as JSON text) before every other
output of that cell, and turns it into::

    <div class="mha-vega-figure" role="figure" aria-label="...the figure's description...">
      <div class="mha-vega-target"></div>
      <script type="application/json" class="mha-vega-spec">{...spec...}</script>
      <noscript>...</noscript>
    </div>

That is all it does: the scripts that draw the div (the site's own vega, vega-lite and
vega-embed, and a few lines of glue) are added by ``tools/book_ext.py``, and only to
pages that hold such a div. Other builders, and Jupyter/Colab, use the cell's other outputs.
"""
from __future__ import annotations

import html
import json

from ._figure import MIME_TYPE

__all__ = ["VegaLiteFigurePlugin", "FIGURE_CLASS", "figure_html"]

FIGURE_CLASS = "mha-vega-figure"
NOSCRIPT = "（这是一张交互图：需要浏览器允许 JavaScript。上下文里有同一内容的静态图。）"


def figure_html(spec) -> str:
    """The HTML of one figure; ``spec`` is the stored Vega-Lite spec (a dict or its JSON text)."""
    if isinstance(spec, (str, bytes)):
        spec = json.loads(spec)
    if not isinstance(spec, dict) or not str(spec.get("$schema", "")).endswith(".json"):
        raise ValueError("not a Vega-Lite spec")
    description = str(spec.get("description") or "").strip()
    if not description:
        raise ValueError("an interactive figure needs a description (its alt text)")
    # JSON inside <script>: "</" and "<!--" must not end or confuse the element (escape every "<")
    text = json.dumps(spec, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    return (f'<div class="{FIGURE_CLASS}" role="figure" aria-label="{html.escape(description)}">'
            f'<div class="mha-vega-target"></div>'
            f'<script type="application/json" class="mha-vega-spec">{text}</script>'
            f"<noscript>{html.escape(NOSCRIPT)}</noscript></div>")


class VegaLiteFigurePlugin:
    """myst-nb MIME render plugin (see ``myst_nb.core.render.MimeRenderPlugin``)."""

    # (builder, mime type, priority): the lowest number wins; myst-nb's own html list starts at 10
    mime_priority_overrides = [("html", MIME_TYPE, 0), ("dirhtml", MIME_TYPE, 0), ("singlehtml", MIME_TYPE, 0)]

    @staticmethod
    def handle_mime(renderer, data, inline):
        if data.mime_type != MIME_TYPE or inline:
            return None
        from docutils import nodes

        return [nodes.raw("", figure_html(data.content), format="html", classes=["output", "mha-vega"])]
