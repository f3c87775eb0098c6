"""The six steps of multi-head attention, one function each.

Shape legend (as in ``torch.nn.MultiheadAttention``):

* B: batch size
* L: query length (target sequence)
* S: key/value length (source sequence; S == L in self-attention)
* h: number of heads (``n_heads``)
* d_model: model width, e.g. 512
* d_k: width of one head, ``d_model / h``, e.g. 64

Flow (lecture): Q, K, V -> three Linear projections -> split heads ->
scaled dot-product attention per head, in parallel -> Concat -> final Linear W^O.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .checks import require_float_tensor, require_rank
from .masks import causal_mask

__all__ = [
    "project",
    "split_heads",
    "attention_scores",
    "masked_softmax",
    "scaled_dot_product_attention",
    "fused_attention",
    "attend",
    "apply_causal",
    "merge_heads",
]


def project(x: torch.Tensor, linear: nn.Linear) -> torch.Tensor:
    """Steps 2 and 6: apply a Linear layer, ``x W^T + b``; the shape stays the same.

    Args:
        x: (B, L, d_model)
        linear: an ``nn.Linear(d_model, d_model)`` (``W_q``, ``W_k``, ``W_v`` or ``W_o``).

    Returns:
        (B, L, d_model)
    """
    return linear(x)  # (B, L, d_model)


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Step 3, split heads: (B, L, d_model) -> (B, h, L, d_k).

    The last axis is cut into ``n_heads`` consecutive pieces of ``d_k``
    numbers; head i gets dimensions ``[i*d_k, (i+1)*d_k)`` of every token.
    The transpose moves the head axis in front of the token axis so each
    head holds a whole (L, d_k) sequence.
    """
    require_float_tensor(x, "x")
    require_rank(x, 3, "x", "(B, L, d_model)")
    B, L, d_model = x.shape
    if n_heads < 1 or d_model % n_heads != 0:
        raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
    d_k = d_model // n_heads
    x = x.view(B, L, n_heads, d_k)  # (B, L, h, d_k)
    return x.transpose(1, 2)  # (B, h, L, d_k)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Step 5, Concat: (B, h, L, d_k) -> (B, L, h * d_k).

    Equal to ``torch.cat([x[:, i] for i in range(h)], dim=-1)``.
    """
    require_float_tensor(x, "x")
    require_rank(x, 4, "x", "(B, h, L, d_k)")
    B, h, L, d_k = x.shape
    x = x.transpose(1, 2).contiguous()  # (B, L, h, d_k)
    return x.view(B, L, h * d_k)  # (B, L, d_model)


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Scaled scores ``Q K^T / sqrt(d_k)``: (B, h, L, d_k), (B, h, S, d_k) -> (B, h, L, S)."""
    d_k = q.size(-1)
    return q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (B, h, L, S)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the key axis (last), with masked keys getting weight exactly 0.

    Args:
        scores: (B, h, L, S)
        mask: bool, broadcastable to (B, h, L, S), True = may attend.

    Returns:
        (B, h, L, S) weights; each row sums to 1, except a row whose keys are
        *all* masked, which is all zeros (never NaN).
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)  # (B, h, L, S)
    very_negative = torch.finfo(scores.dtype).min  # finite: no NaN, even in a fully masked row
    scores = scores.masked_fill(~mask, very_negative)  # (B, h, L, S)
    weights = torch.softmax(scores, dim=-1)  # (B, h, L, S)
    return weights.masked_fill(~mask, 0.0)  # masked keys -> exactly 0


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout: nn.Module | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step 4, explicit path: ``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V`` for all heads at once.

    Args:
        q: (B, h, L, d_k)
        k: (B, h, S, d_k)
        v: (B, h, S, d_k)
        mask: bool, broadcastable to (B, h, L, S), True = may attend.
        dropout: optional ``nn.Dropout`` applied to the weights (as in the lecture).

    Returns:
        ``(output, weights)``: output (B, h, L, d_k), weights (B, h, L, S).
        A query with no key to attend gets zero weights and a zero output.
    """
    scores = attention_scores(q, k)  # (B, h, L, S)
    weights = masked_softmax(scores, mask)  # (B, h, L, S)
    if dropout is not None:
        weights = dropout(weights)
    return weights @ v, weights  # (B, h, L, d_k), (B, h, L, S)


def require_is_causal(is_causal) -> bool:
    """Raise ``TypeError`` unless ``is_causal`` is a Python bool (a mask belongs in ``mask``)."""
    if not isinstance(is_causal, bool):
        raise TypeError(
            f"is_causal must be True or False, got {type(is_causal).__name__}; pass a mask tensor as mask=..."
        )
    return is_causal


def apply_causal(mask: torch.Tensor | None, L: int, S: int, device=None) -> torch.Tensor:
    """The mask for ``is_causal=True``: ``mask AND causal_mask(L, S)``.

    The causal part is :func:`mha.causal_mask` aligned to the bottom right:
    the L queries are the *last* L of the S positions (``S > L`` when a KV
    cache holds ``S - L`` earlier tokens), so query i may attend key j iff
    ``j <= i + (S - L)``.

    Args:
        mask: None, or bool broadcastable to (B, h, L, S), True = may attend
            (e.g. a padding mask); it is combined with the causal mask by AND.
        L: query length; S: key length (``L <= S``).

    Returns:
        (L, S) bool when ``mask`` is None, else the broadcast AND of both.
    """
    if L > S:
        raise ValueError(
            f"is_causal=True needs L <= S (the queries are the last L of the S key positions), got L={L}, S={S}"
        )
    causal = causal_mask(L, S, device=device)  # (L, S)
    return causal if mask is None else mask & causal  # broadcasts to (B, h, L, S)


def fused_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
) -> torch.Tensor:
    """Step 4, fused path: the same result via ``F.scaled_dot_product_attention``.

    The fused kernel never returns (and, in its flash/memory-efficient variants,
    never stores) the (L, S) weight matrix. A query with no key to attend gets
    a zero output, exactly like :func:`scaled_dot_product_attention`.

    Args:
        q, k, v, mask: as in :func:`scaled_dot_product_attention`.
        dropout_p: dropout probability on the weights (0 in eval mode).
        is_causal: apply a causal (look-ahead) mask without being given one.
            With no ``mask`` and ``L == S`` the kernel gets
            ``is_causal=True`` and **no mask tensor is built**: it skips the
            keys above the diagonal itself, so memory stays O(L), not O(L*S).
            With ``L != S`` (KV-cache decoding: the queries are the last L of
            S positions) torch's ``is_causal`` would align the triangle to the
            top left, which is wrong here, so the bottom-right
            ``causal_mask(L, S)`` is built and passed instead; with ``L == 1``
            every key is visible and no mask is needed at all. With an explicit
            ``mask`` the two are combined by AND (:func:`apply_causal`).

    Shapes as in :func:`scaled_dot_product_attention`; returns (B, h, L, d_k).
    """
    if require_is_causal(is_causal):
        L, S = q.shape[-2], k.shape[-2]
        if mask is None and L == S:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)  # (B, h, L, d_k)
        if mask is not None or L > 1:  # L == 1 without a mask: the one query sees every key
            mask = apply_causal(mask, L, S, device=q.device)  # (L, S) or (B, h, L, S)
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)  # (B, h, L, d_k)
    has_key = mask.any(dim=-1, keepdim=True)  # (.., L, 1): does the query see any key?
    safe_mask = mask | ~has_key  # a fully masked row attends everywhere, then is zeroed below
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=safe_mask, dropout_p=dropout_p)  # (B, h, L, d_k)
    return out.masked_fill(~has_key, 0.0)


def attend(q, k, v, mask, dropout: nn.Dropout, need_weights: bool, fused: bool, is_causal: bool = False):
    """Step 4 for a layer: the fused kernel when weights are not needed (and ``fused``), else the explicit path.

    Args:
        q: (B, h, L, d_k); k, v: (B, h, S, d_k).
        mask: None or bool broadcastable to (B, h, L, S), True = may attend.
        dropout: the layer's ``nn.Dropout``; active only in training mode.
        need_weights: return the weights (forces the explicit path).
        fused: allow the fused kernel.
        is_causal: add the causal (look-ahead) mask, bottom-right aligned
            when ``L < S``, AND-ed with ``mask``. The fused path builds no
            mask for it when ``mask`` is None and ``L == S`` (see
            :func:`fused_attention`); the explicit path builds
            ``causal_mask(L, S)`` and applies it.

    Returns:
        ``(heads (B, h, L, d_k), weights (B, h, L, S) or None)``.
    """
    if fused and not need_weights:
        p = dropout.p if dropout.training else 0.0
        return fused_attention(q, k, v, mask, dropout_p=p, is_causal=is_causal), None
    if require_is_causal(is_causal):
        mask = apply_causal(mask, q.shape[-2], k.shape[-2], device=q.device)  # (L, S) or (B, h, L, S)
    return scaled_dot_product_attention(q, k, v, mask, dropout=dropout)
