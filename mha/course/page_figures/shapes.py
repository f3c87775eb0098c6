"""Interactive shape figure: pick B, L, d_model and n_heads; see the shape after each of the six steps.

For every (d_model, n_heads) on the controls, :func:`shape_trace` runs the six steps of
``mha.steps`` (with ``nn.Linear`` projections) on tensors of the ``meta`` device: real
shape propagation, no arithmetic, so all of them take well under a second. B and L pass
through every step untouched; the trace runs with two sentinel sizes for them and records
each shape with the letters ``B`` and ``L`` in their places, so one trace covers every B
and L (the page writes the slider values into those two places). An impossible setting
(d_model not divisible by n_heads) stores mha's own explanation
(:func:`mha.course.figure_data.shapes.head_width_problem`). Which dimensions each head gets comes from
``mha.split_heads`` applied to ``arange(d_model)``.
"""
from __future__ import annotations

import json

import altair as alt
import torch

from mha.steps import merge_heads, project, attention, split_heads
from ..figure_data.shapes import MAX_HEADS, SHAPE_DEFAULTS, head_width_problem
from ..figure_data.shapes import STEP_LABELS as SIX_STEPS
from ._figure import InteractiveFigure, base_config, wrap

__all__ = ["D_MODEL_CHOICES", "MAX_BATCH", "MAX_LEN", "STEP_LABELS", "shape_trace", "fill", "shape_states",
           "shape_figure"]

D_MODEL_CHOICES = [8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024]
MAX_BATCH, MAX_LEN = 8, 32  # the B and L sliders (as in the ipywidgets explorer)
STEP_LABELS = [*SIX_STEPS, "（第 4 步的注意力权重）"]
_B, _L = 10007, 10009  # sentinel sizes (primes larger than any d_model, n_heads or d_k here)


@torch.no_grad()
def shape_trace(d_model: int, n_heads: int, batch: int = _B, seq_len: int = _L) -> list[tuple]:
    """The seven shapes (six steps + the attention weights) of ``mha.steps`` on meta tensors."""
    linears = [torch.nn.Linear(d_model, d_model, device="meta") for _ in range(4)]  # W_q, W_k, W_v, W_o
    x = torch.empty(batch, seq_len, d_model, device="meta")  # (B, L, d_model)
    q, k, v = (project(x, lin) for lin in linears[:3])  # (B, L, d_model)
    q_h, k_h, v_h = (split_heads(t, n_heads) for t in (q, k, v))  # (B, h, L, d_k)
    heads, weights = attention(q_h, k_h, v_h)  # (B, h, L, d_k), (B, h, L, L)
    concat = merge_heads(heads)  # (B, L, d_model)
    out = project(concat, linears[3])  # (B, L, d_model)
    return [tuple(t.shape) for t in (x, q, q_h, heads, concat, out, weights)]


def _symbolic(shape: tuple) -> str:
    names = {_B: "B", _L: "L"}
    return "(" + ", ".join(names.get(n, str(n)) for n in shape) + ")"


def fill(symbolic: str, batch: int, seq_len: int) -> str:
    """Write B and L into a stored shape, as the page does: ``fill("(B, 8, L, L)", 2, 4) == "(2, 8, 4, 4)"``."""
    return symbolic.replace("B", str(batch)).replace("L", str(seq_len))


def shape_states(d_model_choices=D_MODEL_CHOICES, max_heads: int = MAX_HEADS) -> list[dict]:
    """One row per (d_model, n_heads): the seven shapes with B and L symbolic, or why it cannot work."""
    rows = []
    for d_model in d_model_choices:
        for n_heads in range(1, max_heads + 1):
            row = {"d_model": d_model, "n_heads": n_heads}
            problem = head_width_problem(d_model, n_heads)
            if problem:
                rows.append({**row, "d_k": None, "problem": wrap(f"⚠️ {problem}", 46), "shapes": [],
                             "first": [], "last": []})
                continue
            shapes = shape_trace(d_model, n_heads)
            d_k = shapes[2][-1]
            assert d_k * n_heads == d_model and shapes[4] == shapes[0], "split heads / concat lost a dimension"
            # which of the d_model dimensions each head gets: split_heads on (1, 1, d_model) -> (h, d_k)
            dims = split_heads(torch.arange(d_model)[None, None], n_heads)[0, :, 0]
            rows.append({**row, "d_k": d_k, "problem": None, "shapes": [_symbolic(s) for s in shapes],
                         "first": dims[:, 0].tolist(), "last": dims[:, -1].tolist()})
    return rows


