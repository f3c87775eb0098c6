"""The course around the core: everything the book needs that the layer does not.

* :mod:`mha.course.display`: ``fmt`` (portable printing of tensors) and ``source`` (show a function's code);
* :mod:`mha.course.exercises`: the ``check_*`` functions of the exercises;
  :mod:`mha.course.selfcheck`: the self-checks on the pages;
* :mod:`mha.course.pictures` (matplotlib figures), :mod:`mha.course.widgets` (ipywidgets explorers),
  :mod:`mha.course.page_figures` (Vega-Lite figures for the website), both computing their states
  with :mod:`mha.course.figure_data` (torch only);
* :mod:`mha.course.toy_task` (chapter 11), :mod:`mha.course.numerals` (chapter 13's trained model);
* :mod:`mha.course.bench` (chapter 12's benchmark) and ``data/`` (shipped weights, results, the CJK font).

It builds on the core (``mha.MultiHeadAttention`` and friends) and never the other way round.
The chapters reach these modules by their old names too (``mha.course.pictures``, ``mha.course.exercises``...):
see :mod:`mha`. Importing this package loads none of its modules.
"""


def readers_name(module: str) -> str:
    """The name the chapters use for a course module: ``mha.course.pictures.curves`` -> ``mha.course.pictures.curves``."""
    prefix = f"{__name__}."
    return "mha." + module[len(prefix):] if module.startswith(prefix) else module
