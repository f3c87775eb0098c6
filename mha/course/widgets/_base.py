"""The tiny base every explorer shares: a ``View`` and a thin ``Explorer`` widget.

An explorer is two layers:

* a plain function ``xxx_view(**settings) -> View`` that computes everything
  (numbers, Chinese explanation, matplotlib figure) and knows nothing about
  widgets; tests call it directly;
* an :class:`Explorer`: controls wired with ``widgets.interactive_output`` to
  that function. Each redraw prints the text and displays the figure inside
  the Output widget, and records the ``View`` in ``.last`` (so code and tests
  can see what the reader sees).

Only ipywidgets APIs common to 7.7 (Colab) and 8 (JupyterLab) are used:
``interactive_output``, ``IntSlider``, ``Dropdown``, ``ToggleButtons``,
``Checkbox``, ``HTML``, ``Output``, ``HBox`` and ``VBox``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import matplotlib.pyplot as plt

from ..figure_data.checks import require_positive

__all__ = ["View", "Explorer", "show_static", "slider", "require_positive"]


@dataclass
class View:
    """What one setting of an explorer shows.

    Attributes:
        text: Chinese explanation (printed, never drawn inside the figure).
        figure: a matplotlib ``Figure`` (Chinese labels drawn with the shipped CJK subset), or None
            (e.g. for an impossible setting, which gets only a text).
        data: the numbers behind the picture (shapes, std, weights, ...).
    """

    text: str
    figure: Any = None
    data: dict = field(default_factory=dict)


class Explorer:
    """Controls + ``interactive_output(render)`` stacked in a ``VBox``.

    Args:
        render: ``render(**values) -> View``; keys are the control names.
        controls: name -> ipywidgets control (its ``.value`` is passed on).
        rows: the control names on each line (default: all on one line).
        title: optional HTML shown above the controls.

    Attributes:
        widget: the ``VBox`` to display.
        output: the ``Output`` the figure and text go to.
        last: the ``View`` of the latest redraw.
        redraws: how many times the view was redrawn.
        seconds: how long the latest redraw took (computing + figure).
    """

    def __init__(self, render: Callable[..., View], controls: dict, rows=None, title: str | None = None):
        import ipywidgets as widgets

        self.render = render
        self.controls = controls
        self.last: View | None = None
        self.redraws = 0
        self.seconds = 0.0
        self.output = widgets.interactive_output(self._draw, controls)  # draws the first view now
        rows = rows or [list(controls)]
        lines = [widgets.HBox([controls[name] for name in row]) for row in rows]
        header = [widgets.HTML(title)] if title else []
        self.widget = widgets.VBox(header + lines + [self.output])

    def _draw(self, **values) -> None:
        from IPython.display import display

        start = time.perf_counter()
        view = self.render(**values)
        print(view.text)
        if view.figure is not None:
            display(view.figure)  # an inline PNG inside the Output widget
            plt.close(view.figure)  # never shown twice, never piling up
        self.last = view
        self.redraws += 1
        self.seconds = time.perf_counter() - start

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)


def show_static(view: View):
    """Print a view's text and return its figure (for the static cell: end it with ``plt.show()``)."""
    print(view.text)
    return view.figure


def slider(description: str, value: int, min: int, max: int, step: int = 1):
    """An ``IntSlider`` that redraws only on release (keeps every update cheap)."""
    import ipywidgets as widgets

    return widgets.IntSlider(value=value, min=min, max=max, step=step, description=description,
                             continuous_update=False, style={"description_width": "initial"})
