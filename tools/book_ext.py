"""A small Sphinx extension for this book (``sphinx.local_extensions`` in ``_config.yml``).

At the start of every build it

1. installs the pinned npm packages (``npm ci``) and lays out the files the pages serve in
   ``_vendor/`` (``tools/fetch_assets.py``), so nothing is loaded from a CDN;
2. renders every formula at build time with KaTeX (``tools/site_math.py``: the renderer
   ``mha-katex``; a formula it cannot render fails the strict build);
3. draws the landing page's figure of the six steps with
   ``mha.course.pictures.flow_grid.plot_flow_grid`` (the steps and shapes of ``mha.course.pictures.plot_flow``
   in two rows, legible on a phone) into ``book/_generated/`` (git-ignored), so the
   figure always matches the code;
4. drops sphinx-thebe's scripts from every page. Jupyter Book always loads sphinx-thebe
   (live code via a remote Binder kernel); this book does not offer it (readers use
   Colab or Binder through the launch buttons), and its page snippet names a CDN
   script and is even emitted twice, which redeclares a ``const`` and logs a
   JavaScript error on every page;
5. drops saved ipywidgets state from every page: a live control needs a running kernel,
   and drawing a frozen copy would need RequireJS and the widget manager from CDNs
   (``nb_ipywidgets_js: {}`` in _config.yml turns them off). The live explorer cells are
   tagged ``remove-output``; a static picture stands before each;
6. gives the pages that hold an interactive figure (``mha.course.page_figures``; the myst-nb
   plugin ``mha/course/page_figures/myst.py`` renders each as a ``div.mha-vega-figure``) the
   site's own vega, vega-lite and vega-embed (``_vendor/``, fetched from npm) plus the
   small glue ``tools/static/mha-figures.js`` and its CSS -- and no other page any of it;
7. exports chapter 13's trained model to ONNX for its in-browser playground and gives that page
   the playground's script (``tools/numerals_playground.py``);

and at the end of a successful HTML build

8. edits the written pages (``tools/site_html.py``: no icon script, no search code outside
   search.html, labels, printed chapter numbers) and
9. builds the Chinese search index with Pagefind (``tools/site_search.py``).
"""
from __future__ import annotations

import io
import pathlib

import fetch_assets
import numerals_playground
import setup_cell
import site_html
import site_math
import site_report
import site_search

ROOT = pathlib.Path(__file__).resolve().parents[1]
GENERATED = ROOT / "book" / "_generated"
FLOW_SVG = GENERATED / "flow.svg"


def render_flow_svg() -> bytes:
    """The landing page figure, as deterministic SVG bytes (text drawn as paths: no fonts needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mha.course.pictures.flow_grid import plot_flow_grid
    from mha.course.pictures.png_text import svg_with_text_size

    with matplotlib.rc_context({"svg.hashsalt": "mha-flow", "svg.fonttype": "path"}):
        ax = plot_flow_grid()
        buf = io.BytesIO()
        ax.figure.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
        svg = svg_with_text_size(buf.getvalue(), ax.figure)  # its smallest text, for tests/browser/test_browser_figures.py
        plt.close(ax.figure)
    return svg


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

    from mha.course.page_figures.myst import VegaLiteFigurePlugin

    if VegaLiteFigurePlugin not in load_mime_renders():
        raise RuntimeError(
            "myst-nb does not know the plugin for the interactive figures (entry point `myst_nb.mime_renderers` "
            "in pyproject.toml): reinstall the course package with `pip install --no-deps -e .` (make book does).")


def _on_config_inited(app, config):
    fetch_assets.ensure_assets()
    site_math.configure(config)
    _require_figure_plugin()
    write_if_changed(FLOW_SVG, render_flow_svg())


def _on_build_finished(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    outdir = pathlib.Path(app.outdir)
    site_html.edit_site(outdir, (setup_cell.read_repository(), setup_cell.release_tag()))
    site_search.build_index(outdir)


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

    from mha.course.page_figures.myst import FIGURE_CLASS

    marker = f'class="{FIGURE_CLASS}"'
    return doctree is not None and any(marker in n.astext() for n in doctree.findall(nodes.raw))


def _add_figure_scripts(app, pagename, templatename, context, doctree):
    if not has_interactive_figure(doctree):
        return
    # Only the glue sits in the page. It fetches vega, vega-lite and vega-embed (1.3 MB, named in its
    # data-vega attribute) after the page's load event: on a slow link the text, the stylesheets and
    # the formulas' fonts arrive first instead of sharing the bandwidth with the figures' libraries.
    glue = FIGURE_SCRIPTS[-1]
    app.add_js_file(glue, loading_method="defer", **{"data-vega": " ".join(FIGURE_SCRIPTS[:-1])})
    app.add_css_file(FIGURE_CSS)


def plain_title(doctree, secnumber=()) -> str:
    """A page's title as text: a formula in it as its TeX source (W^O), with the chapter number.

    Sphinx strips the tags of the rendered title, which left KaTeX's three copies of a formula
    (HTML, MathML, TeX) run together in ``<title>`` and the printed heading ("WOW^OWO")."""
    from docutils import nodes

    title = next(iter(doctree.findall(nodes.title)), None) if doctree is not None else None
    if title is None:
        return ""
    number = ".".join(map(str, secnumber)) + ". " if secnumber else ""
    return number + title.astext()


def _plain_page_title(app, pagename, templatename, context, doctree):
    text = plain_title(doctree, getattr(app.builder, "secnumbers", {}).get("", ()))
    if text and "katex" in str(context.get("title", "")):
        from markupsafe import escape

        context["title"] = str(escape(text))


def _drop_thebe_config(app, doctree, docname):
    from docutils import nodes

    for node in list(doctree.findall(nodes.raw)):
        if "text/x-thebe-config" in node.astext():
            node.parent.remove(node)


def setup(app):
    site_math.setup(app)
    app.add_js_file("mha-site.js", loading_method="defer")  # tools/static/: self-checks and wide formulas
    app.connect("config-inited", _on_config_inited)
    app.connect("html-page-context", _add_figure_scripts)
    app.connect("html-page-context", _plain_page_title)
    app.connect("html-page-context", _drop_unused_scripts, priority=900)
    app.connect("doctree-resolved", _drop_thebe_config, priority=900)
    numerals_playground.setup(app)
    site_report.setup(app)  # licences in the footer, 报告问题 on every page (tools/site_report.py)
    app.connect("build-finished", _on_build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
