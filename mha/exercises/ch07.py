"""Checkers for chapter 07 (filled in with the chapter)."""
__all__: list[str] = []
