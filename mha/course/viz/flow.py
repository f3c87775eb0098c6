"""The lecture's flow of six steps, each box annotated with its shape."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch


def flow_shapes(B: int = 2, L: int = 4, d_model: int = 512, n_heads: int = 8):
    """The six steps with the shape after each, as (label, shape string) pairs."""
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
    d_k = d_model // n_heads
    return [
        ("1. Q, K, V", f"({B}, {L}, {d_model})"),
        ("2. Linear\n$W^Q, W^K, W^V$", f"({B}, {L}, {d_model})"),
        ("3. split heads", f"({B}, {n_heads}, {L}, {d_k})"),
        ("4. attention\nper head", f"({B}, {n_heads}, {L}, {d_k})"),
        ("5. Concat", f"({B}, {L}, {n_heads}x{d_k}={d_model})"),
        ("6. Linear $W^O$", f"({B}, {L}, {d_model})"),
    ]


def plot_flow(B: int = 2, L: int = 4, d_model: int = 512, n_heads: int = 8, ax=None):
    """Draw Q, K, V -> Linear -> split -> attention -> Concat -> Linear, with shapes.

    Returns:
        The matplotlib ``Axes``.
    """
    steps = flow_shapes(B, L, d_model, n_heads)
    if ax is None:
        _, ax = plt.subplots(figsize=(13, 2.4))
    colors = ["#e8f1fb", "#fde9d9", "#fff2cc", "#e2f0d9", "#ede2f6", "#fde9d9"]
    w, gap = 1.9, 0.35
    for i, ((label, shape), color) in enumerate(zip(steps, colors)):
        x = i * (w + gap)
        ax.add_patch(FancyBboxPatch((x, 0), w, 1, boxstyle="round,pad=0.04", facecolor=color, edgecolor="#555555"))
        ax.text(x + w / 2, 0.66, label, ha="center", va="center", fontsize=9, weight="bold")
        ax.text(x + w / 2, 0.22, shape, ha="center", va="center", fontsize=9, family="monospace")
        if i < len(steps) - 1:
            ax.annotate("", xy=(x + w + gap - 0.03, 0.5), xytext=(x + w + 0.05, 0.5),
                        arrowprops={"arrowstyle": "->", "color": "#555555"})
    ax.set_xlim(-0.1, len(steps) * (w + gap))
    ax.set_ylim(-0.15, 1.15)
    ax.axis("off")
    ax.set_title(f"multi-head attention: B={B}, L={L}, d_model={d_model}, h={n_heads}, d_k={d_model // n_heads}")
    return ax
