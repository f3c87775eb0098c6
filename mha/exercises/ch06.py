"""Checkers for chapter 06 (filled in with the chapter)."""
__all__: list[str] = []
