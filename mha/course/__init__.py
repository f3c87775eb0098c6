"""The course around the core: everything the book needs that the layer does not.

* :mod:`mha.course.display`: ``fmt`` (portable printing of tensors) and ``source`` (show a function's code);
* :mod:`mha.course.exercises`: the ``check_*`` functions of the exercises;
  :mod:`mha.course.selfcheck`: the self-checks on the pages;
* :mod:`mha.course.pictures` (static matplotlib figures), :mod:`mha.course.widgets` (ipywidgets
  explorers that need a kernel), :mod:`mha.course.page_figures` (Vega-Lite figures that need no kernel),
  the last two computing their states with :mod:`mha.course.figure_data` (torch only);
* :mod:`mha.course.toy_task` (chapter 11), :mod:`mha.course.numerals` (chapter 13's trained model),
  :mod:`mha.course.training` (the reproducible training set-up both share);
* :mod:`mha.course.bench` (chapter 12's benchmark) and ``data/`` (shipped weights, results, the CJK font).

It builds on the core (``mha.MultiHeadAttention`` and friends) and never the other way round.
Each module is reached by its real path (``mha.course.pictures``...); importing this package
loads none of them.
"""

