"""The numbers behind the explorers: pure computations with their constants (torch only).

Both views of each explorer compute their states here: the live ipywidgets explorers of
:mod:`mha.course.widgets` (matplotlib figures, need a kernel) and the Vega-Lite figures of
:mod:`mha.course.page_figures` (every state precomputed for the website). Nothing here imports
matplotlib or ipywidgets, so the website's figures load no widget code.

* :mod:`~mha.course.figure_data.toy`: the fixed, seeded toy layer and token embedding;
* :mod:`~mha.course.figure_data.shapes`: the six steps' shapes, ``head_width_problem``;
* :mod:`~mha.course.figure_data.heads`: ``head_weights`` on the example sentences;
* :mod:`~mha.course.figure_data.scaling`: ``score_stats``, the 1/sqrt(d_k) statistics;
* :mod:`~mha.course.figure_data.masks`: ``mask_weights`` under padding / causal masks.

The chapters keep importing these names from :mod:`mha.course.widgets`, which re-exports them.
"""
