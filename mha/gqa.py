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
``n_heads / n_kv_heads``.

Query head i uses key/value head ``i // group``. The layer is therefore
exactly a :class:`mha.MultiHeadAttention` whose W_k, W_v rows of head i are
copies of GQA's rows of K/V head ``i // group``; :meth:`to_multi_head`
builds that layer.

Shape legend: B batch, L query length, S key length, h = n_heads,
h_kv = n_kv_heads, d_k = d_model / h.
"""
from __future__ import annotations

import torch
from torch import nn

from .checks import require_attention_inputs, require_float_tensor, require_head_config, require_rank
from .kv_cache import KVCache
from .masks import normalize_mask
from .steps import attend, merge_heads, project, require_is_causal, split_heads

__all__ = ["GroupedQueryAttention", "repeat_kv_heads"]


def repeat_kv_heads(x: torch.Tensor, group: int) -> torch.Tensor:
    """Give each query head its key/value head: (B, h_kv, S, d_k) -> (B, h_kv * group, S, d_k).

    Head j of ``x`` is repeated ``group`` times in a row, so query head i gets
    K/V head ``i // group``.
    """
    require_rank(require_float_tensor(x, "x"), 4, "x", "(B, h_kv, S, d_k)")
    if not isinstance(group, int) or group < 1:
        raise ValueError(f"group must be a positive int, got {group!r}")
    return x.repeat_interleave(group, dim=1)  # (B, h, S, d_k)


class GroupedQueryAttention(nn.Module):
    """Attention with ``n_heads`` query heads sharing ``n_kv_heads`` key/value heads.

    Args:
        d_model: width of every token vector.
        n_heads: number of query heads h; must divide ``d_model``.
        n_kv_heads: number of key/value heads; must divide ``n_heads``.
        dropout: dropout probability on the attention weights.
        bias: whether the Linear layers have a bias.
        fused: use ``F.scaled_dot_product_attention`` when weights are not requested.

    Attributes:
        W_q: ``nn.Linear(d_model, d_model)``; W_k, W_v: ``nn.Linear(d_model, n_kv_heads * d_k)``;
        W_o: ``nn.Linear(d_model, d_model)``; group = n_heads // n_kv_heads.

    Shapes and masks as in :class:`mha.MultiHeadAttention`; weights are
    (B, h, L, S) (one map per *query* head) and a cache holds
    (B, h_kv, S, d_k) keys and values.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, dropout: float = 0.0, bias: bool = True,
                 fused: bool = True):
        super().__init__()
        require_head_config(d_model, n_heads, dropout)
        if not isinstance(n_kv_heads, int) or isinstance(n_kv_heads, bool) or n_kv_heads < 1:
            raise TypeError(f"n_kv_heads must be a positive int, got {n_kv_heads!r}")
        if n_heads % n_kv_heads != 0:
            raise ValueError(
                f"n_heads must be divisible by n_kv_heads (each K/V head serves a whole group of query heads): "
                f"got n_heads={n_heads}, n_kv_heads={n_kv_heads}"
            )
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.group = n_heads // n_kv_heads
        self.d_k = d_model // n_heads
        self.fused = fused
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)  # fewer K heads
        self.W_v = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)  # fewer V heads
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None, need_weights: bool = False, cache: KVCache | None = None,
                *, is_causal: bool = False):
        """Same call as :meth:`mha.MultiHeadAttention.forward` (the cache stores h_kv heads).

        ``is_causal=True`` applies the bottom-right aligned causal mask
        ``causal_mask(L, S)`` AND-ed with ``mask``; on the fused path with no
        ``mask`` and ``L == S`` no mask tensor is built (see
        :func:`mha.steps.fused_attention`).
        """
        self._check_inputs(query, key, value)
        require_is_causal(is_causal)
        # Step 2: Linear projections; K and V are narrower
        q = project(query, self.W_q)  # (B, L, d_model)
        k = project(key, self.W_k)  # (B, S, h_kv * d_k)
        v = project(value, self.W_v)  # (B, S, h_kv * d_k)
        # Step 3: split heads
        q = split_heads(q, self.n_heads)  # (B, h, L, d_k)
        k = split_heads(k, self.n_kv_heads)  # (B, h_kv, S, d_k)
        v = split_heads(v, self.n_kv_heads)  # (B, h_kv, S, d_k)
        if cache is not None:  # the cache keeps only the h_kv heads
            if not isinstance(cache, KVCache):
                raise TypeError(f"cache must be an mha.KVCache, got {type(cache).__name__}")
            cache = cache.append(k, v)
            k, v = cache.keys, cache.values  # (B, h_kv, S_cached + S, d_k)
        # Share: each K/V head serves `group` query heads
        k = repeat_kv_heads(k, self.group)  # (B, h, S, d_k)
        v = repeat_kv_heads(v, self.group)  # (B, h, S, d_k)
        if mask is not None:
            B, h, L, _ = q.shape
            mask = normalize_mask(mask, B, h, L, k.shape[2], device=q.device)
        # Step 4: scaled dot-product attention, all h query heads in parallel
        heads, weights = attend(q, k, v, mask, self.dropout, need_weights, self.fused,
                                is_causal=is_causal)  # (B, h, L, d_k)
        # Step 5: Concat
        concat = merge_heads(heads)  # (B, L, d_model)
        # Step 6: final Linear W^O
        output = project(concat, self.W_o)  # (B, L, d_model)
        if cache is None:
            return (output, weights) if need_weights else output
        return (output, weights, cache) if need_weights else (output, cache)

    def _check_inputs(self, query, key, value) -> None:
        require_attention_inputs(query, key, value, self.d_model, self.W_q.weight)

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, n_kv_heads={self.n_kv_heads}, "
                f"group={self.group}, d_k={self.d_k}")

    def to_multi_head(self):
        """An equivalent :class:`mha.MultiHeadAttention`: K/V head j's rows copied to query heads j*group ... j*group+group-1."""
        from .layer import MultiHeadAttention

        bias = self.W_q.bias is not None
        w = self.W_q.weight
        full = MultiHeadAttention(self.d_model, self.n_heads, dropout=self.dropout.p, bias=bias, fused=self.fused)
        full.to(device=w.device, dtype=w.dtype)
        with torch.no_grad():
            for mine, theirs in ((self.W_q, full.W_q), (self.W_o, full.W_o)):
                theirs.weight.copy_(mine.weight)
                if bias:
                    theirs.bias.copy_(mine.bias)
            for mine, theirs in ((self.W_k, full.W_k), (self.W_v, full.W_v)):
                rows = mine.weight.view(self.n_kv_heads, self.d_k, self.d_model)  # (h_kv, d_k, d_model)
                theirs.weight.copy_(rows.repeat_interleave(self.group, dim=0).reshape(self.d_model, self.d_model))
                if bias:
                    b = mine.bias.view(self.n_kv_heads, self.d_k)  # (h_kv, d_k)
                    theirs.bias.copy_(b.repeat_interleave(self.group, dim=0).reshape(self.d_model))
        full.train(self.training)
        return full