def shape_figure(d_model_choices=D_MODEL_CHOICES, **settings) -> InteractiveFigure:
    """The figure: B and L sliders, a d_model drop-down and an n_heads slider above the shapes and the heads."""
    s = {**SHAPE_DEFAULTS, **settings}
    rows = shape_states(d_model_choices)
    params = [
        alt.param(name="batch", value=s["batch"], bind=alt.binding_range(min=1, max=MAX_BATCH, step=1,
                                                                          name="batch B ")),
        alt.param(name="seq_len", value=s["seq_len"], bind=alt.binding_range(min=1, max=MAX_LEN, step=1,
                                                                              name="序列长度 L ")),
        alt.param(name="d_model", value=s["d_model"], bind=alt.binding_select(options=list(d_model_choices),
                                                                               name="d_model ")),
        alt.param(name="n_heads", value=s["n_heads"], bind=alt.binding_range(min=1, max=MAX_HEADS, step=1,
                                                                              name="n_heads h ")),
    ]
    state = alt.Chart(alt.InlineData(values=rows, name="shape_states")).transform_filter(
        "datum.d_model == d_model && datum.n_heads == n_heads")

    header = state.transform_calculate(text=(
        "datum.problem ? datum.problem : 'B = ' + batch + ', L = ' + seq_len + ', d_model = ' + datum.d_model"
        " + ', h = ' + datum.n_heads + '\\nd_k = ' + datum.d_model + ' / ' + datum.n_heads + ' = ' + datum.d_k"
    )).mark_text(align="left", baseline="top", fontSize=12, lineBreak="\n").encode(
        text="text:N", x=alt.value(0), y=alt.value(0)).properties(width=300, height=40)

    steps = state.transform_flatten(["shapes"]).transform_window(step="row_number()").transform_calculate(
        label=f"{json.dumps(STEP_LABELS, ensure_ascii=False)}[datum.step - 1]",
        shape="replace(replace(datum.shapes, regexp('B', 'g'), '' + batch), regexp('L', 'g'), '' + seq_len)")
    y = alt.Y("step:O", axis=None)
    labels = steps.mark_text(align="left", fontSize=12).encode(y=y, text="label:N", x=alt.value(0))
    shapes = steps.mark_text(align="left", fontSize=12, fontWeight="bold").encode(
        y=y, text="shape:N", x=alt.value(168),
        tooltip=[alt.Tooltip("label:N", title="步骤"), alt.Tooltip("shape:N", title="形状")])
    table = alt.layer(labels, shapes).properties(width=300, height=alt.Step(22))

    slots = state.transform_flatten(["first", "last"]).transform_window(head="row_number()").transform_calculate(
        end="datum.last + 1", dims="'第 ' + datum.first + ' 到 ' + datum.last + ' 维'")
    strip = slots.mark_rect(stroke="white", strokeWidth=1).encode(
        x=alt.X("first:Q", title="d_model 的维度：每个头一段", scale=alt.Scale(domainMin=0, nice=False),
                axis=alt.Axis(tickCount=4, format="d")),
        x2="end:Q",
        color=alt.Color("head:N", legend=None, scale=alt.Scale(scheme="tableau20")),
        tooltip=[alt.Tooltip("head:N", title="头"), alt.Tooltip("dims:N", title="维度"),
                 alt.Tooltip("d_k:Q", title="d_k")],
    ).properties(width=300, height=28)

    chart = base_config(alt.vconcat(header, table, strip, spacing=10).add_params(*params))
    alt_text = ("交互图：用滑块和下拉菜单选 batch B、序列长度 L、d_model 和头数 h，看六个步骤之后张量的形状，"
                "例如 (2, 4, 512) → (2, 8, 4, 64) → (2, 4, 512)，以及 d_model 被切成 h 段、每段 d_k 维；"
                "d_model 不能被 h 整除时显示原因和可选的头数。")
    controls = {"batch": list(range(1, MAX_BATCH + 1)), "seq_len": list(range(1, MAX_LEN + 1)),
                "d_model": list(d_model_choices), "n_heads": list(range(1, MAX_HEADS + 1))}
    states = MAX_BATCH * MAX_LEN * len(rows)
    return InteractiveFigure(chart, alt_text, controls, states=states, rows=rows)
