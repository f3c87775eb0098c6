"""The full multi-head attention layer, composed visibly from :mod:`mha.steps`.

Shape legend: B batch, L query length, S key/value length, h heads
(``n_heads``), d_model model width, d_k = d_model / h.

``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O``,
``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``.
"""
from __future__ import annotations

import torch
from torch import nn

from .checks import require_attention_inputs, require_head_config
from .kv_cache import KVCache
from .masks import normalize_mask
from .steps import attend, merge_heads, project, require_is_causal, split_heads

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(nn.Module):
    """Multi-head attention as taught in the lecture, interchangeable with ``nn.MultiheadAttention``.

    Args:
        d_model: width of every token vector (lecture: 512).
        n_heads: number of heads h (lecture: 8); must divide ``d_model``.
        dropout: dropout probability on the attention weights (lecture: 0.1).
        bias: whether the four Linear layers have a bias.
        fused: when weights are not requested, use the fused
            ``F.scaled_dot_product_attention`` kernel (same numbers, faster);
            set to False to always run the explicit, step-by-step path.

    Attributes:
        W_q, W_k, W_v: the three input projections, each ``nn.Linear(d_model, d_model)``.
        W_o: the final output projection ``nn.Linear(d_model, d_model)``.
        d_k: width of one head, ``d_model // n_heads``.

    Shapes:
        query: (B, L, d_model); key, value: (B, S, d_model).
        mask: bool (or 0/1), True = may attend; (L, S), (B, L, S), (B, 1, 1, S),
        (B, 1, L, S) or (B, h, L, S). This is the *opposite* of the boolean
        masks of ``nn.MultiheadAttention`` (True = ignore there); see
        :mod:`mha.masks` for converters. For a causal mask prefer
        ``is_causal=True`` (no (L, S) tensor on the fused path).
        output: (B, L, d_model); weights (if requested): (B, h, L, S).
        cache (optional): an :class:`mha.KVCache` of earlier tokens' keys and
        values (B, h, S_cached, d_k); the layer then also returns the updated
        cache (incremental decoding, see :mod:`mha.kv_cache`).

    A query whose keys are all masked gets zero attention weights, so its
    context vector is zero and its output is ``W_o``'s bias. Never NaN.

    Example:
        >>> layer = MultiHeadAttention(d_model=512, n_heads=8)
        >>> x = torch.randn(2, 4, 512)
        >>> layer(x, x, x).shape
        torch.Size([2, 4, 512])
    """

    def __init__(self, d_model: int = 512, n_heads: int = 8, dropout: float = 0.1, bias: bool = True, fused: bool = True):
        super().__init__()
        require_head_config(d_model, n_heads, dropout)
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.fused = fused
        # Step 2: three Linear projections, d_model -> d_model
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        # Step 6: the final Linear W^O
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | None = None,
        *,
        is_causal: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """Run the six steps.

        Args:
            query: (B, L, d_model)
            key: (B, S, d_model)
            value: (B, S, d_model)
            mask: optional, True/1 = may attend, broadcastable to (B, h, L, S);
                with a cache, S counts the cached tokens too (e.g.
                ``causal_mask(L, cache.length + L)``).
            need_weights: also return the per-head attention weights.
            cache: optional :class:`mha.KVCache` (incremental decoding). The
                new keys/values are appended after the cached ones and the
                queries attend to all of them.
            is_causal: apply the causal (look-ahead) mask without passing one:
                query i may attend key j iff ``j <= i + (S - L)``, i.e.
                ``causal_mask(L, S)``, aligned to the bottom right so that with
                a cache the L new queries are the last L of the S positions.
                On the fused path with no ``mask`` and ``L == S`` no (L, S)
                mask is built at all (``F.scaled_dot_product_attention(...,
                is_causal=True)``); with ``L != S`` the bottom-right mask is
                built, because torch's own ``is_causal`` aligns to the top
                left. The explicit path (``need_weights=True`` or
                ``fused=False``) builds the mask and applies it. Combined with
                ``mask`` (e.g. a padding mask) the two are AND-ed: a key must
                be allowed by both. Requires ``L <= S``.

        Returns:
            output (B, L, d_model); with ``need_weights=True`` the tuple
            ``(output, weights)`` with weights (B, h, L, S). With a cache the
            updated cache is appended: ``(output, cache)`` or
            ``(output, weights, cache)``.
        """
        self._check_inputs(query, key, value)
        require_is_causal(is_causal)
        # Step 2: Linear projections (shape unchanged)
        q = project(query, self.W_q)  # (B, L, d_model)
        k = project(key, self.W_k)  # (B, S, d_model)
        v = project(value, self.W_v)  # (B, S, d_model)
        # Step 3: split heads
        q = split_heads(q, self.n_heads)  # (B, h, L, d_k)
        k = split_heads(k, self.n_heads)  # (B, h, S, d_k)
        v = split_heads(v, self.n_heads)  # (B, h, S, d_k)
        if cache is not None:  # decoding: put the earlier tokens' keys/values in front
            cache = self._extend_cache(cache, k, v)
            k, v = cache.keys, cache.values  # (B, h, S_cached + S, d_k)
        mask = self._normalize_mask(mask, q, k)
        # Step 4: scaled dot-product attention, all heads in parallel
        heads, weights = self._attend(q, k, v, mask, need_weights, is_causal)  # (B, h, L, d_k)
        # Step 5: Concat
        concat = merge_heads(heads)  # (B, L, d_model)
        # Step 6: final Linear W^O
        output = project(concat, self.W_o)  # (B, L, d_model)
        if cache is None:
            return (output, weights) if need_weights else output
        return (output, weights, cache) if need_weights else (output, cache)

    def _normalize_mask(self, mask, q, k):
        """Check the user's mask against (B, h, L, S) of the split queries/keys."""
        if mask is None:
            return None
        B, h, L, _ = q.shape
        return normalize_mask(mask, B, h, L, k.shape[2], device=q.device)

    def _extend_cache(self, cache, k, v):
        """The cache with this call's keys/values (B, h, S, d_k) appended."""
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache must be an mha.KVCache (use KVCache() to start), got {type(cache).__name__}")
        return cache.append(k, v)

    def _attend(self, q, k, v, mask, need_weights, is_causal=False):
        """Step 4 on split heads; returns ``(heads (B, h, L, d_k), weights (B, h, L, S) or None)``."""
        return attend(q, k, v, mask, self.dropout, need_weights, self.fused, is_causal=is_causal)

    def _check_inputs(self, query, key, value) -> None:
        require_attention_inputs(query, key, value, self.d_model, self.W_q.weight)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, d_k={self.d_k}, fused={self.fused}"

    # Interop with torch.nn.MultiheadAttention
    @classmethod
    def from_torch(cls, reference: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Build a layer with the same weights as a ``torch.nn.MultiheadAttention``."""
        from .interop import from_torch

        return from_torch(reference)

    def to_torch(self) -> nn.MultiheadAttention:
        """Return an ``nn.MultiheadAttention(batch_first=True)`` with the same weights."""
        from .interop import to_torch

        return to_torch(self)
