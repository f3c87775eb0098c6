"""Input validation with messages that name what was expected and what came.

Every public entry point of :mod:`mha` calls these helpers before touching
torch, so a student sees ``expected (B, L, 512), got (2, 4, 256)`` instead of a
matrix-multiplication error from deep inside PyTorch.
"""
from __future__ import annotations

import torch

__all__ = ["require_tensor", "require_float_tensor", "require_rank", "require_same_dtype_device"]


def _shape(t: torch.Tensor) -> str:
    return str(tuple(t.shape))


def require_tensor(x, name: str) -> torch.Tensor:
    """Raise ``TypeError`` unless ``x`` is a ``torch.Tensor``."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def require_float_tensor(x, name: str) -> torch.Tensor:
    """Raise ``TypeError`` unless ``x`` is a floating-point tensor."""
    require_tensor(x, name)
    if not x.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor (e.g. torch.float32), got dtype {x.dtype}; "
            "token ids must go through an Embedding first"
        )
    return x


def require_rank(x: torch.Tensor, rank: int, name: str, legend: str) -> torch.Tensor:
    """Raise ``ValueError`` unless ``x.dim() == rank``; ``legend`` names the axes, e.g. ``(B, L, d_model)``."""
    if x.dim() != rank:
        raise ValueError(f"{name} must have shape {legend} ({rank} dims), got {_shape(x)} ({x.dim()} dims)")
    return x


def require_same_dtype_device(tensors: dict[str, torch.Tensor]) -> None:
    """Raise ``TypeError`` on a dtype mismatch, ``ValueError`` on a device mismatch."""
    items = list(tensors.items())
    first_name, first = items[0]
    for name, t in items[1:]:
        if t.dtype != first.dtype:
            raise TypeError(f"{name} has dtype {t.dtype} but {first_name} has dtype {first.dtype}; expected all the same")
        if t.device != first.device:
            raise ValueError(f"{name} is on device {t.device} but {first_name} is on {first.device}; expected the same device")
