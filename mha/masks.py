"""Attention masks.

Convention (the lecture's, and ``torch.nn.functional.scaled_dot_product_attention``'s):
**True / 1 = may attend, False / 0 = masked.**

``torch.nn.MultiheadAttention`` uses the *opposite* convention for boolean
masks (``key_padding_mask`` and boolean ``attn_mask``: True = *ignore*).
Use :func:`to_torch_key_padding_mask` / :func:`to_torch_attn_mask` when you
hand one of our masks to PyTorch's layer.

Shape legend: B batch, h heads, L query length, S key length.
A mask may have shape (L, S), (B, L, S), (B, 1, 1, S), (B, 1, L, S) or
(B, h, L, S); any axis of size 1 broadcasts.
"""
from __future__ import annotations

import torch

from .validate import require_tensor

__all__ = [
    "padding_mask",
    "padding_mask_from_lengths",
    "causal_mask",
    "normalize_mask",
    "to_torch_key_padding_mask",
    "to_torch_attn_mask",
]


def padding_mask(token_ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Key padding mask from token ids.

    Args:
        token_ids: (B, S) integer token ids.
        pad_id: the id of the PAD token.

    Returns:
        (B, 1, 1, S) bool, True where the token is real (may be attended to).
    """
    require_tensor(token_ids, "token_ids")
    if token_ids.dim() != 2:
        raise ValueError(f"token_ids must have shape (B, S), got {tuple(token_ids.shape)}")
    keep = token_ids != pad_id  # (B, S)
    return keep[:, None, None, :]  # (B, 1, 1, S)


def padding_mask_from_lengths(lengths: torch.Tensor | list[int], max_len: int) -> torch.Tensor:
    """Key padding mask from sequence lengths.

    Args:
        lengths: (B,) number of real tokens in each sequence.
        max_len: S, the padded length.

    Returns:
        (B, 1, 1, S) bool, True at positions ``< length``.
    """
    lengths = torch.as_tensor(lengths)
    if lengths.dim() != 1:
        raise ValueError(f"lengths must have shape (B,), got {tuple(lengths.shape)}")
    if (lengths < 0).any() or (lengths > max_len).any():
        raise ValueError(f"every length must lie in [0, {max_len}], got {lengths.tolist()}")
    positions = torch.arange(max_len, device=lengths.device)  # (S,)
    keep = positions[None, :] < lengths[:, None]  # (B, S)
    return keep[:, None, None, :]  # (B, 1, 1, S)


def causal_mask(L: int, S: int | None = None, device=None) -> torch.Tensor:
    """Causal (look-ahead) mask: query i may attend key j iff ``j <= i + (S - L)``.

    With ``S == L`` this is the usual lower triangle. With ``S > L`` (a KV cache
    holding ``S - L`` earlier tokens) the triangle is aligned to the bottom
    right, so the last query sees every key.

    Returns:
        (L, S) bool, True = may attend.
    """
    S = L if S is None else S
    if L < 1 or S < L:
        raise ValueError(f"causal_mask needs 1 <= L <= S, got L={L}, S={S}")
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(diagonal=S - L)  # (L, S)


def normalize_mask(mask, B: int, h: int, L: int, S: int, device=None) -> torch.Tensor:
    """Check a user mask and return it as a bool tensor broadcastable to (B, h, L, S).

    Accepts bool tensors, integer tensors and float tensors holding only 0/1
    (1 = may attend). Raises ``TypeError``/``ValueError`` naming the expected
    and the actual shape or dtype.
    """
    require_tensor(mask, "mask")
    if mask.dtype != torch.bool:
        if mask.is_floating_point():
            if not torch.all((mask == 0) | (mask == 1)):
                raise TypeError(
                    "mask must be boolean or 0/1 (1 = may attend); got a float mask with other values. "
                    "Additive float masks (0 / -inf) are not supported: pass mask == 0 instead"
                )
        elif mask.is_complex():
            raise TypeError(f"mask must be boolean or 0/1, got dtype {mask.dtype}")
        mask = mask != 0
    if device is not None and mask.device != torch.device(device):
        raise ValueError(f"mask is on device {mask.device} but the inputs are on {device}; expected the same device")
    target = (B, h, L, S)
    if mask.dim() == 2:
        mask = mask[None, None]  # (1, 1, L, S)
    elif mask.dim() == 3:
        mask = mask[:, None]  # (B, 1, L, S)
    elif mask.dim() != 4:
        raise ValueError(
            f"mask must have 2, 3 or 4 dims, one of (L, S), (B, L, S), (B, 1, 1, S), (B, 1, L, S), "
            f"(B, h, L, S) = {target}; got {tuple(mask.shape)}"
        )
    for size, want in zip(mask.shape, target):
        if size not in (1, want):
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} cannot broadcast to (B, h, L, S) = {target}"
            )
    return mask


def to_torch_key_padding_mask(mask: torch.Tensor) -> torch.Tensor:
    """Turn our (B, 1, 1, S) padding mask (True = keep) into PyTorch's (B, S) (True = ignore)."""
    require_tensor(mask, "mask")
    if mask.dim() == 4:
        if mask.shape[1] != 1 or mask.shape[2] != 1:
            raise ValueError(f"expected a padding mask of shape (B, 1, 1, S), got {tuple(mask.shape)}")
        mask = mask[:, 0, 0, :]  # (B, S)
    return ~mask.bool()


def to_torch_attn_mask(mask: torch.Tensor) -> torch.Tensor:
    """Turn our (L, S) mask (True = may attend) into PyTorch's boolean attn_mask (True = not allowed)."""
    require_tensor(mask, "mask")
    return ~mask.bool()
