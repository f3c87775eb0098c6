"""Checkers for chapter 03 (filled in with the chapter)."""
__all__: list[str] = []
