"""Every PNG a chapter shows carries the size of its smallest text, so the website can be measured.

In the kernels ``make execute`` starts (the IPython extension below), this module wraps the inline backend's PNG formatter for matplotlib
figures (the one place a chapter's ``plt.show()`` / ``display(fig)`` turns a figure into the PNG the
notebook stores and the website shows). The wrapper writes the same PNG plus one ``tEXt`` chunk (Pillow's ``PngInfo``),
``mha:smallest-text-px``: the font size of the figure's smallest drawn text in image px
(:func:`mha.course.pictures.style.smallest_text_pt` at the PNG's own resolution, its ``pHYs`` chunk), or
``none`` for a figure without text. The pixels are untouched and Pillow encodes them the same way
each run, so the output stays deterministic. tests/browser/test_browser_figures.py reads the chunk from the images the website serves
and scales it by rendered / natural width: the CSS px a phone reader sees. The landing page's
SVG (tools/book_ext.py) carries the same number as the root attribute ``data-mha-smallest-text-px``.

Sharp on phones: the wrapper also draws the PNG at ``SCALE`` (2) times the figure's dpi, as
IPython's ``retina`` format does, and stores its display width (half its pixels) in the output's
metadata, so the page shows it at the same CSS size as a 1x PNG -- text keeps its CSS px, and a
phone's 2-3x screen gets 2 image px per CSS px. Only the width is stored: the page scales the
image down on a narrow column, and a fixed height would stretch it.

Light pages: twice the pixels would be about 2.2 times the bytes (chapter 5's five figures: 233 KB
at 1x, 505 KB at 2x), past the website's page weights. So the 2x PNG is stored with a palette of
256 colours (Pillow's maximum-coverage quantizer, no dithering) when that is nearly lossless --
mean channel difference at most ``PALETTE_MEAN_DIFF`` of 255, as for the flat colours, text and
heat-map cells of these figures (chapter 5: mean 0.06-0.47, largest 2-6 of 255, on anti-aliased
edges) -- and smaller: 174 KB for chapter 5's five, less than at 1x. A figure with smooth shading
keeps its full colours.
"""
from __future__ import annotations

import binascii
import io

from .style import smallest_text_pt

KEY = "mha:smallest-text-px"
NO_TEXT = "none"

SCALE = 2  # image px per CSS px of the stored PNGs
PALETTE_MEAN_DIFF = 1.0  # the largest mean channel difference (of 255) a palette PNG may add

__all__ = ["KEY", "NO_TEXT", "SCALE", "compact", "install", "png_dpi", "smallest_text_value", "svg_with_text_size", "with_text_chunk"]


def _open(png: bytes):
    """``png`` decoded by Pillow; a ValueError for anything but a PNG."""
    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(png), formats=["PNG"])
        image.load()
    except (UnidentifiedImageError, TypeError, OSError) as err:
        raise ValueError(f"expected the bytes of a PNG image, got {bytes(png[:8])!r}...") from err
    return image


def _save(image, dpi: float | None, text: dict, **options) -> bytes:
    """``image`` as PNG bytes with resolution ``dpi`` and one ``tEXt`` chunk per item of ``text`` (Pillow's PngInfo)."""
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    for key, value in text.items():
        info.add_text(key, value)
    out = io.BytesIO()
    image.save(out, format="PNG", pnginfo=info, **({"dpi": (dpi, dpi)} if dpi else {}), **options)
    return out.getvalue()


def png_dpi(png: bytes) -> float | None:
    """The resolution a PNG declares (its ``pHYs`` chunk, in dots per inch), or None."""
    dpi = _open(png).info.get("dpi")
    return float(dpi[0]) if dpi else None


def with_text_chunk(png: bytes, key: str, value: str) -> bytes:
    """``png`` with the ``tEXt`` chunk ``key``/``value`` (any earlier one of that key replaced); its pixels,
    resolution and other text kept (re-encoded by Pillow)."""
    image = _open(png)
    text = {k: v for k, v in image.text.items() if k != key} | {key: value}
    return _save(image, png_dpi(png), text, optimize=image.mode == "P")


def smallest_text_value(fig, dpi: float) -> str:
    """The chunk's text: ``fig``'s smallest text in px of an image drawn at ``dpi`` (2 decimals), or ``none``."""
    fig.draw_without_rendering()  # tick labels as drawn (call it once the image is written)
    try:
        return f"{smallest_text_pt(fig) * dpi / 72:.2f}"
    except ValueError:  # no visible text
        return NO_TEXT


