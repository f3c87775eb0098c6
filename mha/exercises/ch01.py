"""Checkers for chapter 01 (filled in with the chapter)."""
__all__: list[str] = []
