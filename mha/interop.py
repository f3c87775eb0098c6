"""Copy weights between :class:`mha.MultiHeadAttention` and ``torch.nn.MultiheadAttention``.

PyTorch stores the three input projections stacked in one matrix,
``in_proj_weight`` of shape (3 d_model, d_model), in the order Q, K, V, and
the output projection as ``out_proj``. Our layer keeps them as ``W_q``,
``W_k``, ``W_v`` and ``W_o``. (This module imports the layer; the layer does
not know about PyTorch's class.)
"""
from __future__ import annotations

import warnings

import torch
from torch import nn

from .layer import MultiHeadAttention

__all__ = ["from_torch", "to_torch"]


def from_torch(reference: nn.MultiheadAttention) -> MultiHeadAttention:
    """Build an :class:`mha.MultiHeadAttention` with ``reference``'s weights, dtype and device.

    The returned layer is always batch-first: it reads (B, L, d_model). A ``reference``
    built with ``batch_first=False`` (PyTorch's default) reads (L, B, d_model) instead; its
    weights are copied all the same, with a ``UserWarning``: feed the new layer
    ``x.transpose(0, 1)`` and transpose its output back, or the numbers silently differ.
    """
    if not isinstance(reference, nn.MultiheadAttention):
        raise TypeError(f"expected torch.nn.MultiheadAttention, got {type(reference).__name__}")
    if not reference._qkv_same_embed_dim:
        raise ValueError(
            f"only kdim == vdim == embed_dim is supported, got embed_dim={reference.embed_dim}, "
            f"kdim={reference.kdim}, vdim={reference.vdim}"
        )
    if reference.bias_k is not None or reference.add_zero_attn:
        raise ValueError("add_bias_kv=True and add_zero_attn=True are not part of the lecture's layer")
    if not reference.batch_first:
        warnings.warn(
            "the reference has batch_first=False and reads (L, B, d_model), but the mha layer is batch-first "
            "and reads (B, L, d_model): give it x.transpose(0, 1) and transpose its output back "
            "(or build the reference with batch_first=True)",
            UserWarning,
            stacklevel=2,
        )
    bias = reference.in_proj_bias is not None
    weight = reference.in_proj_weight
    layer = MultiHeadAttention(reference.embed_dim, reference.num_heads, dropout=reference.dropout, bias=bias)
    layer.to(device=weight.device, dtype=weight.dtype)
    d = reference.embed_dim
    with torch.no_grad():
        for i, linear in enumerate((layer.W_q, layer.W_k, layer.W_v)):
            linear.weight.copy_(weight[i * d:(i + 1) * d])
            if bias:
                linear.bias.copy_(reference.in_proj_bias[i * d:(i + 1) * d])
        layer.W_o.weight.copy_(reference.out_proj.weight)
        if bias:
            layer.W_o.bias.copy_(reference.out_proj.bias)
    layer.train(reference.training)
    return layer


def to_torch(layer: MultiHeadAttention) -> nn.MultiheadAttention:
    """Build an ``nn.MultiheadAttention(batch_first=True)`` with ``layer``'s weights, dtype and device."""
    if not isinstance(layer, MultiHeadAttention):
        raise TypeError(f"expected mha.MultiHeadAttention, got {type(layer).__name__}")
    if layer.n_kv_heads != layer.n_heads:
        raise ValueError(
            f"nn.MultiheadAttention has one K/V head per query head; this layer has n_kv_heads={layer.n_kv_heads} "
            f"for n_heads={layer.n_heads}: convert with layer.to_multi_head() first"
        )
    bias = layer.W_q.bias is not None
    w = layer.W_q.weight
    reference = nn.MultiheadAttention(
        layer.d_model, layer.n_heads, dropout=layer.dropout.p, bias=bias, batch_first=True,
        device=w.device, dtype=w.dtype,
    )
    with torch.no_grad():
        reference.in_proj_weight.copy_(torch.cat([layer.W_q.weight, layer.W_k.weight, layer.W_v.weight]))
        reference.out_proj.weight.copy_(layer.W_o.weight)
        if bias:
            reference.in_proj_bias.copy_(torch.cat([layer.W_q.bias, layer.W_k.bias, layer.W_v.bias]))
            reference.out_proj.bias.copy_(layer.W_o.bias)
    reference.train(layer.training)
    return reference
