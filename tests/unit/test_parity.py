"""mha.MultiHeadAttention against torch.nn.MultiheadAttention(batch_first=True) with copied weights."""
import warnings

import pytest
import torch
from torch import nn

import mha
from mha.masks import to_torch_attn_mask, to_torch_key_padding_mask

TOL = {torch.float64: dict(atol=1e-10, rtol=1e-10), torch.float32: dict(atol=1e-5, rtol=1e-5)}


def make_pair(d_model=16, n_heads=4, bias=True, dtype=torch.float64):
    reference = nn.MultiheadAttention(d_model, n_heads, bias=bias, batch_first=True, dtype=dtype).eval()
    if bias:  # PyTorch initialises biases to zero; make them non-zero so they are really compared
        with torch.no_grad():
            reference.in_proj_bias.normal_()
            reference.out_proj.bias.normal_()
    ours = mha.from_torch(reference).eval()
    return ours, reference


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("L,S", [(5, 5), (3, 7)])
@pytest.mark.parametrize("masks", ["none", "padding", "causal", "both"])
@pytest.mark.parametrize("fused", [True, False])
def test_parity_with_torch(dtype, bias, L, S, masks, fused):
    B, d_model, h = 3, 16, 4
    ours, reference = make_pair(d_model, h, bias, dtype)
    ours.fused = fused
    query = torch.randn(B, L, d_model, dtype=dtype)
    memory = query if L == S else torch.randn(B, S, d_model, dtype=dtype)
    lengths = torch.tensor([S, S - 1, 2])
    pad = mha.padding_mask_from_lengths(lengths, S)  # (B, 1, 1, S)
    causal = mha.causal_mask(L, S)  # (L, S)
    mask, kpm, am = None, None, None
    if masks in ("padding", "both"):
        kpm = to_torch_key_padding_mask(pad)
        mask = pad
    if masks in ("causal", "both"):
        am = to_torch_attn_mask(causal)
        mask = causal if mask is None else mask & causal
    expected_out, expected_w = reference(query, memory, memory, key_padding_mask=kpm, attn_mask=am,
                                         average_attn_weights=False)
    out, weights = ours(query, memory, memory, mask=mask, need_weights=True)
    out_fast = ours(query, memory, memory, mask=mask)
    torch.testing.assert_close(out, expected_out, **TOL[dtype])
    torch.testing.assert_close(weights, expected_w, **TOL[dtype])
    torch.testing.assert_close(out_fast, expected_out, **TOL[dtype])
    # averaged weights, as nn.MultiheadAttention returns by default
    _, averaged = reference(query, memory, memory, key_padding_mask=kpm, attn_mask=am)
    torch.testing.assert_close(weights.mean(dim=1), averaged, **TOL[dtype])


@pytest.mark.parametrize("fused", [True, False])
def test_parity_with_torch_per_head_mask(fused):
    """A (B, h, L, S) mask, different for every sentence and head, equals torch's (B*h, L, S) attn_mask (b-major)."""
    B, L, S, d_model, h = 2, 4, 6, 12, 3
    ours, reference = make_pair(d_model, h)
    ours.fused = fused
    query, memory = torch.randn(B, L, d_model, dtype=torch.float64), torch.randn(B, S, d_model, dtype=torch.float64)
    mask = torch.rand(B, h, L, S) < 0.6
    mask[..., 0] = True  # every query sees at least one key
    expected_out, expected_w = reference(query, memory, memory, attn_mask=~mask.reshape(B * h, L, S),
                                         average_attn_weights=False)
    out, weights = ours(query, memory, memory, mask=mask, need_weights=True)
    torch.testing.assert_close(out, expected_out, **TOL[torch.float64])
    torch.testing.assert_close(weights, expected_w, **TOL[torch.float64])


def test_to_torch_round_trip():
    ours = mha.MultiHeadAttention(32, 4, dropout=0.0).double().eval()
    reference = mha.to_torch(ours)
    assert isinstance(reference, nn.MultiheadAttention) and reference.batch_first
    x = torch.randn(2, 6, 32, dtype=torch.float64)
    torch.testing.assert_close(ours(x, x, x), reference(x, x, x)[0], atol=1e-12, rtol=0)
    back = mha.from_torch(reference)
    for name in ("W_q", "W_k", "W_v", "W_o"):
        assert torch.equal(getattr(back, name).weight, getattr(ours, name).weight)
        assert torch.equal(getattr(back, name).bias, getattr(ours, name).bias)


def test_from_torch_rejects_unsupported_configs():
    with pytest.raises(ValueError, match="kdim"):
        mha.from_torch(nn.MultiheadAttention(8, 2, kdim=4, vdim=4))
    with pytest.raises(ValueError, match="add_bias_kv"):
        mha.from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True))
    with pytest.raises(TypeError, match="nn.MultiheadAttention"):
        mha.from_torch(nn.Linear(8, 8))
    with pytest.raises(TypeError, match="mha.MultiHeadAttention"):
        mha.to_torch(nn.Linear(8, 8))


def test_lecture_shapes():
    layer = mha.MultiHeadAttention(d_model=512, n_heads=8)
    x = torch.randn(2, 4, 512)
    out, weights = layer(x, x, x, need_weights=True)
    assert layer.d_k == 64
    assert out.shape == (2, 4, 512)
    assert weights.shape == (2, 8, 4, 4)


def test_from_torch_warns_that_the_layer_is_batch_first():
    """A batch_first=False reference reads (L, B, E): its weights are copied, with a warning saying how to transpose."""
    reference = nn.MultiheadAttention(16, 4, dtype=torch.float64).eval()  # PyTorch's default: batch_first=False
    with pytest.warns(UserWarning, match=r"batch_first=False.*batch-first.*x.transpose\(0, 1\)"):
        ours = mha.from_torch(reference).eval()
    x = torch.randn(5, 3, 16, dtype=torch.float64)  # (L, B, E), as the reference reads it
    expected = reference(x, x, x)[0]  # (L, B, E)
    got = ours(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1)).transpose(0, 1)
    torch.testing.assert_close(got, expected, **TOL[torch.float64])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # batch_first=True: nothing to warn about
        mha.from_torch(nn.MultiheadAttention(16, 4, batch_first=True))
