"""Figures the chapters share, drawn with matplotlib.

All text in figures is ASCII or mathtext (Q, K, V, W^O, d_k, token labels),
so the default DejaVu Sans font renders every glyph on the website, locally
and in Colab, where no CJK font is installed. The Chinese explanation lives
in the surrounding prose and in each figure's caption/alt text.

The exception is chapter 13 (:mod:`mha.viz.numerals`, :mod:`mha.viz.transformer`):
its token labels are Chinese characters, drawn with the font subset that the
package ships in ``mha/course/data/fonts`` (:func:`mha.viz.cjk.cjk_font`), so they
render without a system CJK font.
"""
from .flow import plot_flow
from .heatmap import plot_heatmap, plot_heads
from .heads import plot_head_split
from .masks import plot_mask

__all__ = ["plot_flow", "plot_heatmap", "plot_heads", "plot_head_split", "plot_mask"]

# Chapter 13: the whole Transformer and the numeral model's attention maps, Chinese labels
from .cjk import cjk_font  # noqa: E402
from .numerals import plot_block_heads, plot_head_panels, plot_head_table, plot_loss  # noqa: E402
from .transformer import plot_transformer  # noqa: E402

__all__ += ["cjk_font", "plot_block_heads", "plot_head_panels", "plot_head_table", "plot_loss", "plot_transformer"]
