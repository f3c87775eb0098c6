"""Sinusoidal positional encoding (Vaswani et al., 2017), added to the token embeddings.

For position ``pos`` and pair index ``i`` (dimensions ``2i`` and ``2i + 1``)::

    PE[pos, 2i]     = sin(pos / base^(2i / d_model))
    PE[pos, 2i + 1] = cos(pos / base^(2i / d_model))

with ``base = 10000``. Even dimensions hold sines, odd dimensions cosines,
and both members of a pair share one frequency. Row 0 is therefore
``[0, 1, 0, 1, ...]``.
"""
from __future__ import annotations

import torch

from .validate import require_int, require_number

__all__ = ["sinusoidal_positional_encoding"]


def sinusoidal_positional_encoding(L: int, d_model: int, base: float = 10000.0, dtype=torch.float32) -> torch.Tensor:
    """The (L, d_model) table of sinusoidal positional encodings.

    Args:
        L: number of positions (sequence length), >= 1.
        d_model: width of every token vector, >= 1 (an odd width gets one
            more sine column than cosine columns).
        base: the wavelength base, 10000 in the Transformer paper.
        dtype: a floating-point dtype for the result.

    Returns:
        (L, d_model) tensor; add it to an embedding of shape (B, L, d_model).

    Example:
        >>> sinusoidal_positional_encoding(4, 6)[0]
        tensor([0., 1., 0., 1., 0., 1.])
    """
    L, d_model = require_int(L, "L", minimum=1), require_int(d_model, "d_model", minimum=1)
    require_number(base, "base", 1.0, float("inf"), low_inclusive=False)
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    pos = torch.arange(L, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d_model/2),) = 0, 2, 4, ...
    freq = base ** (-two_i / d_model)  # 1 / base^(2i/d_model)
    angle = pos * freq  # (L, ceil(d_model/2))
    pe = torch.zeros(L, d_model, dtype=torch.float64)  # (L, d_model)
    pe[:, 0::2] = torch.sin(angle)  # even dims: sin
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])  # odd dims: cos, same frequency as the sin before it
    return pe.to(dtype)
