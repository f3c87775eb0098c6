"""Interactive head viewer: pick a sentence and a head (or the mean over heads); see its attention weights.

Every state is computed by :func:`mha.course.figure_data.heads.head_weights` (a fixed, seeded, untrained
``mha.MultiHeadAttention``; "PAD" is hidden by ``mha.padding_mask``), the same function the
live ipywidgets viewer calls.
"""
from __future__ import annotations

import altair as alt

from ..figure_data.heads import EXAMPLE_SENTENCES, head_weights
from ._figure import InteractiveFigure, base_config, heatmap, rounded

__all__ = ["MEAN", "token_labels", "head_states", "head_figure"]

MEAN = "平均"  # the choice that shows the mean over heads


def token_labels(tokens) -> list[str]:
    """Axis labels: the tokens, with the position added where a token repeats ("the (1)", "the (5)")."""
    return [f"{t} ({i + 1})" if tokens.count(t) > 1 else t for i, t in enumerate(tokens)]


def _head_names(n_heads: int) -> list[str]:
    return [f"头 {i}" for i in range(1, n_heads + 1)] + [MEAN]


def head_states(sentences=EXAMPLE_SENTENCES, d_model: int = 6, n_heads: int = 2) -> list[dict]:
    """One row per (sentence, head or mean): the (L, L) weights flattened and the token labels."""
    rows = []
    for sentence in sentences:
        tokens, weights = head_weights(sentence, d_model, n_heads)  # (h, L, L)
        labels = token_labels(tokens)
        for name, w in zip(_head_names(n_heads), [*weights, weights.mean(dim=0)]):
            rows.append({
                "sentence": sentence, "head": name, "n": len(tokens), "labels": labels,
                "w": rounded(w.flatten()),
            })
    return rows


def head_figure(sentences=EXAMPLE_SENTENCES, d_model: int = 6, n_heads: int = 2) -> InteractiveFigure:
    """The figure: a sentence drop-down and head radio buttons above one heatmap."""
    sentences = list(sentences)
    rows = head_states(sentences, d_model, n_heads)
    names = _head_names(n_heads)
    p_sentence = alt.param(name="sentence", value=sentences[0],
                           bind=alt.binding_select(options=sentences, name="句子 "))
    p_head = alt.param(name="head", value=names[0], bind=alt.binding_radio(options=names, name="头 "))
    state = alt.Chart(alt.InlineData(values=rows, name="head_states")).transform_filter(
        (alt.datum.sentence == p_sentence) & (alt.datum.head == p_head))
    cells = heatmap(state).properties(width=alt.Step(44), height=alt.Step(44))
    chart = base_config(cells.add_params(p_sentence, p_head))
    alt_text = (f"交互图：选择一句例句和一个头（d_model = {d_model}，{n_heads} 个头，未训练、固定随机种子的层），"
                "或者所有头的平均，看 query（行）对 key（列）的注意力权重热力图，每格写着权重，每行加起来是 1；"
                "句子里的 PAD 被 padding mask 遮住，那一列全是 0。")
    controls = {"sentence": sentences, "head": names}
    return InteractiveFigure(chart, alt_text, controls, states=len(rows), rows=rows)
