"""Interactive explorers (ipywidgets) with a static figure for the website.

Each explorer comes in three layers:

* plain logic functions (``shape_steps``, ``head_weights``, ``score_stats``,
  ``mask_weights``, with their constants), which live in :mod:`mha.course.figure_data`
  (torch only, shared with the website's figures of :mod:`mha.course.page_figures`) and are
  re-exported here, and view functions (``*_view``) returning a
  :class:`~mha.course.widgets._base.View` (text + figure + data); tests call these;
* ``build_*()`` returning an :class:`~mha.course.widgets._base.Explorer` (the
  widget plus ``.controls`` and ``.last``), used by tests and by
  ``*_explorer()`` / ``head_viewer()``, which display it;
* ``*_static()``: print the default setting's text and return its figure,
  for the website, where no kernel runs the widget.

Notebook pattern (two code cells, one explorer per chapter)::

    # cell A -- no tags; stable output (text + one image), what the website shows
    import matplotlib.pyplot as plt
    import mha.course.widgets

    fig = mha.course.widgets.shape_explorer_static()
    plt.show()

    # cell B -- tags: nbval-ignore-output, remove-output; the live widget (Colab, Jupyter)
    mha.course.widgets.shape_explorer()

Execute such notebooks with ``make execute``: it drops ``metadata.widgets``, the
stored widget state, which is useless without a kernel and would put a few hundred
KB of JSON plus CDN scripts on the page.
"""
from ._base import Explorer, View
from .heads import (EXAMPLE_SENTENCES, build_head_viewer, head_view, head_view_all, head_viewer, head_viewer_static,
                    head_weights)
from .masks import MASK_KINDS, build_mask_explorer, mask_explorer, mask_explorer_static, mask_view, mask_weights
from ..figure_data.scaling import D_K_CHOICES, score_stats  # chapter 5's numbers (its figure is a page figure)
from .shapes import (build_shape_explorer, head_width_problem, shape_explorer, shape_explorer_static,
                     shape_steps, shape_view)

__all__ = [
    "View", "Explorer",
    "shape_explorer", "shape_explorer_static", "build_shape_explorer", "shape_steps", "shape_view",
    "head_width_problem",
    "head_viewer", "head_viewer_static", "build_head_viewer", "head_weights", "head_view", "head_view_all", "EXAMPLE_SENTENCES",
    "score_stats", "D_K_CHOICES",
    "mask_explorer", "mask_explorer_static", "build_mask_explorer", "mask_weights", "mask_view", "MASK_KINDS",
]
