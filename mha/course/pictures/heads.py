"""Which numbers of a token vector belong to which head: split (and the wrong reshape), and Concat."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.colors import to_rgb
from matplotlib.patches import Rectangle

from .style import head_color

__all__ = ["plot_head_split", "plot_concat", "split_layout"]


def _shade(head: int, token: int, n_tokens: int):
    """Head colour (hue) made lighter for later tokens, so the rows stay told apart."""
    r, g, b = to_rgb(head_color(head))
    t = 0.55 * token / max(1, n_tokens - 1)
    return (r + (1 - r) * t, g + (1 - g) * t, b + (1 - b) * t)


def split_layout(n_heads: int, n_tokens: int, transpose: bool = True):
    """(head, token) of the d_k numbers in row r of head block i after the split, for every i, r.

    ``transpose=True`` is ``view(B, L, h, d_k).transpose(1, 2)``: row r of block i is token r's piece i.
    ``transpose=False`` is the bug ``reshape(B, h, L, d_k)``: block i takes the next L pieces of memory,
    which are the pieces of tokens ``(i L + r) // h``.
    """
    if transpose:
        return [[(i, r) for r in range(n_tokens)] for i in range(n_heads)]
    return [[((i * n_tokens + r) % n_heads, (i * n_tokens + r) // n_heads) for r in range(n_tokens)]
            for i in range(n_heads)]


def _sizes(n_heads, d_model, n_tokens, tokens):
    """d_k and the token labels (t1 .. tL unless given), after checking them."""
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
    d_k = d_model // n_heads
    tokens = list(tokens) if tokens is not None else [f"t{i + 1}" for i in range(n_tokens)]
    if len(tokens) != n_tokens:
        raise ValueError(f"need {n_tokens} token labels, got {len(tokens)}")
    return d_k, tokens


def _matrix(ax, n_heads, n_tokens, tokens, d_k, y0):
    for r in range(n_tokens):
        for hd in range(n_heads):
            ax.add_patch(Rectangle((hd, y0 + n_tokens - 1 - r), 1, 1, facecolor=_shade(hd, r, n_tokens),
                                   edgecolor="white", lw=1.5))
            ax.text(hd + 0.5, y0 + n_tokens - 0.5 - r, f"{r + 1}", ha="center", va="center", fontsize=11)
        ax.text(-0.15, y0 + n_tokens - 0.5 - r, f"{r + 1} {tokens[r]}", ha="right", va="center", fontsize=11)
    for hd in range(n_heads):
        ax.text(hd + 0.5, y0 - 0.35, f"{hd + 1}", ha="center", va="center", fontsize=11, color=head_color(hd))
    ax.text(-0.15, y0 - 0.35, "头", ha="right", va="center", fontsize=11)


def _blocks(ax, layout, n_tokens, y0, x_step):
    for i, rows in enumerate(layout):
        x0 = i * x_step
        for r, (hd, tok) in enumerate(rows):
            ax.add_patch(Rectangle((x0, y0 + n_tokens - 1 - r), 1, 1, facecolor=_shade(hd, tok, n_tokens),
                                   edgecolor="white", lw=1.5))
            ax.text(x0 + 0.5, y0 + n_tokens - 0.5 - r, f"{tok + 1}", ha="center", va="center", fontsize=11)
        ax.text(x0 + 0.5, y0 + n_tokens + 0.3, f"头{i + 1}", ha="center", va="center", fontsize=11,
                color=head_color(i))


def plot_head_split(n_heads: int = 8, d_model: int = 512, n_tokens: int = 4, tokens=None, wrong: bool = False):
    """Draw (L, d_model) -> (h, L, d_k): head i owns columns [(i-1) d_k, i d_k) of every token.

    Top: the projected (L, d_model) matrix of one sentence; a column strip per head (its colour),
    rows shaded by token and numbered 1..L (the token labels sit on the left). Middle: view + transpose, one (L, d_k) block per head holding every token.
    Bottom (``wrong=True``): a plain reshape to (h, L, d_k), whose blocks take the next L pieces of memory
    (one token's pieces when L <= h, pieces of several tokens otherwise).

    Returns:
        The matplotlib ``Figure``.
    """
    d_k, tokens = _sizes(n_heads, d_model, n_tokens, tokens)
    x_step = 1.25
    width = max(n_heads, n_heads * x_step)
    parts = 3 if wrong else 2
    fig, ax = plt.subplots(figsize=(5.4, 0.8 + parts * (0.36 * n_tokens + 0.9)))
    gap = n_tokens + 2.0
    top = (parts - 1) * gap
    _matrix(ax, n_heads, n_tokens, tokens, d_k, top)
    ax.text(width / 2, top + n_tokens + 0.45, f"投影后的一句话 (L, d_model) = ({n_tokens}, {d_model})：每一块是一个头的 {d_k} 列",
            ha="center", fontsize=10.5)
    _blocks(ax, split_layout(n_heads, n_tokens), n_tokens, top - gap, x_step)
    ax.text(width / 2, top - gap + n_tokens + 0.85, f"view + transpose → (h, L, d_k) = ({n_heads}, {n_tokens}, {d_k})："
            "每个头拿到每个 token", ha="center", fontsize=10.5)
    if wrong:
        _blocks(ax, split_layout(n_heads, n_tokens, transpose=False), n_tokens, top - 2 * gap, x_step)
        ax.text(width / 2, top - 2 * gap + n_tokens + 0.85, f"直接 reshape（错误）：每个头拿到的不是每个 token 的那 {d_k} 列",
                ha="center", fontsize=10.5, color="#c0392b")
    ax.set_xlim(-0.2 - 0.22 * max(len(t) + 2 for t in tokens), width + 0.2)
    ax.set_ylim(top - (parts - 1) * gap - 0.2, top + n_tokens + 0.9)
    ax.axis("off")
    fig.tight_layout()
    return fig


def plot_concat(n_heads: int = 8, d_model: int = 512, n_tokens: int = 4, tokens=None):
    """The split read backwards: (h, L, d_k) blocks -> transpose -> (L, h d_k), row t = [head_1[t] | ... | head_h[t]];
    the coloured numbers under the bottom matrix are the heads.

    Returns:
        The matplotlib ``Figure``.
    """
    d_k, tokens = _sizes(n_heads, d_model, n_tokens, tokens)
    x_step = 1.25
    width = n_heads * x_step
    fig, ax = plt.subplots(figsize=(5.4, 0.8 + 2 * (0.36 * n_tokens + 0.9)))
    gap = n_tokens + 2.0
    _blocks(ax, split_layout(n_heads, n_tokens), n_tokens, gap, x_step)
    ax.text(width / 2, gap + n_tokens + 0.85, f"{n_heads} 个头的输出：(h, L, d_k) = ({n_heads}, {n_tokens}, {d_k})",
            ha="center", fontsize=10.5)
    _matrix(ax, n_heads, n_tokens, tokens, d_k, 0)
    ax.text(width / 2, n_tokens + 0.45, f"transpose → contiguous → view：(L, h·d_k) = ({n_tokens}, {d_model})",
            ha="center", fontsize=10.5)
    ax.set_xlim(-0.2 - 0.22 * max(len(t) + 2 for t in tokens), width + 0.2)
    ax.set_ylim(-0.7, gap + n_tokens + 1.1)
    ax.axis("off")
    fig.tight_layout()
    return fig
