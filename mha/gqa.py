"""Grouped-query attention (GQA) and multi-query attention (MQA).

Multi-head attention gives every one of the h query heads its own key head
and value head. GQA keeps h query heads but only ``n_kv_heads`` key/value
heads; each key/value head is shared by a *group* of
``group = n_heads / n_kv_heads`` consecutive query heads:

* ``n_kv_heads == n_heads``: ordinary multi-head attention;
* ``n_kv_heads == 1``: multi-query attention (all query heads share one K/V head);
* in between: grouped-query attention (e.g. 8 query heads, 2 K/V heads).

W_k and W_v shrink from (d_model, d_model) to (n_kv_heads * d_k, d_model),
and, what matters most when decoding, the KV cache shrinks by the factor
``n_heads / n_kv_heads``. Query head i uses key/value head ``i // group``: the fused
path lets SDPA share the heads (``enable_gqa=True``, no copy; torch >= 2.5), the explicit
path copies them (:func:`mha.steps.repeat_kv_heads`).

There is no second forward: :class:`mha.MultiHeadAttention` takes ``n_kv_heads``
(as Llama's attention does). This subclass only makes ``n_kv_heads`` a required
argument; every default (``dropout=0.1``, ``bias``, ``fused``) is the layer's.
:meth:`~mha.MultiHeadAttention.to_multi_head` builds the equivalent ordinary layer.
"""
from __future__ import annotations

from .layer import MultiHeadAttention
from .steps import repeat_kv_heads

__all__ = ["GroupedQueryAttention", "repeat_kv_heads"]


class GroupedQueryAttention(MultiHeadAttention):
    """:class:`mha.MultiHeadAttention` with ``n_heads`` query heads sharing ``n_kv_heads`` key/value heads.

    Shapes, masks, ``forward`` and ``decode`` as in :class:`mha.MultiHeadAttention`;
    weights are (B, h, L, S) (one map per *query* head) and a cache holds
    (B, h_kv, S, d_k) keys and values.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, dropout: float = 0.1, bias: bool = True,
                 fused: bool = True):
        super().__init__(d_model, n_heads, dropout=dropout, bias=bias, fused=fused, n_kv_heads=n_kv_heads)
