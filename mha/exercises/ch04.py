"""Checkers for chapter 04 (filled in with the chapter)."""
__all__: list[str] = []
