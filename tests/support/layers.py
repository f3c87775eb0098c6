"""The one builder of a test layer: small, deterministic (eval mode, no dropout), non-zero biases."""
import torch

import mha


def with_random_biases(module):
    """PyTorch starts Linear/in_proj biases at zero; tests must see non-zero ones."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("bias"):
                p.normal_()
    return module


def small_layer(d_model=16, n_heads=4, *, dtype=torch.float64, bias=True, fused=True, n_kv_heads=None):
    """An eval-mode ``mha.MultiHeadAttention`` without dropout, in ``dtype``, with non-zero biases."""
    layer = mha.MultiHeadAttention(d_model, n_heads, dropout=0.0, bias=bias, fused=fused, n_kv_heads=n_kv_heads)
    return with_random_biases(layer.to(dtype).eval())
