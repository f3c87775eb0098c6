"""Checkers for chapter 09 (filled in with the chapter)."""
__all__: list[str] = []
