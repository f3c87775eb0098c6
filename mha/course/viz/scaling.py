"""Why attention divides by sqrt(d_k): dot-product variance and softmax saturation against d_k."""
from __future__ import annotations

import matplotlib.pyplot as plt

from ._style import head_color


def plot_scaling(d_ks, var_raw, var_scaled, max_raw, max_scaled, grad_raw, grad_scaled):
    """Three panels against d_k (log axis): variance of q.k, mean largest softmax weight, softmax gradient size.

    Args:
        d_ks: the head widths d_k measured.
        var_raw, var_scaled: variance of ``q . k`` and of ``q . k / sqrt(d_k)``.
        max_raw, max_scaled: mean of the largest softmax weight in a row.
        grad_raw, grad_scaled: mean norm of the softmax Jacobian of a row.

    Returns:
        The matplotlib ``Figure``.
    """
    series = [len(s) for s in (var_raw, var_scaled, max_raw, max_scaled, grad_raw, grad_scaled)]
    if any(n != len(d_ks) for n in series):
        raise ValueError(f"every series needs one value per d_k ({len(d_ks)}), got lengths {series}")
    raw_style = dict(color=head_color(3), marker="o", label=r"$q \cdot k$")
    scaled_style = dict(color=head_color(0), marker="s", label=r"$q \cdot k / \sqrt{d_k}$")
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    panels = [
        (var_raw, var_scaled, "variance of the score", True),
        (max_raw, max_scaled, "largest softmax weight (mean)", False),
        (grad_raw, grad_scaled, "softmax gradient size (mean)", False),
    ]
    for ax, (raw, scaled, title, log_y) in zip(axes, panels):
        ax.plot(d_ks, raw, **raw_style)
        ax.plot(d_ks, scaled, **scaled_style)
        ax.set_xscale("log", base=2)
        if log_y:
            ax.set_yscale("log", base=2)
        ax.set_xticks(list(d_ks))
        ax.set_xticklabels([str(d) for d in d_ks])
        ax.set_xlabel("$d_k$")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    return fig
