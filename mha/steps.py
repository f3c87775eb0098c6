"""The six steps of multi-head attention, one function each.

Shape legend (as in ``torch.nn.MultiheadAttention``):

* B: batch size
* L: query length (target sequence)
* S: key/value length (source sequence; S == L in self-attention)
* h: number of heads (``n_heads``); h_kv: number of key/value heads (GQA, chapter 12)
* d_model: model width, e.g. 512
* d_k: width of one head, ``d_model / h``, e.g. 64

Flow (lecture): Q, K, V -> three Linear projections -> split heads ->
scaled dot-product attention per head, in parallel -> Concat -> final Linear W^O.

These functions are the plain math. They do not validate their inputs: the layer
(:class:`mha.MultiHeadAttention`) checks its inputs once, at its entry, and then calls
them; the chapters call them on tensors whose shapes they print.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .masks import causal_mask
from .validate import require_int

__all__ = [
    "project",
    "split_heads",
    "attention_scores",
    "masked_softmax",
    "attention",
    "fused_attention",
    "apply_causal",
    "repeat_kv_heads",
    "merge_heads",
]


def project(x: torch.Tensor, linear: nn.Linear) -> torch.Tensor:
    """Steps 2 and 6: apply a Linear layer, ``x W^T + b``: (B, L, d_model) -> (B, L, d_out)."""
    return linear(x)  # (B, L, d_out)


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Step 3, split heads: (B, L, d_model) -> (B, h, L, d_k).

    The last axis is cut into ``n_heads`` consecutive pieces of ``d_k``
    numbers; head i gets dimensions ``[i*d_k, (i+1)*d_k)`` of every token.
    The transpose moves the head axis in front of the token axis so each
    head holds a whole (L, d_k) sequence.
    """
    B, L, d_model = x.shape
    x = x.view(B, L, n_heads, d_model // n_heads)  # (B, L, h, d_k)
    return x.transpose(1, 2)  # (B, h, L, d_k)


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Scaled scores ``Q K^T / sqrt(d_k)``: (B, h, L, d_k), (B, h, S, d_k) -> (B, h, L, S)."""
    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, h, L, S)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the key axis (last), with masked keys getting weight exactly 0.

    Args:
        scores: (B, h, L, S)
        mask: bool, broadcastable to (B, h, L, S) by torch's right-aligned rule,
            True = may attend. Unlike the layer's mask (:func:`mha.masks.normalize_mask`),
            a 3-D mask here is (h, L, S); a per-sentence mask is (B, 1, L, S).

    Returns:
        (B, h, L, S) weights; each row sums to 1, except a row whose keys are
        *all* masked, which is all zeros (never NaN).
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)  # (B, h, L, S)
    very_negative = torch.finfo(scores.dtype).min  # finite: no NaN, even in a fully masked row
    weights = torch.softmax(scores.masked_fill(~mask, very_negative), dim=-1)  # (B, h, L, S)
    return weights.masked_fill(~mask, 0.0)  # masked keys -> exactly 0


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout: nn.Module | None = None,
    is_causal: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step 4, explicit path: ``Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V`` for all heads at once.

    Args:
        q: (B, h, L, d_k)
        k: (B, h, S, d_k)
        v: (B, h, S, d_v) (d_v = d_k in the layer; any width works here)
        mask: bool, broadcastable to (B, h, L, S) by torch's right-aligned rule
            (a 3-D mask is (h, L, S) here, unlike in the layer), True = may attend.
        dropout: optional ``nn.Dropout`` on the weights (the lecture's 0.1): in
            training mode it zeroes each weight with probability p and scales the
            others by 1 / (1 - p); in eval mode it does nothing.
        is_causal: also apply the bottom-right causal mask (:func:`apply_causal`).

    Returns:
        ``(output, weights)``: output (B, h, L, d_v), weights (B, h, L, S).
        A query with no key to attend gets zero weights and a zero output.
        (Unlike ``F.scaled_dot_product_attention``, which returns only the output.)

    Example:
        >>> q = k = v = torch.zeros(1, 2, 3, 4)
        >>> out, weights = attention(q, k, v)
        >>> tuple(out.shape), tuple(weights.shape), [round(w, 4) for w in weights[0, 0, 0].tolist()]
        ((1, 2, 3, 4), (1, 2, 3, 3), [0.3333, 0.3333, 0.3333])
    """
    if is_causal:
        mask = apply_causal(mask, q.shape[-2], k.shape[-2], device=q.device)  # (L, S) or (B, h, L, S)
    scores = attention_scores(q, k)  # (B, h, L, S): Q K^T / sqrt(d_k)
    weights = masked_softmax(scores, mask)  # (B, h, L, S)
    if dropout is not None:
        weights = dropout(weights)  # (B, h, L, S)
    return weights @ v, weights  # (B, h, L, d_v), (B, h, L, S)



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
    causal = causal_mask(L, S, device=device)  # (L, S)
    return causal if mask is None else mask & causal  # broadcasts to (B, h, L, S)


def _sdpa_probe() -> tuple[bool, bool]:
    """What this torch's ``F.scaled_dot_product_attention`` can do, found once by calling it on tiny tensors.

    Returns ``(has_gqa, zeros_masked_rows)``: whether it takes ``enable_gqa=True`` (torch >= 2.5),
    and whether a query whose keys are all masked comes back as zeros rather than NaN
    (torch >= 2.5; older versions need the guard in :func:`fused_attention`).
    """
    q, kv = torch.zeros(1, 2, 1, 1), torch.zeros(1, 1, 1, 1)  # 2 query heads, 1 K/V head
    try:
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
        has_gqa = True
    except TypeError:
        has_gqa = False
    out = F.scaled_dot_product_attention(kv, kv, kv, attn_mask=torch.zeros(1, 1, dtype=torch.bool))
    return has_gqa, not bool(out.isnan().any())


SDPA_HAS_GQA, SDPA_ZEROS_MASKED_ROWS = _sdpa_probe()


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
    a zero output, exactly like :func:`attention`: torch >= 2.5 returns zeros for
    such a row itself; on older torch (``SDPA_ZEROS_MASKED_ROWS`` False) the row is
    let attend everywhere and zeroed afterwards.

    Args:
        q: (B, h, L, d_k)
        k, v: (B, h_kv, S, d_k), h_kv dividing h: grouped-query attention when
            ``h_kv < h`` (query head i uses K/V head ``i // (h / h_kv)``). The kernel
            groups the heads itself (``enable_gqa=True``, no copy) where this torch has
            it (``SDPA_HAS_GQA``); otherwise K and V are repeated (:func:`repeat_kv_heads`).
        mask: as in :func:`attention`.
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

    Returns:
        (B, h, L, d_k)
    """
    group = q.shape[1] // k.shape[1]
    gqa = {}
    if group > 1 and SDPA_HAS_GQA:
        gqa = {"enable_gqa": True}  # the kernel shares each K/V head with its group, no copy
    elif group > 1:
        k, v = repeat_kv_heads(k, group), repeat_kv_heads(v, group)  # (B, h, S, d_k)
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]
        if mask is None and L == S:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True, **gqa)  # (B, h, L, d_k)
        if mask is not None or L > 1:  # L == 1 without a mask: the one query sees every key
            mask = apply_causal(mask, L, S, device=q.device)  # (L, S) or (B, h, L, S)
    if mask is None or SDPA_ZEROS_MASKED_ROWS:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, **gqa)  # (B, h, L, d_k)
    has_key = mask.any(dim=-1, keepdim=True)  # (.., L, 1): does the query see any key? (torch < 2.5)
    safe_mask = mask | ~has_key  # a fully masked row attends everywhere, then is zeroed below
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=safe_mask, dropout_p=dropout_p, **gqa)  # (B, h, L, d_k)
    return out.masked_fill(~has_key, 0.0)


def repeat_kv_heads(x: torch.Tensor, group: int) -> torch.Tensor:
    """Grouped-query attention: give each query head its key/value head, (B, h_kv, S, d_k) -> (B, h, S, d_k).

    Head j of ``x`` is repeated ``group = h / h_kv`` times in a row, so query head
    i gets K/V head ``i // group``. With ``group == 1`` (ordinary multi-head
    attention) ``x`` comes back unchanged.
    """
    group = require_int(group, "group", minimum=1)
    return x if group == 1 else x.repeat_interleave(group, dim=1)  # (B, h, S, d_k)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Step 5, Concat: (B, h, L, d_k) -> (B, L, h * d_k).

    Equal to ``torch.cat([x[:, i] for i in range(h)], dim=-1)``.
    """
    B, h, L, d_k = x.shape
    x = x.transpose(1, 2).contiguous()  # (B, L, h, d_k)
    return x.view(B, L, h * d_k)  # (B, L, d_model)
