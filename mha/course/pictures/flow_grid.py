"""The six steps in rows of three boxes (the landing page's figure): :func:`mha.course.pictures.plot_flow` itself.

Kept as its own name because ``tools/book_ext.py`` draws the landing page's figure with it.
"""
from __future__ import annotations

from .flow import plot_flow

__all__ = ["plot_flow_grid"]


def plot_flow_grid(B: int = 2, L: int = 4, d_model: int = 512, n_heads: int = 8, ncols: int = 3, ax=None):
    """Draw the six steps in rows of ``ncols`` boxes; see :func:`mha.course.pictures.flow.plot_flow`.

    Returns:
        The matplotlib ``Axes``.
    """
    return plot_flow(B, L, d_model, n_heads, ncols=ncols, ax=ax)
