"""Interactive sqrt(d_k) figure: pick d_k and whether to scale; see the scores' spread and one softmax row.

Every state (each d_k of :data:`~mha.course.figure_data.scaling.D_K_CHOICES`, scaled or not) is
computed here by :func:`mha.course.figure_data.scaling.score_stats`, the same function the live ipywidgets explorer calls.
"""
from __future__ import annotations

import math

import altair as alt
import numpy as np

from ..figure_data.scaling import D_K_CHOICES, N_KEYS, score_stats
from ._figure import InteractiveFigure, base_config, rounded

__all__ = ["SCALING_BINS", "scaling_states", "scaling_figure"]

SCALING_BINS = 40  # histogram bars per state
WIDTH = 290


def _hist_range(d_k: int) -> float:
    """The histogram's half-width: the same for scaled and unscaled scores, so the shrink is visible."""
    return 4 * math.sqrt(d_k) + 1


def scaling_states(d_k_choices=D_K_CHOICES) -> list[dict]:
    """One row per (d_k, scaled): histogram counts, one softmax row and the numbers behind them."""
    rows = []
    for d_k in d_k_choices:
        for scaled in (False, True):
            stats = score_stats(d_k, scaled)
            half = _hist_range(d_k)
            counts, edges = np.histogram(stats["pair_scores"].numpy(), bins=SCALING_BINS, range=(-half, half))
            how = "除以 √d_k" if scaled else "不缩放"
            rows.append({
                "d_k": d_k, "scaled": scaled,
                "lo": rounded(edges[:-1]), "count": counts.tolist(), "width": rounded(edges[1] - edges[0]),
                "weight": rounded(stats["row"]),
                "std": rounded(stats["std"]), "max_weight": rounded(stats["max_weight"]),
                "entropy": rounded(stats["entropy"]),
                "caption": (f"d_k = {d_k}，{how}\n分数的标准差 {stats['std']:.2f}"
                            f"（{'≈ 1' if scaled else f'≈ √{d_k} = {math.sqrt(d_k):.2f}'}）"),
                "row_caption": (f"一行 softmax（{N_KEYS} 个 key）\n最大权重 {stats['max_weight']:.2f}，"
                                f"熵 {stats['entropy']:.2f}（均匀时 {stats['uniform_entropy']:.2f}）"),
            })
    return rows


def _caption(state, field: str):
    """Two lines of precomputed text above a panel."""
    return state.mark_text(align="left", baseline="bottom", fontSize=12, lineBreak="\n", dy=-6).encode(
        text=f"{field}:N", x=alt.value(0), y=alt.value(-18))


def scaling_figure(d_k: int = 64, scaled: bool = False, d_k_choices=D_K_CHOICES) -> InteractiveFigure:
    """The figure: a d_k drop-down and a scaling check box above a histogram and a bar chart."""
    rows = scaling_states(d_k_choices)
    data = alt.InlineData(values=rows, name="scaling_states")
    p_dk = alt.param(name="d_k", value=d_k, bind=alt.binding_select(options=list(d_k_choices), name="d_k "))
    p_scaled = alt.param(name="scaled", value=scaled, bind=alt.binding_checkbox(name="除以 √d_k "))
    state = alt.Chart(data).transform_filter(
        (alt.datum.d_k == p_dk) & (alt.datum.scaled == p_scaled))

    bars = state.transform_flatten(["lo", "count"]).transform_calculate(
        hi="datum.lo + datum.width").mark_bar(color="#4c72b0").encode(
        x=alt.X("lo:Q", title="分数", axis=alt.Axis(tickCount=6)),
        x2="hi:Q",
        y=alt.Y("count:Q", title="个数"), y2=alt.datum(0),
        tooltip=[alt.Tooltip("lo:Q", title="从", format=".2f"), alt.Tooltip("hi:Q", title="到", format=".2f"),
                 alt.Tooltip("count:Q", title="个数")],
    )
    caption = _caption(state, "caption")
    hist = alt.layer(bars, caption).properties(width=WIDTH, height=150)

    row = state.transform_flatten(["weight"], ["weight"]).transform_window(
        key="row_number()").transform_calculate(key="datum.key - 1").mark_bar(color="#dd8452").encode(
        x=alt.X("key:O", title="Key", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("weight:Q", title="注意力权重", scale=alt.Scale(domain=[0, 1])),
        tooltip=[alt.Tooltip("key:O", title="Key"), alt.Tooltip("weight:Q", title="权重", format=".3f")],
    )
    row_caption = _caption(state, "row_caption")
    softmax = alt.layer(row, row_caption).properties(width=WIDTH, height=130)

    chart = base_config(alt.vconcat(hist, softmax, spacing=40).add_params(p_dk, p_scaled))
    alt_text = ("交互图：选择 d_k 和是否除以 √d_k。上图是 4096 对随机 q、k 的分数 q·k 的直方图，"
                "不缩放时标准差约为 √d_k，缩放后约为 1；下图是一行 16 个 key 的 softmax 权重，"
                "不缩放且 d_k 大时几乎全部权重落在一个 key 上。")
    controls = {"d_k": list(d_k_choices), "scaled": [False, True]}
    return InteractiveFigure(chart, alt_text, controls, states=len(rows), rows=rows)
