"""A key/value cache for incremental (token-by-token) decoding.

When a decoder generates text it calls its self-attention once per new token.
The keys and values of the earlier tokens do not change, so instead of
projecting the whole prefix again at every step the layer keeps them: the
cache holds the *projected and split* keys and values, one tensor each of
shape (B, h, S, d_k), where S is the number of tokens seen so far.

Usage with :meth:`mha.MultiHeadAttention.decode` (x_t: the newest token, (B, 1, d_model)):

    >>> import torch, mha
    >>> layer = mha.MultiHeadAttention(d_model=16, n_heads=4).eval()
    >>> cache = KVCache()                                      # empty: S = 0
    >>> for t in range(3):
    ...     x_t = torch.randn(2, 1, 16)
    ...     out_t, cache = layer.decode(x_t, x_t, x_t, cache)  # cache.length grows by 1
    >>> cache.length, tuple(cache.keys.shape)                  # (B, h, S, d_k)
    (3, (2, 4, 3, 4))

The cache is immutable: :meth:`append` returns a new cache and leaves the old
one untouched (so a test can keep every step's cache). Production code
preallocates one (B, h, S_max, d_k) buffer and writes into it instead of
concatenating, which avoids copying the prefix at every step.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .validate import require_float_tensor, require_rank, require_same_dtype_device

__all__ = ["KVCache"]


@dataclass(frozen=True)
class KVCache:
    """Cached keys and values of the tokens seen so far.

    Attributes:
        keys: (B, h, S, d_k) or None for an empty cache.
        values: (B, h, S, d_k) or None for an empty cache.
    """

    keys: torch.Tensor | None = None
    values: torch.Tensor | None = None

    def __post_init__(self):
        if (self.keys is None) != (self.values is None):
            raise ValueError("KVCache needs both keys and values, or neither (an empty cache)")
        if self.keys is not None:
            require_rank(require_float_tensor(self.keys, "cache keys"), 4, "cache keys", "(B, h, S, d_k)")
            require_rank(require_float_tensor(self.values, "cache values"), 4, "cache values", "(B, h, S, d_k)")
            if self.keys.shape != self.values.shape:
                raise ValueError(
                    f"cache keys and values must have the same shape (B, h, S, d_k), "
                    f"got {tuple(self.keys.shape)} and {tuple(self.values.shape)}"
                )
            require_same_dtype_device({"cache keys": self.keys, "cache values": self.values})

    @property
    def length(self) -> int:
        """S, the number of cached tokens (0 for an empty cache)."""
        return 0 if self.keys is None else self.keys.shape[2]

    def __len__(self) -> int:
        return self.length

    def nbytes(self) -> int:
        """Memory held by the cache: keys and values together."""
        if self.keys is None:
            return 0
        return self.keys.nbytes + self.values.nbytes

    def append(self, k: torch.Tensor, v: torch.Tensor) -> "KVCache":
        """Return a new cache with ``k``, ``v`` (B, h, S_new, d_k) added after the cached tokens.

        Raises ``ValueError`` when B, h or d_k (or the device) differ from the cached ones,
        ``TypeError`` when the dtype does.
        """
        require_rank(require_float_tensor(k, "new keys"), 4, "new keys", "(B, h, S_new, d_k)")
        require_rank(require_float_tensor(v, "new values"), 4, "new values", "(B, h, S_new, d_k)")
        if k.shape != v.shape:
            raise ValueError(f"new keys and values must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
        if self.keys is None:
            return KVCache(k, v)
        B, h, _, d_k = self.keys.shape
        if (k.shape[0], k.shape[1], k.shape[3]) != (B, h, d_k):
            raise ValueError(
                f"new keys must have shape (B, h, S_new, d_k) = ({B}, {h}, S_new, {d_k}) to match the cache, "
                f"got {tuple(k.shape)}"
            )
        require_same_dtype_device({"the cache keys": self.keys, "new keys": k})
        keys = torch.cat([self.keys, k], dim=2)  # (B, h, S + S_new, d_k)
        values = torch.cat([self.values, v], dim=2)  # (B, h, S + S_new, d_k)
        return KVCache(keys, values)
