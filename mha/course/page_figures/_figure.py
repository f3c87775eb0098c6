"""The shared renderer: one interactive figure = a Vega-Lite chart whose every state was computed in Python.

The explorers in :mod:`mha.course.widgets` compute live in a kernel (ipywidgets). The figures
here compute *every* state their controls can reach, once, when the notebook runs, and
put them all into one Vega-Lite spec (built with Altair). The controls are Vega-Lite
parameters bound to sliders, drop-downs and radio buttons; the page only filters the
precomputed rows. No kernel, no hand-written JavaScript.

What a cell that ends with an :class:`InteractiveFigure` shows:

* in Jupyter and Colab: Altair's own renderer output (``text/html``, via the active
  ``alt.renderers`` entry), the same interactive figure;
* on the website: the spec, as one line of compact JSON text, under :data:`MIME_TYPE`
  (a mimetype of this course: Jupyter and Colab do not know it and show Altair's output;
  as text it stays one line in the stored notebook). The site's myst-nb plugin
  (:mod:`mha.course.page_figures.myst`) turns it into a ``<div>`` that the site's own copy of
  vega-embed draws (``tools/fetch_assets.py``, ``tools/book_ext.py``);
* as plain text: the figure's description (its alt text).
"""
from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass, field

import altair as alt

__all__ = ["InteractiveFigure", "MIME_TYPE", "VEGALITE_MAJOR", "rounded", "base_config", "wrap", "heatmap",
           "WEIGHT_SCHEME", "MASKED_COLOR"]

VEGALITE_MAJOR = alt.SCHEMA_VERSION.lstrip("v").split(".")[0]
# The website's copy of the spec. Not Jupyter's "application/vnd.vegalite.v6+json": a frontend that
# knows that one would draw it with its own bundled Vega instead of Altair's output, and the
# notebook would store the spec as JSON spread over thousands of lines.
MIME_TYPE = f"application/vnd.mha.vegalite.v{VEGALITE_MAJOR}.json"
WEIGHT_SCHEME = "viridis"  # the same colour map as the matplotlib heatmaps (mha.course.pictures.style.CMAP)
MASKED_COLOR = "#9e9e9e"  # a masked cell: mid grey, readable on light and dark pages
DECIMALS = 3  # every stored number: enough for the figures, keeps the specs small


def rounded(values, decimals: int = DECIMALS):
    """Round a number or a (nested) list / tensor / array of numbers for the spec (no ``-0.0``)."""
    if hasattr(values, "tolist"):
        values = values.tolist()
    if isinstance(values, (list, tuple)):
        return [rounded(v, decimals) for v in values]
    x = round(float(values), decimals)
    if math.isnan(x) or math.isinf(x):
        raise ValueError(f"cannot store {values!r} in a figure")
    return 0.0 if x == 0 else x


def base_config(chart):
    """Settings every figure shares: no frame around the views.

    The background stays Vega-Lite's white (readable in a dark Jupyter or Colab too); on the
    website's dark theme vega-embed's "dark" theme takes over (tools/static/mha-figures.js).
    """
    return chart.configure_view(stroke=None)


@dataclass
class InteractiveFigure:
    """A precomputed interactive figure.

    Attributes:
        chart: the Altair chart (top level, with its parameters).
        alt_text: a Chinese description of the figure, starting with "交互图：" (its alt text, also the
            spec's ``description`` and the cell's plain-text output).
        controls: parameter name -> every value its control can take (tests walk them all).
        states: how many settings of the controls the spec covers.
        rows: the precomputed rows (the spec's data); :meth:`state` picks one as the page does.
    """

    chart: object
    alt_text: str
    controls: dict = field(default_factory=dict)
    states: int = 0
    rows: list = field(default_factory=list, repr=False)

    def __post_init__(self):
        if not self.alt_text.strip():
            raise ValueError("an interactive figure needs a description (alt text)")
        if not self.alt_text.startswith("交互图："):
            raise ValueError("the description starts with 交互图： (readers of the alt text learn it is interactive)")
        self.chart = self.chart.properties(description=self.alt_text)
        self._spec = None

    @property
    def spec(self) -> dict:
        """The Vega-Lite spec (a dict), validated by Altair against the schema."""
        if self._spec is None:
            self._spec = self.chart.to_dict()
        return self._spec

    def state(self, **values) -> dict:
        """The one row the page shows for these control values (controls that are no row field are ignored)."""
        unknown = set(values) - set(self.controls)
        if unknown:
            raise KeyError(f"no such control: {sorted(unknown)}; controls: {list(self.controls)}")
        found = [r for r in self.rows if all(r[k] == v for k, v in values.items() if k in r)]
        if len(found) != 1:
            raise LookupError(f"{len(found)} rows match {values}")
        return found[0]

    def to_json(self) -> str:
        """The spec as compact JSON (what the website embeds)."""
        return json.dumps(self.spec, ensure_ascii=False, separators=(",", ":"))

    @property
    def nbytes(self) -> int:
        """Size of the compact spec in UTF-8 bytes."""
        return len(self.to_json().encode("utf-8"))

    def _repr_mimebundle_(self, include=None, exclude=None):
        own = self.chart._repr_mimebundle_(include, exclude)  # Altair's active renderer (html in Colab/Jupyter)
        if isinstance(own, tuple):
            own, metadata = own
        else:
            metadata = {}
        bundle = dict(own or {})
        bundle[MIME_TYPE] = self.to_json()
        bundle["text/plain"] = self.alt_text
        return (bundle, metadata) if metadata else bundle

    def __repr__(self) -> str:
        return f"<InteractiveFigure: {self.states} states, controls {list(self.controls)}, {self.nbytes} bytes>"


