"""Checkers for chapter 02 (filled in with the chapter)."""
__all__: list[str] = []
