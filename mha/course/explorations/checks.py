"""Argument checks shared by the explorations (Chinese messages, as the explorers print them)."""
from __future__ import annotations

__all__ = ["require_positive"]


def require_positive(**values) -> None:
    """Raise a Chinese ``ValueError`` unless every value is a positive int."""
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} 必须是正整数，现在是 {v!r}")
