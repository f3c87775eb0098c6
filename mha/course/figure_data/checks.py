"""Argument checks shared by the figure data modules (Chinese messages, as the explorers print them)."""
from __future__ import annotations

from mha.validate import require_int

__all__ = ["require_positive"]


def require_positive(**values) -> None:
    """Chinese errors unless every value is a positive int: ``TypeError`` for another type, ``ValueError`` below 1."""
    for name, v in values.items():
        try:
            require_int(v, name, minimum=1)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{name} 必须是正整数，现在是 {v!r}") from None
