"""mha: multi-head attention, step by step.

The course package of 多头注意力，一步一步. The full layer is
:class:`MultiHeadAttention`; each step of the lecture is a function in
:mod:`mha.steps`; masks live in :mod:`mha.masks`.
"""
from .display import fmt
from .interop import from_torch, to_torch
from .layer import MultiHeadAttention
from .masks import causal_mask, padding_mask, padding_mask_from_lengths
from .steps import (
    attention_scores,
    fused_attention,
    masked_softmax,
    merge_heads,
    project,
    scaled_dot_product_attention,
    split_heads,
)

__version__ = "0.1.0"

__all__ = [
    "MultiHeadAttention",
    "from_torch",
    "to_torch",
    "project",
    "split_heads",
    "attention_scores",
    "masked_softmax",
    "scaled_dot_product_attention",
    "fused_attention",
    "merge_heads",
    "padding_mask",
    "padding_mask_from_lengths",
    "causal_mask",
    "fmt",
]

# Beyond the lecture (chapter 12): KV cache and grouped-query attention
from .gqa import GroupedQueryAttention, repeat_kv_heads  # noqa: E402
from .kv_cache import KVCache  # noqa: E402

__all__ += ["KVCache", "GroupedQueryAttention", "repeat_kv_heads"]
