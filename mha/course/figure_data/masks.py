"""The mask explorer's numbers: padding, causal or both masks, and a seeded layer's weights under them."""
from __future__ import annotations

import torch

from mha.masks import causal_mask, padding_mask
from .checks import require_positive
from .toy import PAD, embed, toy_layer

__all__ = ["MASK_KINDS", "MASK_WORDS", "MASK_DEFAULTS", "MAX_PADDED", "mask_weights"]

MASK_KINDS = ["padding", "causal", "both"]
MASK_WORDS = ["You", "are", "welcome", "to", "learn", "multi", "head", "attention"]
MASK_DEFAULTS = {"kind": "both", "length": 3, "padded_len": 4}  # "You are welcome PAD"
MAX_PADDED = 10


@torch.no_grad()
def mask_weights(kind: str = "both", length: int = 3, padded_len: int = 4, d_model: int = 8, n_heads: int = 2,
                 seed: int = 0) -> dict:
    """Build the mask and run a seeded layer with it.

    Args:
        kind: "padding", "causal" or "both".
        length: number of real tokens (the rest up to ``padded_len`` is PAD).
        padded_len: S, the length after padding.

    Returns:
        ``{"tokens": S labels, "mask": the mask as built (padding (1, 1, 1, S),
        causal (S, S), both (1, 1, S, S)), "grid": it broadcast to (S, S),
        "weights": (h, S, S)}``; True in the mask = may attend.
    """
    if kind not in MASK_KINDS:
        raise ValueError(f"kind 只能是 {MASK_KINDS} 之一，现在是 {kind!r}")
    require_positive(length=length, padded_len=padded_len)
    if length > len(MASK_WORDS):
        raise ValueError(f"length 最多是 {len(MASK_WORDS)}（例句只有这么多词），现在是 {length}")
    if length > padded_len:
        raise ValueError(f"真实长度 length = {length} 比填充后的长度 padded_len = {padded_len} 还长："
                         f"填充只会在句尾补 PAD，不会截断；请把 padded_len 调到至少 {length}。")
    S = padded_len
    tokens = MASK_WORDS[:length] + [PAD] * (S - length)
    ids = torch.tensor([[i + 1 for i in range(length)] + [0] * (S - length)])  # (1, S), 0 = PAD
    pad = padding_mask(ids, pad_id=0)  # (1, 1, 1, S)
    causal = causal_mask(S)  # (S, S)
    mask = {"padding": pad, "causal": causal, "both": pad & causal}[kind]  # both: (1, 1, S, S)
    grid = torch.broadcast_to(mask, (1, 1, S, S))[0, 0]  # (S, S)
    x = embed(tokens, d_model, seed)  # (1, S, d_model)
    _, weights = toy_layer(d_model, n_heads, seed)(x, x, x, mask=mask, need_weights=True)  # (1, h, S, S)
    return {"tokens": tokens, "mask": mask, "grid": grid, "weights": weights[0]}
