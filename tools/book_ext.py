"""A small Sphinx extension for this book (``sphinx.local_extensions`` in ``_config.yml``).

At the start of every build it

1. makes sure the self-hosted MathJax is in ``_vendor/`` (``tools/fetch_assets.py``),
   so formulas render without any network;
2. refuses to build a Chinese site whose search cannot split Chinese words
   (Sphinx silently falls back to a useless splitter when ``jieba`` is missing);
3. draws the landing page's figure of the six steps with ``mha.viz.plot_flow``
   into ``book/_generated/`` (git-ignored), so the figure always matches the code.
"""
from __future__ import annotations

import io
import pathlib

import fetch_assets

ROOT = pathlib.Path(__file__).resolve().parents[1]
GENERATED = ROOT / "book" / "_generated"
FLOW_SVG = GENERATED / "flow.svg"


def render_flow_svg() -> bytes:
    """The landing page figure, as deterministic SVG bytes (text drawn as paths: no fonts needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mha.viz import plot_flow

    with matplotlib.rc_context({"svg.hashsalt": "mha-flow", "svg.fonttype": "path"}):
        ax = plot_flow()
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


def _on_config_inited(app, config):
    fetch_assets.ensure_assets()
    if str(config.language or "").startswith("zh"):
        try:
            import jieba  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise RuntimeError(
                "The site is Chinese (language: zh_CN) but `jieba` is not importable, so the search "
                "index could not split Chinese words. Install the pinned requirements (make book)."
            ) from exc
    write_if_changed(FLOW_SVG, render_flow_svg())


def setup(app):
    app.connect("config-inited", _on_config_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