def wrap(text: str, columns: int = 40) -> str:
    """Break ``text`` into lines of at most ``columns`` display columns (a Chinese character counts 2).

    Lines break between Chinese characters or at spaces, never inside a Latin word such as ``d_model``.
    """
    def width(s: str) -> int:
        return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)

    out = []
    for paragraph in text.split("\n"):
        line = ""
        for unit in re.findall(r"[\x21-\x7e]+|\s|.", paragraph):  # Latin words, spaces, single characters
            if line and width(line + unit) > columns:
                out.append(line.rstrip())
                line = "" if unit.isspace() else unit
            else:
                line += unit
        out.append(line.rstrip())
    return "\n".join(out)


def heatmap(state, masked: bool = False, numbers: str = "true", rows: str = "labels",
            cols: str = "labels", ncols: str = "n"):
    """A query x key heatmap of one precomputed state.

    ``state`` is a chart whose filter leaves exactly one row with ``w`` (the matrix flattened
    row by row), the row labels (field ``rows``) and the column labels (field ``cols``; each
    list of distinct strings) and the number of columns (field ``ncols``); with ``masked``, also ``m`` (the
    mask, flattened the same way, as a string: "1" = may attend). The page only unfolds that
    row. ``numbers`` is a Vega expression: write the weight in each cell while it is true.
    """
    if masked:  # the mask is stored as a string of 0/1, one character per cell
        state = state.transform_calculate(m="split(datum.m, '')")
    fields = ["w", "m"] if masked else ["w"]
    cells = state.transform_flatten(fields).transform_window(i="row_number()").transform_calculate(
        q=f"floor((datum.i - 1) / datum.{ncols})", k=f"(datum.i - 1) % datum.{ncols}",
        query=f"datum.{rows}[datum.q]", key=f"datum.{cols}[datum.k]")
    x = alt.X("key:N", title="key", sort=alt.EncodingSortField("k", op="min"),
              axis=alt.Axis(labelAngle=-45, labelLimit=80, orient="top"))
    y = alt.Y("query:N", title="query", sort=alt.EncodingSortField("q", op="min"), axis=alt.Axis(labelLimit=80))
    tooltip = [alt.Tooltip("query:N", title="query"), alt.Tooltip("key:N", title="key"),
               alt.Tooltip("w:Q", title="权重", format=".3f")]
    color = alt.Color("w:Q", title="权重", scale=alt.Scale(domain=[0, 1], scheme=WEIGHT_SCHEME),
                      legend=alt.Legend(orient="bottom", gradientLength=160))
    if masked:
        tooltip.append(alt.Tooltip("seen:N", title="掩码"))
        cells = cells.transform_calculate(seen="datum.m === '1' ? '可以看' : '被遮住'")
        color = alt.condition("datum.m === '0'", alt.value(MASKED_COLOR), color)
    rect = cells.mark_rect(stroke="#888", strokeWidth=0.5).encode(x=x, y=y, color=color, tooltip=tooltip)
    text = cells.transform_filter(numbers).transform_calculate(
        label="datum.m === '0' ? '×' : format(datum.w, '.2f')" if masked else "format(datum.w, '.2f')").mark_text(
        fontSize=11).encode(
        x=x, y=y, text="label:N",
        color=alt.condition("datum.w > 0.55", alt.value("black"), alt.value("white")))
    return alt.layer(rect, text)
