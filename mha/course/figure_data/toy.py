"""A fixed, seeded toy model for the explorers: token vectors and an untrained layer.

Nothing here touches the global random state: every draw uses its own
``torch.Generator`` (or a forked RNG), so running an explorer never changes
what a notebook's next ``torch.randn`` returns.
"""
from __future__ import annotations

import zlib

import torch

from mha.layer import MultiHeadAttention

__all__ = ["PAD", "embed", "toy_layer"]

PAD = "PAD"


def _token_vector(token: str, d_model: int, seed: int) -> torch.Tensor:
    """A fixed random vector per token string (same word -> same vector, in every sentence)."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(token.encode("utf-8")))
    if token == PAD:
        return torch.zeros(d_model)  # PAD carries no meaning
    return torch.randn(d_model, generator=g)  # (d_model,)


def _positional_encoding(L: int, d_model: int) -> torch.Tensor:
    """Sinusoidal positional encoding, ``PE[pos, 2i] = sin(pos / 10000^(2i/d_model))``, cos for 2i+1."""
    pos = torch.arange(L, dtype=torch.float32)[:, None]  # (L, 1)
    i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (ceil(d_model/2),)
    angle = pos / torch.pow(10000.0, i / d_model)  # (L, ceil(d_model/2))
    pe = torch.zeros(L, d_model)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe  # (L, d_model)


def embed(tokens: list[str], d_model: int, seed: int = 0) -> torch.Tensor:
    """Embedding + positional encoding of one sentence: (1, L, d_model)."""
    vectors = torch.stack([_token_vector(t, d_model, seed) for t in tokens])  # (L, d_model)
    return (vectors + _positional_encoding(len(tokens), d_model))[None]  # (1, L, d_model)


def toy_layer(d_model: int, n_heads: int, seed: int = 0, gain: float = 2.0) -> MultiHeadAttention:
    """An untrained ``MultiHeadAttention`` with seeded weights, in eval mode (no dropout).

    ``W_q`` and ``W_k`` are multiplied by ``gain``: with PyTorch's default
    initialisation the scores of an untrained layer are tiny and every head
    looks uniform; ``gain=2`` gives scores with a spread of about 2, so the
    heads show distinct patterns.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layer = MultiHeadAttention(d_model, n_heads, dropout=0.0).eval()
    with torch.no_grad():
        layer.W_q.weight.mul_(gain)
        layer.W_k.weight.mul_(gain)
    return layer

