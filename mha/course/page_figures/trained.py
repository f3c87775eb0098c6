"""Interactive head viewer of the trained numeral Transformer (chapter 13).

Pick an example number, the kind of attention (encoder self-attention, the decoder's masked
self-attention, cross-attention), the layer and the head; see that head's weights on that
number. Every state comes from one teacher-forced pass of the trained model
(:func:`mha.course.numerals.analysis.teacher_forced`, the maps the chapter's static pictures show).
"""
from __future__ import annotations

import altair as alt

from ._figure import InteractiveFigure, base_config, heatmap, rounded
from .heads import token_labels

__all__ = ["TRAINED_EXAMPLES", "KIND_NAMES", "trained_head_states", "trained_head_figure"]

TRAINED_EXAMPLES = [60708090, 2026, 30500, 1001, 10001000, 99990000]
KIND_NAMES = {"encoder": "编码器自注意力", "decoder": "解码器自注意力（带掩码）", "cross": "交叉注意力"}
# (rows, columns) of each kind: what the queries and the keys are
_AXES = {"encoder": ("chars", "chars"), "decoder": ("read", "read"), "cross": ("write", "chars")}


def trained_head_states(model, numbers=TRAINED_EXAMPLES) -> list[dict]:
    """One row per (number, kind, layer, head): that head's weights on that number, flattened."""
    from ..numerals import to_chinese
    from ..numerals.analysis import correct_rows, teacher_forced

    rows = []
    for number in numbers:
        batch, maps = teacher_forced(model, [number])  # a batch of one: no padding
        assert correct_rows(maps["logits"], batch).all(), f"the model gets {number} wrong"
        digits = list(str(number))
        axes = {"chars": token_labels(list(to_chinese(number))),  # the Chinese characters
                "read": token_labels(["<bos>"] + digits),          # what the decoder reads at each step
                "write": token_labels(digits + ["<eos>"])}         # what it writes at each step
        for kind in KIND_NAMES:
            for layer, weights in enumerate(maps[kind]):  # (1, h, rows, cols)
                r, c = _AXES[kind]
                assert weights.shape[2:] == (len(axes[r]), len(axes[c])), (kind, tuple(weights.shape))
                for head in range(weights.shape[1]):
                    rows.append({"number": number, "kind": kind, "layer": layer + 1, "head": head + 1,
                                 "rows": axes[r], "cols": axes[c], "nc": len(axes[c]),
                                 "w": rounded(weights[0, head].flatten())})
    return rows


def trained_head_figure(model=None, numbers=TRAINED_EXAMPLES) -> InteractiveFigure:
    """The figure: number, attention kind, layer and head controls above one heatmap.

    ``model``: the trained :class:`mha.course.numerals.NumeralTransformer` (default: the shipped
    4-head model in float64, as chapter 13 uses it).
    """
    if model is None:
        from ..numerals import load_pretrained

        model = load_pretrained().double()
    numbers = list(numbers)
    rows = trained_head_states(model, numbers)
    n_layers = max(r["layer"] for r in rows)
    n_heads = max(r["head"] for r in rows)
    layers, heads = list(range(1, n_layers + 1)), list(range(1, n_heads + 1))
    params = [
        alt.param(name="number", value=numbers[0], bind=alt.binding_select(options=numbers, name="例子 ")),
        alt.param(name="kind", value="cross", bind=alt.binding_radio(
            options=list(KIND_NAMES), labels=list(KIND_NAMES.values()), name="注意力 ")),
        alt.param(name="layer", value=n_layers, bind=alt.binding_radio(
            options=layers, labels=[f"第 {i} 层" for i in layers], name="层 ")),
        alt.param(name="head", value=1, bind=alt.binding_radio(
            options=heads, labels=[f"头 {i}" for i in heads], name="头 ")),
    ]
    state = alt.Chart(alt.InlineData(values=rows, name="trained_head_states")).transform_filter(
        "datum.number == number && datum.kind == kind && datum.layer == layer && datum.head == head")
    cells = heatmap(state, rows="rows", cols="cols", ncols="nc", numbers="datum.nc <= 6").properties(
        width=alt.Step(26), height=alt.Step(26))
    chart = base_config(cells.add_params(*params))
    alt_text = ("交互图：训练好的中文数字翻译模型的注意力。选择一个例子、注意力的种类（编码器自注意力、"
                "解码器带掩码的自注意力、交叉注意力）、层和头，看这个头的注意力权重热力图：编码器的行和列都是汉字，"
                "解码器自注意力的行和列是解码器读入的 token，交叉注意力的行是这一步写出的数字、列是汉字；每行加起来是 1。")
    controls = {"number": numbers, "kind": list(KIND_NAMES), "layer": layers, "head": heads}
    return InteractiveFigure(chart, alt_text, controls, states=len(rows), rows=rows)
