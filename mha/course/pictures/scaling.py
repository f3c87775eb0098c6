"""Why attention divides by sqrt(d_k): dot-product variance and softmax saturation against d_k."""
from __future__ import annotations

import matplotlib.pyplot as plt

from .style import head_color


def plot_scaling(d_ks, var_raw, var_scaled, max_raw, max_scaled, grad_raw=None, grad_scaled=None):
    """Panels against d_k (log axis), stacked for a phone: variance of q.k, mean largest softmax weight
    and, when given, the softmax gradient size.

    Args:
        d_ks: the head widths d_k measured.
        var_raw, var_scaled: variance of ``q . k`` and of ``q . k / sqrt(d_k)``.
        max_raw, max_scaled: mean of the largest softmax weight in a row.
        grad_raw, grad_scaled: mean norm of the softmax Jacobian of a row (optional, both or neither).

    Returns:
        The matplotlib ``Figure``.
    """
    if (grad_raw is None) != (grad_scaled is None):
        raise ValueError("give both grad_raw and grad_scaled, or neither")
    series = [var_raw, var_scaled, max_raw, max_scaled] + ([grad_raw, grad_scaled] if grad_raw is not None else [])
    lengths = [len(s) for s in series]
    if any(n != len(d_ks) for n in lengths):
        raise ValueError(f"every series needs one value per d_k ({len(d_ks)}), got lengths {lengths}")
    raw_style = dict(color=head_color(3), marker="o", label=r"$q \cdot k$")
    scaled_style = dict(color=head_color(0), marker="s", label=r"$q \cdot k / \sqrt{d_k}$")
    panels = [
        (var_raw, var_scaled, "分数的方差", True),
        (max_raw, max_scaled, "softmax 最大权重（平均）", False),
    ]
    if grad_raw is not None:
        panels.append((grad_raw, grad_scaled, "softmax 梯度的大小（平均）", False))
    fig, axes = plt.subplots(len(panels), 1, figsize=(5.4, 2.5 * len(panels) + 0.3), sharex=True)
    for ax, (raw, scaled, title, log_y) in zip(axes, panels):
        ax.plot(d_ks, raw, **raw_style)
        ax.plot(d_ks, scaled, **scaled_style)
        ax.set_xscale("log", base=2)
        if log_y:
            ax.set_yscale("log", base=2)
        ax.set_xticks(list(d_ks))
        ax.set_xticklabels([str(d) for d in d_ks])
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("$d_k$")
    axes[0].legend()
    fig.tight_layout()
    return fig
