"""Print numbers the same way on every machine.

``print(tensor)`` lets torch choose the format from the values: a row of sums
that comes out exactly 1 prints as ``tensor([1., 1.])`` and one that comes out
0.99999994 prints as ``tensor([1.0000, 1.0000])``; a "zero" that is 1e-10 on
another CPU switches the whole tensor to scientific notation. Which of these
happens depends on the BLAS kernel, the SIMD level and the thread count. The
chapters print through :func:`fmt` instead: a fixed number of decimals,
rounded first, and no negative zero, so a stored notebook output reproduces
on any CPU.
"""
from __future__ import annotations

import numbers

import numpy as np
import torch

from mha.validate import require_int

__all__ = ["fmt", "source", "Source"]


def fmt(x, decimals: int = 4) -> str:
    """Format a tensor, array or number with exactly ``decimals`` decimals.

    Args:
        x: a ``torch.Tensor`` (any shape and real dtype: float, bfloat16, int or bool;
            it may require grad), a numpy array, a Python or numpy number, or a list of
            numbers or tensors. Complex values raise ``TypeError`` (there is no imaginary
            part to drop silently).
        decimals: digits after the decimal point (ignored for integer and bool values).

    Returns:
        The text, laid out like numpy's ``repr`` of the array (rows on their
        own lines), e.g. ``fmt(torch.tensor([1.0, 0.5]), 2)`` -> ``'[1.00, 0.50]'``.
    """
    decimals = require_int(decimals, "decimals")
    if isinstance(x, (torch.Tensor, list, tuple)):
        array = np.asarray(_plain(x))
    elif isinstance(x, (numbers.Number, np.generic, np.ndarray)):
        array = np.asarray(x)
    else:
        raise TypeError(f"fmt expects a tensor, an array or numbers, got {type(x).__name__}")
    if array.dtype.kind == "c":
        raise TypeError(f"fmt prints real numbers, got complex dtype {array.dtype}; "
                        "format x.real and x.imag separately")
    if array.dtype.kind != "f":  # ints and bools print as they are
        return np.array2string(array, separator=", ") if array.ndim else str(array.item())
    array = np.asarray(np.round(array.astype(np.float64), decimals))
    array[array == 0] = 0.0  # -0.0 -> 0.0: a tiny negative must not print as "-0.0000"
    if array.ndim == 0:
        return f"{array.item():.{decimals}f}"
    return np.array2string(array, separator=", ", floatmode="fixed", precision=decimals,
                           suppress_small=True, max_line_width=120, threshold=10_000)


def _plain(x):
    """Tensors (also inside lists) as numpy values: detached, on the CPU, floats as float64.

    numpy has no bfloat16, and a tensor that requires grad refuses ``.numpy()``; float64
    holds every float16, bfloat16 and float32 value exactly, so the rounding is unchanged.
    """
    if isinstance(x, (list, tuple)):
        return [_plain(item) for item in x]
    if not isinstance(x, torch.Tensor):
        return x
    if x.device.type == "meta":
        raise ValueError(f"fmt needs values, got a meta tensor of shape {tuple(x.shape)} (it has none)")
    x = x.detach().cpu()
    return (x.double() if x.is_floating_point() else x).numpy()


class Source:
    """The source code of a function or class of :mod:`mha`, shown in a notebook.

    The chapters show the library's own code this way, read from the file when the
    cell runs, so what students read is what runs (and nbval notices when a chapter
    shows code that has changed since it was executed). Plain text is the code itself;
    Jupyter, Colab and the website get it highlighted.
    """

    def __init__(self, obj):
        import inspect
        import textwrap

        self.text = textwrap.dedent(inspect.getsource(obj))
        self.name = getattr(obj, "__qualname__", getattr(obj, "__name__", type(obj).__name__))
        self.file = inspect.getsourcefile(obj)
        self.first_line = inspect.getsourcelines(obj)[1]

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer

        return highlight(self.text, PythonLexer(), HtmlFormatter(cssclass="highlight", nowrap=False))


def source(obj) -> Source:
    """Show ``obj``'s source code (e.g. ``source(mha.MultiHeadAttention.forward)``)."""
    return Source(obj)
