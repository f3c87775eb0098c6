"""mha: multi-head attention, step by step.

The course package of 多头注意力，一步一步. The full layer is
:class:`MultiHeadAttention`; each step of the lecture is a function in
:mod:`mha.steps`; masks live in :mod:`mha.masks`.
"""
from .display import fmt
from .interop import from_torch, to_torch
from .kv_cache import KVCache
from .layer import MultiHeadAttention
from .masks import causal_mask, padding_mask, padding_mask_from_lengths
from . import steps
from .steps import *  # noqa: F401,F403  (the six steps, one function each: see mha.steps.__all__)

__version__ = "0.1.0"

__all__ = [
    "MultiHeadAttention",
    "from_torch",
    "to_torch",
    "padding_mask",
    "padding_mask_from_lengths",
    "causal_mask",
    "fmt",
] + steps.__all__

# Beyond the lecture (chapter 12): KV cache and grouped-query attention
from .gqa import GroupedQueryAttention  # noqa: E402

__all__ += ["KVCache", "GroupedQueryAttention"]
