"""Figures the chapters share, drawn with matplotlib.

All text in figures is ASCII or mathtext (Q, K, V, W^O, d_k, token labels),
so the default DejaVu Sans font renders every glyph on the website, locally
and in Colab, where no CJK font is installed. The Chinese explanation lives
in the surrounding prose and in each figure's caption/alt text.
"""
from .flow import plot_flow
from .heatmap import plot_heatmap, plot_heads
from .heads import plot_head_split
from .masks import plot_mask

__all__ = ["plot_flow", "plot_heatmap", "plot_heads", "plot_head_split", "plot_mask"]
