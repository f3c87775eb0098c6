"""Behaviour of the layer and the steps: fused vs explicit, rows, masks, determinism, gradients, no NaN."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import mha
from layers import small_layer, with_random_biases


def test_forward_is_the_composition_of_the_steps():
    layer = small_layer()
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    q = mha.split_heads(mha.project(x, layer.W_q), 4)  # (B, h, L, d_k)
    k = mha.split_heads(mha.project(x, layer.W_k), 4)
    v = mha.split_heads(mha.project(x, layer.W_v), 4)
    heads, _ = mha.attention(q, k, v)
    expected = mha.project(mha.merge_heads(heads), layer.W_o)
    torch.testing.assert_close(layer(x, x, x), expected, atol=1e-12, rtol=0)


def test_fused_equals_explicit_float32_and_float64():
    for dtype, atol in ((torch.float32, 1e-5), (torch.float64, 1e-10)):
        layer = small_layer(64, 8, dtype=dtype)
        q = torch.randn(3, 7, 64, dtype=dtype)
        kv = torch.randn(3, 9, 64, dtype=dtype)
        mask = mha.padding_mask_from_lengths([9, 4, 1], 9)
        fused = layer(q, kv, kv, mask=mask)
        explicit, _ = layer(q, kv, kv, mask=mask, need_weights=True)
        assert (fused - explicit).abs().max().item() <= atol


def test_split_then_merge_is_identity_and_split_matches_slices():
    x = torch.randn(2, 4, 512)
    heads = mha.split_heads(x, 8)
    assert heads.shape == (2, 8, 4, 64)
    assert torch.equal(heads[1, 3, 2], x[1, 2, 3 * 64:4 * 64])
    assert torch.equal(mha.merge_heads(heads), x)


def test_rows_sum_to_one_and_masked_entries_are_exactly_zero():
    layer = small_layer()
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    ids = torch.tensor([[5, 3, 2, 7, 0, 0], [1, 2, 3, 4, 5, 0]])
    pad = mha.padding_mask(ids, pad_id=0)
    _, w = layer(x, x, x, mask=pad, need_weights=True)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 6, dtype=torch.float64))
    assert (w[0, :, :, 4:] == 0).all() and (w[1, :, :, 5] == 0).all()
    assert (w[0, :, :, :4] > 0).all()


def test_causal_upper_triangle_is_zero():
    layer = small_layer()
    x = torch.randn(1, 5, 16, dtype=torch.float64)
    _, w = layer(x, x, x, mask=mha.causal_mask(5), need_weights=True)
    upper = torch.ones(5, 5, dtype=torch.bool).triu(1)
    assert (w[..., upper] == 0).all()
    assert (w[..., ~upper] > 0).all()


def test_fully_masked_row_is_zero_not_nan_in_both_paths():
    layer = small_layer(dtype=torch.float32)
    x = torch.randn(2, 3, 16, requires_grad=True)
    mask = torch.ones(2, 1, 3, 3, dtype=torch.bool)
    mask[0, 0, 1] = False  # query 1 of sequence 0 may attend nothing
    out, w = layer(x, x, x, mask=mask, need_weights=True)
    fused = layer(x, x, x, mask=mask)
    assert torch.isfinite(out).all() and torch.isfinite(fused).all()
    assert (w[0, :, 1] == 0).all()
    # documented result: zero context, so the output is W_o's bias
    torch.testing.assert_close(out[0, 1], layer.W_o.bias)
    torch.testing.assert_close(fused, out, atol=1e-5, rtol=1e-5)
    out.sum().backward()
    assert torch.isfinite(x.grad).all()


@pytest.mark.parametrize("fused", [True, False])
def test_causal_with_no_queries_gives_empty_results_on_both_paths(fused):
    """L = 0 with is_causal=True: an empty (0, S) causal mask, so both paths agree on the empty output."""
    layer = mha.MultiHeadAttention(8, 2, dropout=0.0, fused=fused).eval()
    x = torch.randn(2, 3, 8)
    assert layer(x[:, :0], x, x, is_causal=True).shape == (2, 0, 8)
    out, weights = layer(x[:, :0], x, x, is_causal=True, need_weights=True)
    assert out.shape == (2, 0, 8) and weights.shape == (2, 2, 0, 3)
    assert layer(x[:, :0], x[:, :0], x[:, :0], is_causal=True).shape == (2, 0, 8)
    assert mha.causal_mask(0, 3).shape == (0, 3) and mha.causal_mask(0).shape == (0, 0)


def test_mask_conventions_and_shapes():
    assert mha.causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert mha.causal_mask(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]
    pad = mha.padding_mask(torch.tensor([[4, 0]]), pad_id=0)
    assert pad.shape == (1, 1, 1, 2) and pad.tolist() == [[[[True, False]]]]
    assert mha.padding_mask_from_lengths([1, 2], 3)[:, 0, 0].tolist() == [[True, False, False], [True, True, False]]


def test_mask_accepts_int_float_and_all_broadcast_shapes():
    layer = small_layer()
    B, L, h = 2, 4, 4
    x = torch.randn(B, L, 16, dtype=torch.float64)
    base = torch.rand(B, h, L, L) > 0.3
    base[..., 0] = True
    expected = layer(x, x, x, mask=base)
    torch.testing.assert_close(layer(x, x, x, mask=base.int()), expected)
    torch.testing.assert_close(layer(x, x, x, mask=base.double()), expected)
    for shape_mask in (base[0, 0], base[:, 0], base[:, :1], base[:, :1, :1]):
        # (L, S), (B, L, S), (B, 1, L, S), (B, 1, 1, S): each acts as its broadcast to (B, h, L, S)
        full = (shape_mask.unsqueeze(1) if shape_mask.dim() == 3 else shape_mask).expand(B, h, L, L)
        torch.testing.assert_close(layer(x, x, x, mask=shape_mask), layer(x, x, x, mask=full.clone()))
    torch.testing.assert_close(layer(x, x, x, mask=base[0, 0]), layer(x, x, x, mask=base[:1, :1]))


def test_eval_is_deterministic_and_dropout_only_in_training():
    layer = mha.MultiHeadAttention(16, 4, dropout=0.5).double()
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    layer.eval()
    assert torch.equal(layer(x, x, x), layer(x, x, x))
    layer.train()
    _, w = layer(x, x, x, need_weights=True)
    assert (w == 0).any()  # dropout zeroes some weights in training


def test_gradcheck_tiny_layer():
    layer = small_layer(4, 2)
    q = torch.randn(1, 3, 4, dtype=torch.float64, requires_grad=True)
    kv = torch.randn(1, 2, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, False], [True, True], [False, True]])
    for fused in (False, True):
        layer.fused = fused
        assert torch.autograd.gradcheck(lambda a, b: layer(a, b, b, mask=mask), (q, kv))


@settings(max_examples=40, deadline=None)
@given(
    B=st.integers(1, 3), L=st.integers(1, 6), S=st.integers(1, 6),
    h=st.sampled_from([1, 2, 4]), d_k=st.integers(1, 5), bias=st.booleans(), seed=st.integers(0, 2**16),
)
def test_property_random_shapes_match_torch(B, L, S, h, d_k, bias, seed):
    torch.manual_seed(seed)
    d_model = h * d_k
    reference = torch.nn.MultiheadAttention(d_model, h, bias=bias, batch_first=True, dtype=torch.float64).eval()
    with_random_biases(reference)
    ours = mha.from_torch(reference).eval()
    q = torch.randn(B, L, d_model, dtype=torch.float64)
    kv = torch.randn(B, S, d_model, dtype=torch.float64)
    expected, expected_w = reference(q, kv, kv, average_attn_weights=False)
    out, w = ours(q, kv, kv, need_weights=True)
    assert out.shape == (B, L, d_model) and w.shape == (B, h, L, S)
    torch.testing.assert_close(out, expected, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(w, expected_w, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(ours(q, kv, kv), expected, atol=1e-10, rtol=1e-10)
