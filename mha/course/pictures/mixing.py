"""How strongly each output dimension depends on each head, with and without the final Linear W^O."""
from __future__ import annotations

import matplotlib.pyplot as plt

from .style import CMAP, to_numpy
from .heatmap import head_title


def plot_head_dependency(without_w_o, with_w_o, titles=("只有 Concat（没有 Wᴼ）", "Concat 之后再乘 Wᴼ"), cbar_label=None):
    """Two (h, d_model) maps: entry (i, j) = size of d output_j / d head_i for one token; 0 is the darkest colour.

    Args:
        without_w_o: (h, d_model) dependency of the Concat result on each head.
        with_w_o: (h, d_model) dependency of ``Concat W^O`` on each head.
        titles: the two panels' titles.
        cbar_label: the colour bars' label (none by default).

    Returns:
        The matplotlib ``Figure``.
    """
    a, b = to_numpy(without_w_o), to_numpy(with_w_o)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"need two (h, d_model) matrices of the same shape, got {a.shape} and {b.shape}")
    h, d_model = a.shape
    d_k = d_model // h
    fig, axes = plt.subplots(2, 1, figsize=(5.4, 5.6))
    for ax, m, title in zip(axes, (a, b), titles):
        im = ax.imshow(m, aspect="auto", cmap=CMAP, interpolation="nearest", vmin=0.0)  # dark = no dependency
        ax.set_yticks(range(h))
        ax.set_yticklabels([head_title(i) for i in range(h)], fontsize=10)
        ticks = [i * d_k for i in range(0, h, max(1, h // 4))]
        ax.set_xticks(ticks)
        ax.set_xlabel("输出的维度")
        ax.set_title(title)
        bar = fig.colorbar(im, ax=ax, fraction=0.05, pad=0.02)
        if cbar_label:
            bar.set_label(cbar_label)
    fig.tight_layout()
    return fig
