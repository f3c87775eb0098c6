"""Checkers for chapter 10 (filled in with the chapter)."""
__all__: list[str] = []
