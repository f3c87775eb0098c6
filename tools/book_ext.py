"""A small Sphinx extension for this book (``sphinx.local_extensions`` in ``_config.yml``).

At the start of every build it

1. makes sure the self-hosted MathJax is in ``_vendor/`` (``tools/fetch_assets.py``),
   so formulas render without any network;
2. refuses to build a Chinese site whose search cannot split Chinese words
   (Sphinx silently falls back to a useless splitter when ``jieba`` is missing);
3. draws the landing page's figure of the six steps with
   ``mha.viz.flow_grid.plot_flow_grid`` (the steps and shapes of ``mha.viz.plot_flow``
   in two rows, legible on a phone) into ``book/_generated/`` (git-ignored), so the
   figure always matches the code;
4. drops sphinx-thebe's scripts from every page. Jupyter Book always loads sphinx-thebe
   (live code via a remote Binder kernel); this book does not offer it (readers use
   Colab or Binder through the launch buttons), and its page snippet names a CDN
   script and is even emitted twice, which redeclares a ``const`` and logs a
   JavaScript error on every page;
5. loads MathJax on every page (the navigation shows chapter titles with formulas);
6. drops saved ipywidgets state from every page: a live control needs a running kernel,
   and drawing a frozen copy would need RequireJS and the widget manager from CDNs
   (``nb_ipywidgets_js: {}`` in _config.yml turns them off). The live explorer cells are
   tagged ``remove-output``; a static picture stands before each;
7. gives the pages that hold an interactive figure (``mha.interactive``; the myst-nb
   plugin ``mha/course/interactive/myst.py`` renders each as a ``div.mha-vega-figure``) the
   site's own vega, vega-lite and vega-embed (``_vendor/``, fetched from npm) plus the
   small glue ``tools/static/mha-figures.js`` and its CSS -- and no other page any of it;
8. exports chapter 13's trained model to ONNX for its in-browser playground and gives that page
   the playground's script (``tools/numerals_playground.py``).
"""
from __future__ import annotations

import io
import pathlib

import fetch_assets
import numerals_playground

ROOT = pathlib.Path(__file__).resolve().parents[1]
GENERATED = ROOT / "book" / "_generated"
FLOW_SVG = GENERATED / "flow.svg"


def render_flow_svg() -> bytes:
    """The landing page figure, as deterministic SVG bytes (text drawn as paths: no fonts needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mha.viz.flow_grid import plot_flow_grid

    with matplotlib.rc_context({"svg.hashsalt": "mha-flow", "svg.fonttype": "path"}):
        ax = plot_flow_grid()
        buf = io.BytesIO()
        ax.figure.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
        plt.close(ax.figure)
    return buf.getvalue()


def write_if_changed(path: pathlib.Path, data: bytes) -> bool:
    """Write ``data`` unless ``path`` already holds it (keeps incremental builds incremental)."""
    if path.is_file() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return True


def _require_figure_plugin():
    """The interactive figures need the myst-nb plugin that the installed ``mha`` registers (entry point)."""
    from myst_nb.core.render import load_mime_renders

    from mha.interactive.myst import VegaLiteFigurePlugin

    if VegaLiteFigurePlugin not in load_mime_renders():
        raise RuntimeError(
            "myst-nb does not know the plugin for the interactive figures (entry point `myst_nb.mime_renderers` "
            "in pyproject.toml): reinstall the course package with `pip install --no-deps -e .` (make book does).")


def _on_config_inited(app, config):
    fetch_assets.ensure_assets()
    _require_figure_plugin()
    if str(config.language or "").startswith("zh"):
        try:
            import jieba  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise RuntimeError(
                "The site is Chinese (language: zh_CN) but `jieba` is not importable, so the search "
                "index could not split Chinese words. Install the pinned requirements (make book)."
            ) from exc
    write_if_changed(FLOW_SVG, render_flow_svg())


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def _is_widget_state(asset) -> bool:
    return getattr(asset, "attributes", {}).get("type") == WIDGET_STATE


def _is_thebe(asset) -> bool:
    text = f"{getattr(asset, 'filename', asset) or ''} {getattr(asset, 'attributes', {}).get('body', '')}"
    return "thebe" in text.lower()


def _drop_unused_scripts(app, pagename, templatename, context, doctree):
    for key in ("script_files", "css_files"):
        if key in context:
            context[key] = [a for a in context[key] if not (_is_thebe(a) or _is_widget_state(a))]


FIGURE_SCRIPTS = (*fetch_assets.VEGA_SCRIPTS, "mha-figures.js")  # relative to _static/, in load order
FIGURE_CSS = "mha-figures.css"


def has_interactive_figure(doctree) -> bool:
    """Whether a page's doctree holds an interactive figure (the myst-nb plugin's raw HTML)."""
    from docutils import nodes

    from mha.interactive.myst import FIGURE_CLASS

    marker = f'class="{FIGURE_CLASS}"'
    return doctree is not None and any(marker in n.astext() for n in doctree.findall(nodes.raw))


def _add_figure_scripts(app, pagename, templatename, context, doctree):
    if not has_interactive_figure(doctree):
        return
    for script in FIGURE_SCRIPTS:  # deferred: run in this order, before DOMContentLoaded
        app.add_js_file(script, loading_method="defer")
    app.add_css_file(FIGURE_CSS)


def _drop_thebe_config(app, doctree, docname):
    from docutils import nodes

    for node in list(doctree.findall(nodes.raw)):
        if "text/x-thebe-config" in node.astext():
            node.parent.remove(node)


def setup(app):
    # Chapter titles in the navigation hold math ($W^O$), so every page -- also search and
    # index pages without a formula of their own -- must load MathJax, or they show raw TeX.
    app.set_html_assets_policy("always")
    app.connect("config-inited", _on_config_inited)
    app.connect("html-page-context", _add_figure_scripts)
    app.connect("html-page-context", _drop_unused_scripts, priority=900)
    app.connect("doctree-resolved", _drop_thebe_config, priority=900)
    numerals_playground.setup(app)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
