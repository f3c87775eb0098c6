"""Formulas rendered at build time: KaTeX (npm ``katex``, run by node through sphinxcontrib-katex).

A page carries its formulas as finished HTML (for the eye) plus MathML (for screen readers and
copy), so it shows them at first paint with no math JavaScript, also with JavaScript off.
The renderer is registered as ``mha-katex`` (``html_math_renderer`` in _config.yml): the
same HTML as sphinxcontrib-katex's prerendering, but strict -- a formula KaTeX cannot
render is a build warning with its place (``-W`` fails the build), not red text on the site.
"""
from __future__ import annotations

import html

from sphinx.locale import _
from sphinx.util import logging

import fetch_assets

LOGGER = logging.getLogger(__name__)
# throwOnError: an unknown command is an error, not red text; strict "ignore": Chinese inside
# formulas is fine for KaTeX (it would only log LaTeX-compatibility notes).
OPTIONS = {"throwOnError": True, "strict": "ignore", "output": "htmlAndMathml"}


# sphinxcontrib-katex gives node 5 s to start and 5 s per formula: on a busy 2-core machine (CI, the
# course's own) starting node took longer, the build failed and the orphaned server hung the caller.
STARTUP_TIMEOUT_S = 120.0
RENDER_TIMEOUT_S = 60.0


def katex_js() -> str:
    """The katex.min.js that node runs (installed by ``npm ci``, never served to readers)."""
    return str(fetch_assets.package_dir("katex") / "dist" / "katex.min.js")


def render(latex: str, display: bool, node) -> str:
    """KaTeX's HTML for ``latex``; a warning at ``node`` (and the escaped TeX) when it cannot."""
    from sphinxcontrib import katex

    if katex.KaTeXServer.katex_server is None:  # before the node server starts
        katex.KaTeXServer.katex_path = katex_js()
        katex.STARTUP_TIMEOUT, katex.RENDER_TIMEOUT = STARTUP_TIMEOUT_S, RENDER_TIMEOUT_S
        katex.KaTeXServer.start_server_process = classmethod(_start_server_process)
    try:
        return katex.render_latex(latex, {**OPTIONS, "displayMode": display})
    except katex.KaTeXError as exc:
        LOGGER.warning("KaTeX cannot render the formula %r: %s", latex, exc, location=node,
                       type="mha", subtype="math")
        return f'<span class="mha-math-error">{html.escape(latex)}</span>'


def _start_server_process(cls, rundir, timeout):
    """sphinxcontrib-katex's start, waiting until node *listens*: it connected as soon as the socket
    file existed, which node creates before it listens, so a busy machine got ConnectionRefusedError
    (a failed strict build, and an orphaned node holding the build's pipes)."""
    import socket
    import subprocess
    import time

    path = rundir / "katex.sock"
    process = subprocess.Popen(cls.build_command(socket=path), stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=rundir)
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(path))
            return process, sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise cls.timeout_error(timeout) from None
            time.sleep(0.01)


def visit_math(self, node):
    from docutils import nodes

    self.body.append(self.starttag(node, "span", "", CLASS="math"))
    self.body.append(render(node.astext(), False, node))
    self.body.append("</span>")
    raise nodes.SkipNode


def visit_displaymath(self, node):
    from docutils import nodes
    from sphinxcontrib.katex import get_node_equation_number

    self.body.append(self.starttag(node, "div", CLASS="math"))
    if node["number"]:
        self.body.append(f'<span class="eqno">({get_node_equation_number(self, node)})')
        self.add_permalink_ref(node, _("Permalink to this equation"))
        self.body.append("</span>")
    self.body.append(render(node.astext(), True, node))
    self.body.append("</div>\n")
    raise nodes.SkipNode


def setup(app):
    """Register the renderer; the node server runs katex.min.js from node_modules."""
    app.add_html_math_renderer("mha-katex", inline_renderers=(visit_math, None),
                               block_renderers=(visit_displaymath, None))
    app.connect("build-finished", stop_server, priority=100)  # first: every page is written by then


def stop_server(app=None, exception=None) -> None:
    """End the KaTeX node server at the end of the build. sphinxcontrib-katex only does it at
    interpreter exit (atexit), which a failed build can skip: the orphaned node then keeps the
    build's output pipes open and a caller waiting for them (tests/support/site_build.py) hangs."""
    import atexit

    from sphinxcontrib.katex import KaTeXServer

    server, KaTeXServer.katex_server = KaTeXServer.katex_server, None
    if server is not None:
        atexit.unregister(KaTeXServer.terminate)  # done here; a second run would fail to remove its folder
        server.terminate()


def configure(config):
    """At config-inited: the stylesheet the pages link and the KaTeX node runs (after ``npm ci``)."""
    config.katex_prerender = True
    config.katex_css_path = fetch_assets.KATEX_CSS
    config.katex_js_path = katex_js()
