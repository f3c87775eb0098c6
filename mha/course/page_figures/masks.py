"""Interactive mask figure: pick the mask kind, the real length and the padded length; see the masked weights.

Every state is computed by :func:`mha.course.figure_data.masks.mask_weights` (``mha.padding_mask``,
``mha.causal_mask`` and a seeded ``mha.MultiHeadAttention``), the same function the live
ipywidgets explorer calls. A setting the lesson calls impossible (more real words than the
padded length) stores mha's own explanation instead of a picture.
"""
from __future__ import annotations

import altair as alt
import torch

from ..figure_data.masks import MASK_DEFAULTS, MASK_KINDS, MASK_WORDS, MAX_PADDED, mask_weights
from ._figure import InteractiveFigure, base_config, heatmap, rounded, wrap

__all__ = ["mask_states", "mask_figure", "MAX_LENGTH"]

MAX_LENGTH = len(MASK_WORDS)
NUMBERS_UP_TO = 6  # write the weight in each cell while S <= 6 (the cells get too small after that)


def _state(kind: str, length: int, padded_len: int) -> dict:
    row = {"kind": kind, "length": length, "padded_len": padded_len}
    try:
        result = mask_weights(kind, length, padded_len)
    except ValueError as err:
        return {**row, "n": 0, "labels": [], "w": [], "m": "", "problem": wrap(f"⚠️ {err}", 34)}
    grid, weights = result["grid"], result["weights"]  # (S, S) bool, (h, S, S)
    h, S = weights.shape[0], len(result["tokens"])
    hidden = int((~grid).sum())
    assert torch.all(weights.masked_select(~grid.expand(h, S, S)) == 0), "a masked weight is not 0"
    assert torch.allclose(weights.sum(dim=-1), torch.ones(h, S), atol=1e-5), "a row does not sum to 1"
    labels = [f"{t} ({i + 1})" if t == "PAD" else t for i, t in enumerate(result["tokens"])]
    return {**row, "n": S, "labels": labels, "w": rounded(weights[0].flatten()),
            "m": "".join("1" if seen else "0" for seen in grid.flatten().tolist()),  # 1 = may attend
            "problem": None, "shape": str(tuple(result["mask"].shape)), "hidden": hidden, "heads": h}


def mask_states(kinds=MASK_KINDS, max_length: int = MAX_LENGTH, max_padded: int = MAX_PADDED) -> list[dict]:
    """One row per (kind, length, padded_len) the controls can reach: head 1's weights and the mask, flattened.

    The mask ``m`` is a string of 0/1 (1 = may attend), one character per cell.
    """
    return [_state(kind, length, padded)
            for kind in kinds for length in range(1, max_length + 1) for padded in range(1, max_padded + 1)]


def mask_figure(kind: str = MASK_DEFAULTS["kind"], length: int = MASK_DEFAULTS["length"],
                padded_len: int = MASK_DEFAULTS["padded_len"]) -> InteractiveFigure:
    """The figure: mask kind buttons and two length sliders above head 1's weights under that mask."""
    rows = mask_states()
    p_kind = alt.param(name="kind", value=kind, bind=alt.binding_radio(options=list(MASK_KINDS), name="mask "))
    p_length = alt.param(name="length", value=length,
                         bind=alt.binding_range(min=1, max=MAX_LENGTH, step=1, name="真实长度 "))
    p_padded = alt.param(name="padded_len", value=padded_len,
                         bind=alt.binding_range(min=1, max=MAX_PADDED, step=1, name="填充后长度 S "))
    state = alt.Chart(alt.InlineData(values=rows, name="mask_states")).transform_filter(
        (alt.datum.kind == p_kind) & (alt.datum.length == p_length) & (alt.datum.padded_len == p_padded))
    cells = heatmap(state, masked=True, numbers=f"datum.n <= {NUMBERS_UP_TO}").properties(
        width=alt.Step(28), height=alt.Step(28))
    caption = state.transform_calculate(caption=(
        "datum.problem ? datum.problem : datum.length + ' 个真实词，填充到 S = ' + datum.n"
        " + '\\n掩码的形状 ' + datum.shape + '\\n被遮住 ' + datum.hidden + ' 格（灰色 ×），'"
        " + datum.heads + ' 个头在这些格子'"
        " + '\\n的权重都是 0，每行之和 = 1'")).mark_text(align="left", baseline="top", fontSize=12, lineBreak="\n").encode(
        text="caption:N", x=alt.value(0), y=alt.value(0)).properties(width=220, height=64)
    chart = base_config(alt.vconcat(caption, cells, spacing=6).add_params(p_kind, p_length, p_padded))
    alt_text = ("交互图：选择掩码的种类（padding、causal 或两者都用）、真实词数和填充后的长度 S，"
                "看第 1 个头在这个掩码下的注意力权重热力图：被遮住的格子是灰色的 ×，权重恰好是 0，"
                "每行剩下的权重加起来仍是 1；真实词数大于 S 时显示为什么不行。")
    controls = {"kind": list(MASK_KINDS), "length": list(range(1, MAX_LENGTH + 1)),
                "padded_len": list(range(1, MAX_PADDED + 1))}
    return InteractiveFigure(chart, alt_text, controls, states=len(rows), rows=rows)
