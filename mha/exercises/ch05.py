"""Checkers for chapter 05 (filled in with the chapter)."""
__all__: list[str] = []
