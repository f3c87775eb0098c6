"""Attention masks.

Convention (the lecture's, and ``torch.nn.functional.scaled_dot_product_attention``'s):
**True / 1 = may attend, False / 0 = masked.**

``torch.nn.MultiheadAttention`` uses the *opposite* convention for boolean
masks (``key_padding_mask`` and boolean ``attn_mask``: True = *ignore*).
Use :func:`to_torch_key_padding_mask` / :func:`to_torch_attn_mask` when you
hand one of our masks to PyTorch's layer.

Shape legend: B batch, h heads, L query length, S key length.
A mask handed to the layer may have shape (L, S), (B, L, S), (B, 1, 1, S),
(B, 1, L, S), (1, h, L, S) or (B, h, L, S); any axis of size 1 broadcasts.
A 3-D mask is read as (B, L, S), one (L, S) mask per sentence shared by the
heads (:func:`normalize_mask`); a per-head mask is 4-D: (1, h, L, S) or (B, h, L, S).
"""
from __future__ import annotations

import torch

from .validate import require_int, require_rank, require_tensor, tracing

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
    require_rank(require_tensor(token_ids, "token_ids"), 2, "token_ids", "(B, S)")
    pad_id = require_int(pad_id, "pad_id")
    keep = token_ids != pad_id  # (B, S)
    return keep[:, None, None, :]  # (B, 1, 1, S)


def padding_mask_from_lengths(lengths: torch.Tensor | list[int], max_len: int) -> torch.Tensor:
    """Key padding mask from sequence lengths.

    Args:
        lengths: (B,) number of real tokens in each sequence (integers).
        max_len: S, the padded length (an int >= 0).

    Returns:
        (B, 1, 1, S) bool, True at positions ``< length``.

    Example:
        >>> padding_mask_from_lengths([3, 1], 4)[:, 0, 0].int().tolist()
        [[1, 1, 1, 0], [1, 0, 0, 0]]
    """
    max_len = require_int(max_len, "max_len")
    try:
        lengths = torch.as_tensor(lengths)
    except (TypeError, ValueError, RuntimeError) as error:
        raise TypeError(f"lengths must be a (B,) tensor or list of ints, got {lengths!r} ({error})") from None
    if lengths.dim() != 1:
        raise ValueError(f"lengths must have shape (B,), got {tuple(lengths.shape)}")
    whole = not (lengths.dtype == torch.bool or lengths.is_floating_point() or lengths.is_complex())
    if lengths.numel() and not whole:  # ([] is an empty batch, whatever its dtype)
        raise TypeError(f"lengths must be integers (token counts), got dtype {lengths.dtype}: {lengths.tolist()}")
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

    ``L == 0`` (no queries) gives an empty (0, S) mask.

    Returns:
        (L, S) bool, True = may attend.

    Example:
        >>> causal_mask(2, 3).int().tolist()  # 2 new queries after 1 cached token
        [[1, 1, 0], [1, 1, 1]]
    """
    L = require_int(L, "L")
    S = L if S is None else require_int(S, "S")
    if S < L:
        raise ValueError(f"causal_mask needs 0 <= L <= S, got L={L}, S={S}")
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(diagonal=S - L)  # (L, S)


def normalize_mask(mask, B: int, h: int, L: int, S: int, device=None) -> torch.Tensor:
    """Check a user mask and return it as a 4-D bool tensor broadcastable to (B, h, L, S).

    The number of dims says which axes the mask has:

    ========  ==============  ===============  ==========================================
    dims      read as         returned as      meaning
    ========  ==============  ===============  ==========================================
    2         (L, S)          (1, 1, L, S)     one mask for every sentence and head
    3         (B, L, S)       (B, 1, L, S)     one (L, S) mask per sentence, every head
    4         (B, h, L, S)    unchanged        any axis may be 1, e.g. (B, 1, 1, S)
    ========  ==============  ===============  ==========================================

    A 3-D mask is *not* right-aligned as in torch broadcasting: its first axis is the
    batch, never the heads, so its leading size must be B or 1. A per-head mask is
    4-D, (1, h, L, S) or (B, h, L, S). (With B == h an (h, L, S) mask passes the
    shape check and is read as (B, L, S), one mask per sentence.)

    Args:
        mask: True / 1 = may attend. A dense bool tensor, or an integer or float
            tensor holding only 0 and 1, on ``device``.
        B, h, L, S: batch size, heads, queries and keys of the scores it must fit.
        device: the inputs' device (None: not checked).

    Returns:
        (B or 1, h or 1, L or 1, S or 1) bool, True = may attend.

    Raises:
        TypeError: a sparse mask, a complex one, or values other than 0/1.
        ValueError: another device, a rank other than 2, 3 or 4, a 3-D mask whose
            leading size is neither B nor 1, or a shape that does not broadcast;
            the message names the expected and the given shape.
    """
    require_tensor(mask, "mask")
    if mask.layout != torch.strided:
        raise TypeError(f"mask must be a dense tensor, got layout {mask.layout}; use mask.to_dense()")
    if device is not None and mask.device != torch.device(device):
        raise ValueError(f"mask is on device {mask.device} but the inputs are on {device}; expected the same device")
    if mask.dtype != torch.bool:
        if mask.is_complex():
            raise TypeError(f"mask must be boolean or 0/1, got dtype {mask.dtype}")
        _require_zero_one(mask)
        mask = mask != 0
    target = (B, h, L, S)
    given = tuple(mask.shape)
    if mask.dim() == 2:
        mask = mask[None, None]  # (1, 1, L, S)
    elif mask.dim() == 3:
        if given[0] not in (1, B):
            raise ValueError(
                f"a 3-D mask is read as (B, L, S) = {(B, L, S)}, one (L, S) mask per sentence, got {given}: "
                f"its leading size {given[0]} is neither B = {B} nor 1; for a per-head mask pass "
                f"(1, h, L, S) = {(1, h, L, S)} or (B, h, L, S) = {target}"
            )
        mask = mask[:, None]  # (B, 1, L, S)
    elif mask.dim() != 4:
        raise ValueError(
            f"mask must have 2, 3 or 4 dims, one of (L, S), (B, L, S), (B, 1, 1, S), (B, 1, L, S), "
            f"(B, h, L, S) = {target}; got {given}"
        )
    for size, want in zip(mask.shape, target):
        if size not in (1, want):
            read_as = "" if mask.dim() == len(given) else f" (read as {tuple(mask.shape)})"
            raise ValueError(
                f"mask of shape {given}{read_as} cannot broadcast to (B, h, L, S) = {target}"
            )
    return mask


def _require_zero_one(mask: torch.Tensor) -> None:
    """Raise ``TypeError`` if an integer or float mask holds values other than 0 and 1 (e.g. -inf, 2, -1).

    Skipped where there are no values to read (meta tensors) and while compiling or exporting
    (:func:`mha.validate.tracing`): reading them would be a graph break and a host sync."""
    if mask.device.type == "meta" or tracing():
        return
    other = mask[(mask != 0) & (mask != 1)]
    if other.numel():
        examples = ", ".join(list(dict.fromkeys(str(v) for v in other.unique()[:10].tolist()))[:3])  # NaNs repeat
        hint = (". Additive float masks (0 / -inf) are not supported: pass mask == 0 instead"
                if mask.is_floating_point() else "")
        raise TypeError(f"mask must be boolean or 0/1 (1 = may attend), got dtype {mask.dtype} "
                        f"also holding {examples}{hint}")


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
