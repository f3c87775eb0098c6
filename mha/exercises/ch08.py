"""Checkers for chapter 08 (filled in with the chapter)."""
__all__: list[str] = []
