"""Why divide by sqrt(d_k): the spread of the scores and how peaked the softmax gets."""
from __future__ import annotations

import math

import matplotlib.pyplot as plt

from ..figure_data.scaling import D_K_CHOICES, N_KEYS, N_PAIRS, N_QUERIES, score_stats  # noqa: F401 (N_PAIRS: re-exported)
from ._base import Explorer, View, show_static

__all__ = ["D_K_CHOICES", "score_stats", "scaling_view", "scaling_compare_view", "build_scaling_explorer", "scaling_explorer",
           "scaling_explorer_static"]


def _draw(stats: dict, hist_ax, bar_ax) -> None:
    """Histogram of the scores (x range fixed by d_k) and a bar chart of one softmax row."""
    d_k = stats["d_k"]
    label = "q·k / √dₖ" if stats["scaled"] else "q·k（不缩放）"
    width = 4 * math.sqrt(d_k) + 1  # same x range with and without scaling: the shrink is visible
    hist_ax.hist(stats["pair_scores"].numpy(), bins=60, range=(-width, width), color="#4c72b0")
    hist_ax.set_xlim(-width, width)
    hist_ax.set_title(f"{label}，dₖ = {d_k}：标准差 {stats['std']:.2f}")
    hist_ax.set_xlabel("分数")
    hist_ax.set_ylabel("个数")
    row = stats["row"].numpy()
    bar_ax.bar(range(len(row)), row, color="#dd8452")
    bar_ax.set_ylim(0, 1)
    bar_ax.set_xticks(range(len(row)))
    bar_ax.set_xlabel("Key")
    bar_ax.set_ylabel("注意力权重")
    bar_ax.set_title(f"softmax 的一行：最大 {stats['max_weight']:.2f}，"
                     f"熵 {stats['entropy']:.2f}（均匀时 {stats['uniform_entropy']:.2f}）")


def _text(stats: dict) -> str:
    d_k, std = stats["d_k"], stats["std"]
    how = "除以 √d_k" if stats["scaled"] else "不缩放"
    target = "≈ 1" if stats["scaled"] else f"≈ √{d_k} = {math.sqrt(d_k):.2f}"
    return (f"d_k = {d_k}，{how}：scores 的标准差 = {std:.2f}（{target}）\n"
            f"  softmax 的一行（{N_KEYS} 个 key）：最大权重 {stats['max_weight']:.2f}，熵 {stats['entropy']:.2f}\n"
            f"  {N_QUERIES} 行平均：最大权重 {stats['mean_max_weight']:.2f}，熵 {stats['mean_entropy']:.2f}"
            f"（完全均匀时：{1 / N_KEYS:.3f} 和 ln {N_KEYS} = {stats['uniform_entropy']:.2f}）")


def scaling_view(d_k: int = 64, scaled: bool = True) -> View:
    """One setting: histogram of the scores and one softmax row, plus the numbers in Chinese."""
    stats = score_stats(d_k, scaled)
    fig, (hist_ax, bar_ax) = plt.subplots(2, 1, figsize=(5.4, 6.2))
    _draw(stats, hist_ax, bar_ax)
    fig.tight_layout()
    return View(text=_text(stats), figure=fig, data=stats)


def scaling_compare_view(d_k: int = 64) -> View:
    """Both settings for one d_k, not scaled (top) and scaled (bottom): the static picture."""
    both = [score_stats(d_k, scaled=False), score_stats(d_k, scaled=True)]
    fig, axes = plt.subplots(4, 1, figsize=(5.4, 11.6))
    for stats, (hist_ax, bar_ax) in zip(both, axes.reshape(2, 2)):
        _draw(stats, hist_ax, bar_ax)
    fig.tight_layout()
    return View(text="\n".join(_text(s) for s in both), figure=fig, data={"unscaled": both[0], "scaled": both[1]})


def build_scaling_explorer(d_k: int = 64, scaled: bool = True) -> Explorer:
    """The widget: a d_k menu and a scaling checkbox above the histogram and the softmax row."""
    import ipywidgets as widgets

    controls = {
        "d_k": widgets.Dropdown(options=D_K_CHOICES, value=d_k, description="d_k"),
        "scaled": widgets.Checkbox(value=scaled, description="除以 √d_k"),
    }
    return Explorer(scaling_view, controls,
                    title="<b>√d_k 与 softmax</b>：d_k 越大，不缩放的分数越分散，softmax 越尖")


def scaling_explorer(d_k: int = 64, scaled: bool = True) -> None:
    """Display the sqrt(d_k) explorer (needs a running kernel: Colab, Jupyter)."""
    from IPython.display import display

    display(build_scaling_explorer(d_k, scaled).widget)


def scaling_explorer_static(d_k: int = 64):
    """Not scaled vs scaled for the default d_k: prints the numbers, returns the figure."""
    return show_static(scaling_compare_view(d_k))
