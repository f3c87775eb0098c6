"""Interactive figures for the website (and Colab/Jupyter): every state precomputed by ``mha``.

The ipywidgets explorers of :mod:`mha.course.widgets` compute live and need a running kernel. The
figures here compute every state their controls can reach when the notebook runs and
hand all of them to one Vega-Lite spec (built with Altair): sliders, drop-downs and radio
buttons switch between the states in the reader's browser, tooltips show the values.
Both take their numbers from :mod:`mha.course.figure_data` (torch only), so importing
this package loads neither the widgets, matplotlib nor ipywidgets.

* :func:`scaling_figure`: d_k and the 1/sqrt(d_k) scaling (chapter 5);
* :func:`shape_figure`: B, L, d_model and n_heads -> the six shapes (chapter 8);
* :func:`head_figure`: sentence and head -> the attention weights (chapter 9);
* :func:`mask_figure`: mask kind, real and padded length -> the masked weights (chapter 10);
* :func:`trained_head_figure`: example, attention kind, layer and head of the trained
  numeral Transformer -> that head's weights (chapter 13).

Each returns an :class:`InteractiveFigure`; end a cell with it. In Jupyter and Colab it
shows Altair's own renderer output; on the website the spec is drawn by the site's own
copy of vega-embed (see :mod:`mha.course.page_figures.myst` and ``tools/book_ext.py``).
"""
from ._figure import MIME_TYPE, InteractiveFigure
from .heads import head_figure, head_states
from .masks import mask_figure, mask_states
from .scaling import scaling_figure, scaling_states
from .shapes import shape_figure, shape_states
from .trained import trained_head_figure, trained_head_states

__all__ = ["InteractiveFigure", "MIME_TYPE", "scaling_figure", "scaling_states", "shape_figure", "shape_states",
           "head_figure", "head_states", "mask_figure", "mask_states", "trained_head_figure", "trained_head_states"]
