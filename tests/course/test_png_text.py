"""The PNG a chapter stores carries its smallest text size (mha.course.pictures.png_text), read back by the browser tests."""
import base64
import io
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from IPython.core.events import EventManager, available_events  # noqa: E402
from IPython.core.formatters import DisplayFormatter  # noqa: E402
from IPython.core.pylabtools import print_figure, select_figure_formats  # noqa: E402
from PIL import Image  # noqa: E402

from mha.course.pictures import png_text  # noqa: E402


def _figure(title_pt=8, text=True):
    fig, ax = plt.subplots(figsize=(3, 2))
    if text:
        ax.set_title("第 1 个头", fontsize=title_pt)
        ax.tick_params(labelsize=12)
    else:
        ax.axis("off")
        ax.plot([0, 1])
    return fig


class _Shell:
    """What the formatter hook touches of an IPython shell (a real one would install global hooks)."""

    def __init__(self):
        self.display_formatter = DisplayFormatter()
        self.events = EventManager(self, available_events)


@pytest.fixture
def shell():
    sh = _Shell()
    select_figure_formats(sh, {"png"})  # what the inline backend does
    return sh


def _stored(sh, fig) -> bytes:
    return base64.b64decode(sh.display_formatter.format(fig)[0]["image/png"])


def test_the_stored_png_carries_the_smallest_text_in_image_px_and_is_otherwise_unchanged(shell):
    assert png_text.install(shell)
    fig = _figure(title_pt=8)
    stored = _stored(shell, fig)
    image = Image.open(io.BytesIO(stored))
    assert float(image.text[png_text.KEY]) == pytest.approx(8 * 200 / 72, abs=0.02)  # 8 pt at 2 x 100 dpi
    plain = print_figure(fig, fmt="retina")
    small = Image.open(io.BytesIO(png_text.compact(plain)))
    assert image.tobytes() == small.tobytes() and image.getpalette() == small.getpalette()  # same pixels
    assert image.text == {**Image.open(io.BytesIO(plain)).text, png_text.KEY: image.text[png_text.KEY]}
    assert _stored(shell, fig) == stored  # deterministic
    plt.close(fig)


def test_the_stored_png_has_twice_the_pixels_and_the_page_shows_it_at_1x_width(shell):
    png_text.install(shell)
    fig = _figure(title_pt=8)
    data, metadata = shell.display_formatter.format(fig)
    one_x = Image.open(io.BytesIO(print_figure(fig, fmt="png"))).size
    stored = Image.open(io.BytesIO(base64.b64decode(data["image/png"]))).size
    plt.close(fig)
    assert abs(stored[0] / one_x[0] - 2) < 0.03, (stored, one_x)  # (the tight box rounds at each dpi)
    # the display width in CSS px is the 1x width, and no height (a narrow column scales the image)
    assert metadata["image/png"] == {"width": stored[0] // 2}


def test_a_figure_without_text_says_so_and_a_retina_png_counts_its_own_dpi(shell):
    png_text.install(shell)
    fig = _figure(text=False)
    assert Image.open(io.BytesIO(_stored(shell, fig))).text[png_text.KEY] == png_text.NO_TEXT
    plt.close(fig)
    select_figure_formats(shell, {"retina"})  # a reader's %config InlineBackend.figure_format = "retina"
    shell.events.trigger("pre_run_cell", None)  # the next cell re-wraps the new formatter
    fig = _figure(title_pt=8)
    assert float(Image.open(io.BytesIO(_stored(shell, fig))).text[png_text.KEY]) == pytest.approx(8 * 200 / 72, abs=0.02)
    plt.close(fig)


def test_a_figure_is_stored_with_a_palette_when_nearly_lossless_and_smaller():
    import numpy as np

    fig = _figure(title_pt=8)
    fig.axes[0].imshow(np.arange(16).reshape(4, 4), cmap="viridis")  # flat cells, text, anti-aliased edges
    plain = print_figure(fig, fmt="retina")
    plt.close(fig)
    small = png_text.compact(plain)
    a, b = (np.asarray(Image.open(io.BytesIO(x)).convert("RGB"), dtype=np.int16) for x in (plain, small))
    assert Image.open(io.BytesIO(small)).mode == "P" and len(small) < 0.6 * len(plain), (len(small), len(plain))
    assert np.abs(a - b).mean() <= png_text.PALETTE_MEAN_DIFF and png_text.png_dpi(small) == pytest.approx(200, abs=0.01)
    # smooth shading (65,536 colours) would lose too much in 256: kept as it is
    ramp = np.stack([*np.meshgrid(np.arange(256), np.arange(256)), np.full((256, 256), 128)], -1).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(ramp).save(buf, format="PNG")
    assert png_text.compact(buf.getvalue()) == buf.getvalue()


def test_installing_twice_wraps_once_and_outside_ipython_does_nothing(shell):
    png_text.install(shell)
    png_text.install(shell)
    fig = _figure()
    assert _stored(shell, fig).count(png_text.KEY.encode()) == 1
    plt.close(fig)
    assert png_text.install(object()) is False


def test_the_chunk_is_replaced_not_repeated_and_bad_bytes_are_refused():
    fig = _figure()
    plain = print_figure(fig, fmt="png")
    plt.close(fig)
    twice = png_text.with_text_chunk(png_text.with_text_chunk(plain, png_text.KEY, "1.00"), png_text.KEY, "2.00")
    assert Image.open(io.BytesIO(twice)).text[png_text.KEY] == "2.00" and twice.count(png_text.KEY.encode()) == 1
    assert png_text.png_dpi(plain) == pytest.approx(100, abs=0.01)
    with pytest.raises(ValueError, match="PNG"):
        png_text.with_text_chunk(b"GIF89a", png_text.KEY, "1")


def test_the_landing_svg_carries_its_smallest_text_in_css_px():
    fig = _figure(title_pt=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    svg = png_text.svg_with_text_size(buf.getvalue(), fig)
    plt.close(fig)
    assert b'<svg data-mha-smallest-text-px="10.67" ' in svg  # 8 pt = 8 * 96 / 72 CSS px at natural size
    with pytest.raises(ValueError, match="SVG"):
        png_text.svg_with_text_size(b"<html></html>", fig)


def test_importing_the_figures_installs_nothing_and_the_extension_does():
    """A student's kernel gets no hook; ``make execute``'s kernels load the extension (see the Makefile)."""
    code = "\n".join([
        "from IPython.core.interactiveshell import InteractiveShell",
        "from matplotlib.figure import Figure",
        "from IPython.core.pylabtools import select_figure_formats",
        "shell = InteractiveShell.instance()",
        "select_figure_formats(shell, {'png'})",
        "import mha.course.pictures",
        "measured = lambda: getattr(shell.display_formatter.formatters['image/png'].lookup_by_type(Figure), 'mha_measured', False)",
        "print(measured(), len(shell.events.callbacks['pre_run_cell']))",
        "shell.extension_manager.load_extension('mha.course.pictures.png_text')",
        "print(measured(), len(shell.events.callbacks['pre_run_cell']))",
    ])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "False" and out[2] == "True", out
    assert int(out[3]) == int(out[1]) + 1, out
