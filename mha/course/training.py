"""What the course's two small trainings share (chapter 11's toy task, chapter 13's numeral model)."""
from __future__ import annotations

import contextlib

import torch

__all__ = ["deterministic"]


@contextlib.contextmanager
def deterministic(threads: int = 1):
    """Fixed thread count and deterministic algorithms inside the block; restored afterwards."""
    old_threads = torch.get_num_threads()
    old_det = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.set_num_threads(old_threads)
        torch.use_deterministic_algorithms(old_det)
