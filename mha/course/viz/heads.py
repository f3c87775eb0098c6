"""Which numbers of a token vector belong to which head."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from ._style import head_color


def plot_head_split(n_heads: int = 8, d_model: int = 512, n_tokens: int = 4, tokens=None):
    """Draw (L, d_model) -> (h, L, d_k): head i owns columns [i*d_k, (i+1)*d_k) of every token.

    Left: the projected matrix of one sequence, columns coloured by head.
    Right: the same numbers regrouped into one (L, d_k) block per head.

    Returns:
        The matplotlib ``Figure``.
    """
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
    d_k = d_model // n_heads
    tokens = tokens or [f"t{i + 1}" for i in range(n_tokens)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.4), gridspec_kw={"width_ratios": [1.1, 1]})
    for r in range(n_tokens):
        for hd in range(n_heads):
            left.add_patch(Rectangle((hd, n_tokens - 1 - r), 1, 1, facecolor=head_color(hd), edgecolor="white", lw=1.5))
    left.set_xlim(0, n_heads)
    left.set_ylim(0, n_tokens)
    left.set_xticks([hd + 0.5 for hd in range(n_heads)])
    left.set_xticklabels([f"{hd * d_k}:{(hd + 1) * d_k}" for hd in range(n_heads)], rotation=45, fontsize=8)
    left.set_yticks([n_tokens - 1 - r + 0.5 for r in range(n_tokens)])
    left.set_yticklabels(tokens)
    left.set_title(f"(L, d_model) = ({n_tokens}, {d_model}): columns by head")
    gap = 0.4
    for hd in range(n_heads):
        x0 = hd * (1 + gap)
        for r in range(n_tokens):
            right.add_patch(Rectangle((x0, n_tokens - 1 - r), 1, 1, facecolor=head_color(hd), edgecolor="white", lw=1.5))
        right.text(x0 + 0.5, n_tokens + 0.15, f"head {hd + 1}", ha="center", fontsize=8)
    right.set_xlim(-gap, n_heads * (1 + gap))
    right.set_ylim(0, n_tokens + 0.6)
    right.axis("off")
    right.set_title(f"(h, L, d_k) = ({n_heads}, {n_tokens}, {d_k}): one block per head")
    fig.tight_layout()
    return fig
