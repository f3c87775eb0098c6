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

__all__ = [
    "project",
    "split_heads",
    "attention_scores",
    "masked_softmax",
    "scaled_dot_product_attention",
    "fused_attention",
    "attend",
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


def fused_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Step 4, fused path: the same result via ``F.scaled_dot_product_attention``.

    The fused kernel never returns (and, in its flash/memory-efficient variants,
    never stores) the (L, S) weight matrix. A query with no key to attend gets
    a zero output, exactly like :func:`scaled_dot_product_attention`.

    Shapes as in :func:`scaled_dot_product_attention`; returns (B, h, L, d_k).
    """
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)  # (B, h, L, d_k)
    has_key = mask.any(dim=-1, keepdim=True)  # (.., L, 1): does the query see any key?
    safe_mask = mask | ~has_key  # a fully masked row attends everywhere, then is zeroed below
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=safe_mask, dropout_p=dropout_p)  # (B, h, L, d_k)
    return out.masked_fill(~has_key, 0.0)


def attend(q, k, v, mask, dropout: nn.Dropout, need_weights: bool, fused: bool):
    """Step 4 for a layer: the fused kernel when weights are not needed (and ``fused``), else the explicit path.

    Returns ``(heads (B, h, L, d_k), weights (B, h, L, S) or None)``. ``dropout``
    is the layer's ``nn.Dropout``; it is active only in training mode.
    """
    if fused and not need_weights:
        p = dropout.p if dropout.training else 0.0
        return fused_attention(q, k, v, mask, dropout_p=p), None
    return scaled_dot_product_attention(q, k, v, mask, dropout=dropout)