def svg_with_text_size(svg: bytes, fig) -> bytes:
    """A matplotlib SVG of ``fig`` whose root carries ``data-mha-smallest-text-px`` (CSS px at its natural size).

    Its natural size is its width and height in pt, 96/72 CSS px each: the value is measured at 96 dpi.
    """
    head, sep, rest = svg.partition(b"<svg ")
    if not sep:
        raise ValueError("expected the bytes of an SVG image")
    return head + sep + f'data-{KEY.replace(":", "-")}="{smallest_text_value(fig, 96)}" '.encode() + rest


def compact(png: bytes, text: dict | None = None) -> bytes:
    """``png`` as a 256-colour palette PNG (its resolution kept) when that is nearly lossless and smaller, else
    ``png``; either way with the ``tEXt`` chunks ``text`` added (key -> value; one of the same key replaced)."""
    import numpy as np
    from PIL import Image

    image = _open(png)
    dpi, text = png_dpi(png), {**image.text, **(text or {})}
    rgba = image.convert("RGBA")
    opaque = rgba.getchannel("A").getextrema()[0] == 255
    source = rgba.convert("RGB") if opaque else rgba
    method = Image.Quantize.MAXCOVERAGE if opaque else Image.Quantize.FASTOCTREE  # (the only one for RGBA)
    palette = source.quantize(256, method=method, dither=Image.Dither.NONE)
    diff = np.abs(np.asarray(palette.convert(source.mode), dtype=np.int16) - np.asarray(source, dtype=np.int16))
    if diff.mean() <= PALETTE_MEAN_DIFF:
        small = _save(palette, dpi, text, optimize=True)
        if len(small) < len(png):
            return small
    return png if text == image.text else _save(image, dpi, text)


def _with_measure(fig, data):
    """``data`` (PNG bytes or their base64 text) of ``fig`` with the chunk, in the same form (palette: ``compact``)."""
    png = binascii.a2b_base64(data) if isinstance(data, str) else data
    png = compact(png, {KEY: smallest_text_value(fig, png_dpi(png) or fig.dpi)})
    return binascii.b2a_base64(png, newline=False).decode("ascii") if isinstance(data, str) else png


def _doubled(base):
    """``base`` drawing at ``SCALE`` x: IPython's inline PNG formatter (``print_figure`` with ``fmt="png"``)
    becomes its ``retina_figure`` with the same options; any other formatter stays as it is."""
    from functools import partial

    from IPython.core.pylabtools import print_figure, retina_figure

    if isinstance(base, partial) and base.func is print_figure and base.keywords.get("fmt") == "png":
        return partial(retina_figure, *base.args, **{k: v for k, v in base.keywords.items() if k != "fmt"})
    return base


def _measured(base):
    """A PNG formatter calling ``base`` (fig -> PNG data, or (PNG data, metadata) for retina) and adding the chunk.

    A plain PNG formatter of IPython's is first made a retina one (``_doubled``); the metadata keeps the
    display width only (see the module docstring)."""
    base = _doubled(base)

    def formatter(fig, *args, **kwargs):
        data = base(fig, *args, **kwargs)
        if data is None:  # an empty figure: IPython shows nothing
            return None
        if isinstance(data, tuple):
            png, metadata = data[0], {k: v for k, v in (data[1] or {}).items() if k != "height"}
            return (_with_measure(fig, png), metadata, *data[2:])
        return _with_measure(fig, data)
    formatter.mha_measured = True
    return formatter


def install(shell=None) -> bool:
    """Wrap ``shell``'s (default: the running IPython's) PNG formatter for figures; False outside IPython.

    The inline backend sets its formatter when its module is first imported (often at the first figure),
    replacing any earlier one: import it first, and re-wrap before each cell should ``%matplotlib``
    reset it.
    """
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return False
    import matplotlib

    if matplotlib.get_backend(auto_select=False) in ("inline", "module://matplotlib_inline.backend_inline"):
        import matplotlib_inline.backend_inline  # noqa: F401  (configures the inline formatters once)

    def wrap(*_):
        from matplotlib.figure import Figure

        png = shell.display_formatter.formatters["image/png"]
        try:
            current = png.lookup_by_type(Figure)
        except KeyError:
            return
        if not getattr(current, "mha_measured", False):
            png.for_type(Figure, _measured(current))

    wrap()
    if wrap.__qualname__ not in {getattr(f, "__qualname__", "") for f in shell.events.callbacks["pre_run_cell"]}:
        shell.events.register("pre_run_cell", wrap)
    return True


def load_ipython_extension(shell) -> None:
    """IPython extension entry point: ``make execute`` starts each chapter's kernel with
    ``--IPKernelApp.extensions=mha.course.pictures.png_text``, so the stored PNGs carry the chunk.
    A student's kernel never loads it: importing the figures installs nothing."""
    install(shell)
