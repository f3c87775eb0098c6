"""The head viewer's numbers: every head's attention weights of a seeded layer on an example sentence."""
from __future__ import annotations

import torch

from mha.masks import padding_mask
from .toy import PAD, embed, toy_layer

__all__ = ["EXAMPLE_SENTENCES", "HEAD_DEFAULTS", "head_weights"]

EXAMPLE_SENTENCES = [
    "You are welcome PAD",  # the lecture's worked example, 4 tokens, one of them padding
    "the cat sat on the mat",
    "I love deep learning",
    "attention is all you need",
]
HEAD_DEFAULTS = {"sentence": EXAMPLE_SENTENCES[0], "head": 1, "d_model": 6, "n_heads": 2}  # as in chapter 9


@torch.no_grad()
def head_weights(sentence: str, d_model: int = 6, n_heads: int = 2, seed: int = 0):
    """Attention weights of a fixed, seeded layer on one sentence.

    The sentence is split on spaces; "PAD" tokens are masked as keys
    (``mha.padding_mask``), so no query attends to them.

    Returns:
        ``(tokens, weights)``: the L tokens and the (h, L, L) weights, one
        heatmap per head (rows: queries, columns: keys; each row sums to 1).
    """
    tokens = sentence.split()
    if not tokens:
        raise ValueError("句子是空的：至少要有 1 个词")
    if d_model % n_heads:
        raise ValueError(f"d_model = {d_model} 不能被 n_heads = {n_heads} 整除")
    x = embed(tokens, d_model, seed)  # (1, L, d_model)
    ids = torch.tensor([[0 if t == PAD else i + 1 for i, t in enumerate(tokens)]])  # (1, L), 0 = PAD
    mask = padding_mask(ids, pad_id=0)  # (1, 1, 1, L)
    _, weights = toy_layer(d_model, n_heads, seed)(x, x, x, mask=mask, need_weights=True)  # (1, h, L, L)
    return tokens, weights[0]  # (h, L, L)
