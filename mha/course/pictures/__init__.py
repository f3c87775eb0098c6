"""Figures the chapters share, drawn with matplotlib.

Figures speak Chinese: importing this package makes matplotlib fall back from
DejaVu Sans to the font subset shipped in ``mha/course/data/fonts``
(:func:`mha.course.pictures.cjk.use_cjk_fallback`), so Chinese labels render on the website,
locally and in Colab, where no CJK font is installed. Tensor names and formulas
stay symbols (mathtext or Unicode such as Wᴼ). A text mixing Chinese and ``$...$``
cannot render (mathtext has no fallback): write such labels in two texts or with
Unicode symbols. Figures are sized for a 390 px phone: ``mha.course.pictures.style.smallest_text_px``
measures the smallest text in CSS px (tests/course/test_figure_text.py wants >= 9). Importing this
package installs nothing in the kernel: ``make execute`` loads the IPython extension
:mod:`mha.course.pictures.png_text` in the kernels it starts, so the PNGs the chapters store carry their
smallest text size, which tests/browser/test_browser_figures.py reads on the website's phone view.
"""
from .blocks import plot_attention_blocks
from .flow import plot_flow
from .heatmap import plot_heatmap, plot_heads
from .heads import plot_concat, plot_head_split
from .masks import plot_mask
from .matrices import plot_head_matrices

__all__ = ["plot_attention_blocks", "plot_concat", "plot_flow", "plot_heatmap", "plot_heads", "plot_head_matrices", "plot_head_split", "plot_mask"]

# Chapter 13: the whole Transformer and the numeral model's attention maps, Chinese labels
from .cjk import cjk_font  # noqa: E402
from .numerals import plot_block_heads, plot_head_panels, plot_head_table, plot_loss  # noqa: E402
from .transformer import plot_transformer  # noqa: E402

__all__ += ["cjk_font", "plot_block_heads", "plot_head_panels", "plot_head_table", "plot_loss", "plot_transformer"]
