"""Head viewer: one head's attention heatmap next to the average over all heads."""
from __future__ import annotations

import matplotlib.pyplot as plt

from ..figure_data.heads import EXAMPLE_SENTENCES, HEAD_DEFAULTS, head_weights
from ..figure_data.toy import PAD
from ..pictures.heatmap import plot_heatmap, plot_heads
from ._base import Explorer, View, show_static

__all__ = ["EXAMPLE_SENTENCES", "HEAD_DEFAULTS", "head_weights", "head_view", "head_view_all", "build_head_viewer",
           "head_viewer", "head_viewer_static"]


def _summary(tokens, w) -> str:
    """One line per query: the key it attends to most."""
    best = w.argmax(dim=-1)  # (L,)
    return "，".join(f"{q}→{tokens[j]} {w[i, j]:.2f}" for i, (q, j) in enumerate(zip(tokens, best.tolist())))


def head_view(sentence: str = EXAMPLE_SENTENCES[0], head: int = 1, d_model: int = 6, n_heads: int = 2) -> View:
    """Head ``head`` (1-based) next to the average over heads, with token labels."""
    tokens, weights = head_weights(sentence, d_model, n_heads)  # (h, L, L)
    if not 1 <= head <= n_heads:
        raise ValueError(f"head 必须在 1 到 {n_heads} 之间，现在是 {head}")
    w, mean = weights[head - 1], weights.mean(dim=0)  # (L, L), (L, L)
    fig, (left, right) = plt.subplots(2, 1, figsize=(4.6, 7.4))
    plot_heatmap(w, tokens, tokens, title=f"第 {head} 个头（共 {n_heads} 个）", ax=left, vmin=0.0, vmax=1.0)
    plot_heatmap(mean, tokens, tokens, title=f"{n_heads} 个头的平均", ax=right, vmin=0.0, vmax=1.0)
    fig.tight_layout()
    text = (f"句子：{sentence}（d_model = {d_model}, n_heads = {n_heads}, d_k = {d_model // n_heads}；"
            f"未训练、固定随机种子的层）\n"
            f"每个 query 最关注的 key（query→key 权重）：\n"
            f"第 {head} 个头：{_summary(tokens, w)}\n"
            f"平均：{_summary(tokens, mean)}")
    if PAD in tokens:
        text += "\nPAD 被 padding mask 遮住：它那一列的权重全是 0。"
    return View(text=text, figure=fig, data={"tokens": tokens, "weights": weights, "head": head})


def head_view_all(sentence: str = EXAMPLE_SENTENCES[0], d_model: int = 6, n_heads: int = 2) -> View:
    """Every head plus the average in one row (``mha.course.pictures.plot_heads``): the static picture."""
    tokens, weights = head_weights(sentence, d_model, n_heads)  # (h, L, L)
    fig = plot_heads(weights, tokens, include_mean=True, annotate=False)  # 3 panels: numbers would crowd; printed above
    lines = [f"句子：{sentence}（d_model = {d_model}, n_heads = {n_heads}, d_k = {d_model // n_heads}）",
             "每个 query 最关注的 key（query→key 权重）："]
    lines += [f"第 {i + 1} 个头：{_summary(tokens, weights[i])}" for i in range(n_heads)]
    lines.append(f"平均：{_summary(tokens, weights.mean(dim=0))}")
    return View(text="\n".join(lines), figure=fig, data={"tokens": tokens, "weights": weights})


def build_head_viewer(sentences=EXAMPLE_SENTENCES, d_model: int = 6, n_heads: int = 2) -> Explorer:
    """The widget: a sentence menu and one button per head above the two heatmaps."""
    import ipywidgets as widgets

    controls = {
        "sentence": widgets.Dropdown(options=list(sentences), value=sentences[0], description="句子"),
        "head": widgets.ToggleButtons(options=[(f"头 {i}", i) for i in range(1, n_heads + 1)], value=1,
                                      description="头"),
    }

    def render(sentence, head):
        return head_view(sentence, head, d_model, n_heads)

    return Explorer(render, controls, rows=[["sentence"], ["head"]],
                    title="<b>看每个头</b>：选一句话和一个头，左边是这个头的注意力，右边是所有头的平均")


def head_viewer(sentences=EXAMPLE_SENTENCES, d_model: int = 6, n_heads: int = 2) -> None:
    """Display the head viewer (needs a running kernel: Colab, Jupyter)."""
    from IPython.display import display

    display(build_head_viewer(sentences, d_model, n_heads).widget)


def head_viewer_static(sentence: str = EXAMPLE_SENTENCES[0], d_model: int = 6, n_heads: int = 2):
    """The default sentence, every head and the average: prints the summary, returns the figure."""
    return show_static(head_view_all(sentence, d_model, n_heads))
