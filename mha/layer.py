"""The full multi-head attention layer: the lecture's six steps, one after the other.

Shape legend: B batch, L query length, S key/value length, h heads (``n_heads``),
h_kv key/value heads (``n_kv_heads``, = h unless grouped-query attention),
d_model model width, d_k = d_model / h.

``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O``,
``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``,
``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V``.

What a call returns:

=============================================================  =====================================
call                                                           returns
=============================================================  =====================================
``layer(q, k, v, mask)``                                       output (B, L, d_model)
``layer(q, k, v, mask, need_weights=True)``                    (output, weights (B, h, L, S))
``layer.decode(q, k, v, cache, mask)``                         (output, cache)
``layer.decode(q, k, v, cache, mask, need_weights=True)``      (output, weights, cache)
=============================================================  =====================================

The output always comes first, the weights are there exactly when asked for, and
incremental decoding (``decode``, with an :class:`mha.KVCache`) adds the updated cache last.
"""
from __future__ import annotations

import torch
from torch import nn

from .kv_cache import KVCache
from .masks import normalize_mask
from .steps import attention, fused_attention, merge_heads, project, repeat_kv_heads, split_heads
from .validate import require_attention_inputs, require_head_config, require_is_causal, require_same_dtype_device

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(nn.Module):
    """Multi-head attention as taught in the lecture, interchangeable with ``nn.MultiheadAttention``.

    Args:
        d_model: width of every token vector (lecture: 512).
        n_heads: number of heads h (lecture: 8); must divide ``d_model``.
        dropout: dropout probability on the attention weights (lecture: 0.1).
        bias: whether the four Linear layers have a bias.
        fused: the default ``True`` runs step 4 through PyTorch's fused
            ``F.scaled_dot_product_attention`` kernel whenever the weights are not
            requested (same numbers up to rounding, faster at long L, the (L, S)
            weights never returned); ``need_weights=True`` always takes the explicit path, the
            lecture's ``softmax(Q K^T / sqrt(d_k)) V`` (:func:`mha.steps.attention`),
            and ``fused=False`` takes it on every call. Chapter 8 shows both agree.
        n_kv_heads: number of key/value heads h_kv (default: ``n_heads``, ordinary
            multi-head attention). Fewer K/V heads, each shared by a group of
            ``n_heads / n_kv_heads`` query heads, is grouped-query attention;
            ``n_kv_heads=1`` is multi-query attention (chapter 12).

    Attributes:
        W_q, W_o: ``nn.Linear(d_model, d_model)``, the query projection and the final W^O.
        W_k, W_v: ``nn.Linear(d_model, n_kv_heads * d_k)`` (= d_model -> d_model unless GQA).
        d_k: width of one head, ``d_model // n_heads``; group: ``n_heads // n_kv_heads``.

    Shapes:
        query: (B, L, d_model); key, value: (B, S, d_model).
        mask: bool (or 0/1), True = may attend; (L, S), (B, L, S), (B, 1, 1, S),
        (B, 1, L, S), (1, h, L, S) or (B, h, L, S). A 3-D mask is (B, L, S),
        one per sentence, shared by the heads: it is not right-aligned, and its
        leading size must be B or 1 (:func:`mha.masks.normalize_mask`).
        True = may attend is the *opposite* of the boolean masks of
        ``nn.MultiheadAttention`` (True = ignore there); see
        :mod:`mha.masks` for converters. For a causal mask prefer
        ``is_causal=True`` (no (L, S) tensor on the fused path).
        output: (B, L, d_model); weights (if requested): (B, h, L, S).

    A query whose keys are all masked gets zero attention weights, so its
    context vector is zero and its output is ``W_o``'s bias. Never NaN.

    In eager mode an input holding NaN or infinity raises ``ValueError``. That check
    reads values, so it is skipped while ``torch.compile`` or ``torch.export`` traces
    the layer (:func:`mha.validate.tracing`): compiled, the layer has no graph break
    and no host sync, and checks no values, like ``nn.MultiheadAttention``.

    Example:
        >>> layer = MultiHeadAttention(d_model=512, n_heads=8)
        >>> x = torch.randn(2, 4, 512)
        >>> layer(x, x, x).shape
        torch.Size([2, 4, 512])
    """

    def __init__(self, d_model: int = 512, n_heads: int = 8, dropout: float = 0.1, bias: bool = True,
                 fused: bool = True, n_kv_heads: int | None = None):
        super().__init__()
        d_model, n_heads, dropout, n_kv_heads = require_head_config(d_model, n_heads, dropout, n_kv_heads)
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        self.group = n_heads // self.n_kv_heads
        self.fused = fused
        # Step 2: three Linear projections
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, self.n_kv_heads * self.d_k, bias=bias)
        self.W_v = nn.Linear(d_model, self.n_kv_heads * self.d_k, bias=bias)
        # Step 6: the final Linear W^O
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None,
                *, is_causal: bool = False, need_weights: bool = False):
        """The six steps.

        Args:
            query: (B, L, d_model)
            key: (B, S, d_model)
            value: (B, S, d_model)
            mask: optional, True/1 = may attend. (L, S); (B, L, S), one mask per
                sentence for every head (a 3-D mask is never (h, L, S)); or 4-D
                broadcastable to (B, h, L, S), per head: (1, h, L, S).
            is_causal: apply the causal (look-ahead) mask without passing one:
                query i may attend key j iff ``j <= i + (S - L)`` (``causal_mask(L, S)``,
                aligned to the bottom right). With ``mask`` too, a key must be allowed
                by both. On the fused path with no ``mask`` and ``L == S`` no (L, S)
                mask is built at all. Requires ``L <= S``.
            need_weights: also return the per-head attention weights (explicit path).

        Returns:
            output (B, L, d_model); with ``need_weights=True`` the tuple
            ``(output, weights)``, weights (B, h, L, S).
        """
        mask = self._validate(query, key, value, mask, is_causal)
        # Step 2: three Linear projections
        q = project(query, self.W_q)  # (B, L, d_model)
        k = project(key, self.W_k)  # (B, S, h_kv * d_k)
        v = project(value, self.W_v)  # (B, S, h_kv * d_k)
        # Step 3: split heads
        q = split_heads(q, self.n_heads)  # (B, h, L, d_k)
        k = split_heads(k, self.n_kv_heads)  # (B, h_kv, S, d_k)
        v = split_heads(v, self.n_kv_heads)  # (B, h_kv, S, d_k)
        # Step 4: scaled dot-product attention, all heads in parallel (GQA: each K/V head serves a group)
        heads, weights = self._attend(q, k, v, mask, is_causal, need_weights)  # (B, h, L, d_k), (B, h, L, S) or None
        # Step 5: Concat
        concat = merge_heads(heads)  # (B, L, d_model)
        # Step 6: final Linear W^O
        output = project(concat, self.W_o)  # (B, L, d_model)
        return (output, weights) if need_weights else output

    def decode(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cache: KVCache,
               mask: torch.Tensor | None = None, *, is_causal: bool = False, need_weights: bool = False):
        """Incremental decoding: the six steps over the cached keys/values plus this call's.

        The keys and values of earlier tokens do not change, so the cache keeps them
        projected and split, (B, h_kv, S_cached, d_k); this call appends its own and the
        queries attend to all ``S = S_cached + S_new`` of them.

        Args:
            query: (B, L, d_model); key, value: (B, S_new, d_model).
            cache: an :class:`mha.KVCache` (``KVCache()`` to start).
            mask: optional, as in :meth:`forward`; S counts the cached tokens.
            is_causal: as in :meth:`forward`; the L queries are the last L of the S positions.
            need_weights: also return the weights (B, h, L, S).

        Returns:
            ``(output, cache)``, or ``(output, weights, cache)`` with ``need_weights=True``;
            the returned cache holds S tokens (the given one is left unchanged).
        """
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache must be an mha.KVCache (use KVCache() to start), got {type(cache).__name__}")
        mask = self._validate(query, key, value, mask, is_causal, cache)
        q = split_heads(project(query, self.W_q), self.n_heads)  # (B, h, L, d_k)
        k = split_heads(project(key, self.W_k), self.n_kv_heads)  # (B, h_kv, S_new, d_k)
        cache = cache.append(k, split_heads(project(value, self.W_v), self.n_kv_heads))  # (B, h_kv, S, d_k) each
        heads, weights = self._attend(q, cache.keys, cache.values, mask, is_causal, need_weights)  # (B, h, L, d_k)
        output = project(merge_heads(heads), self.W_o)  # (B, L, d_model)
        return (output, weights, cache) if need_weights else (output, cache)

    def _attend(self, q, k, v, mask, is_causal: bool, need_weights: bool):
        """Step 4 for :meth:`forward` and :meth:`decode`: q (B, h, L, d_k), k, v (B, h_kv, S, d_k).

        Returns ``(heads, weights)``: heads (B, h, L, d_k); weights (B, h, L, S) on the
        explicit path, None on the fused one.
        """
        if self.fused and not need_weights:  # the fused kernel: same numbers, no (L, S) weights kept
            dropout_p = self.dropout.p if self.training else 0.0
            return fused_attention(q, k, v, mask, dropout_p, is_causal), None  # (B, h, L, d_k); groups K/V itself
        k, v = repeat_kv_heads(k, self.group), repeat_kv_heads(v, self.group)  # (B, h, S, d_k)
        return attention(q, k, v, mask, self.dropout, is_causal)  # the explicit math: softmax(Q K^T / sqrt(d_k)) V

    def _validate(self, query, key, value, mask, is_causal, cache: KVCache | None = None):
        """Validate the inputs, once, here; return the mask as 4-D bool broadcastable to (B, h, L, S).

        ``cache``: :meth:`decode`'s KV cache; its keys count towards S (S = cached + new keys).
        """
        require_attention_inputs(query, key, value, self.d_model, self.W_q.weight)
        (B, L), S = query.shape[:2], key.shape[1]
        if cache is not None and cache.keys is not None:
            self._validate_cache(cache, B)
            S += cache.length
        if require_is_causal(is_causal) and L > S:
            raise ValueError(
                f"is_causal=True needs L <= S (the queries are the last L of the S key positions), got L={L}, S={S}"
            )
        return None if mask is None else normalize_mask(mask, B, self.n_heads, L, S, device=query.device)

    def _validate_cache(self, cache: KVCache, B: int) -> None:
        """A non-empty cache must hold (B, h_kv, S_cached, d_k) keys of this layer's dtype, on its device."""
        require_same_dtype_device({"the layer's weights": self.W_q.weight, "the cache": cache.keys})
        B_c, h_c, _, d_c = cache.keys.shape
        if (B_c, h_c, d_c) != (B, self.n_kv_heads, self.d_k):
            raise ValueError(
                f"the cache must hold (B, h_kv, S_cached, d_k) = ({B}, {self.n_kv_heads}, S_cached, {self.d_k}) "
                f"for this layer and query, got {tuple(cache.keys.shape)}"
            )

    def extra_repr(self) -> str:
        kv = f", n_kv_heads={self.n_kv_heads}" if self.n_kv_heads != self.n_heads else ""
        return f"d_model={self.d_model}, n_heads={self.n_heads}{kv}, d_k={self.d_k}, fused={self.fused}"

    def to_multi_head(self) -> "MultiHeadAttention":
        """An equivalent layer with one K/V head per query head (K/V head j's rows copied to its group)."""
        bias = self.W_q.bias is not None
        w = self.W_q.weight
        full = MultiHeadAttention(self.d_model, self.n_heads, dropout=self.dropout.p, bias=bias, fused=self.fused)
        full.to(device=w.device, dtype=w.dtype)
        with torch.no_grad():
            for mine, theirs in ((self.W_q, full.W_q), (self.W_o, full.W_o)):
                theirs.load_state_dict(mine.state_dict())
            for mine, theirs in ((self.W_k, full.W_k), (self.W_v, full.W_v)):
                rows = mine.weight.view(self.n_kv_heads, self.d_k, self.d_model)  # (h_kv, d_k, d_model)
                theirs.weight.copy_(rows.repeat_interleave(self.group, dim=0).reshape(self.d_model, self.d_model))
                if bias:
                    b = mine.bias.view(self.n_kv_heads, self.d_k)  # (h_kv, d_k)
                    theirs.bias.copy_(b.repeat_interleave(self.group, dim=0).reshape(self.d_model))
        return full.train(self.training)
