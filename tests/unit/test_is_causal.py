"""``is_causal=True``: the causal mask without passing one.

Shape legend: B batch, L query length, S key length, h heads, d_k head width.
Everything runs in float64 so "equal" can mean allclose at 1e-12.
"""
import pytest
import torch
import torch.nn.functional as F

import mha
from layers import small_layer
from mha import steps
from mha.masks import to_torch_attn_mask, to_torch_key_padding_mask

D_MODEL, HEADS = 16, 4
TOL = dict(atol=1e-12, rtol=1e-12)


def make_layer(fused=True):
    torch.manual_seed(0)
    return small_layer(D_MODEL, HEADS, fused=fused)


def inputs(B=2, L=6):
    torch.manual_seed(1)
    return torch.randn(B, L, D_MODEL, dtype=torch.float64)  # (B, L, d_model)


PATHS = [  # (fused, need_weights): the fused kernel, the explicit path by choice, the explicit path for weights
    pytest.param(True, False, id="fused"),
    pytest.param(False, False, id="explicit"),
    pytest.param(True, True, id="weights"),
]


def run(layer, x, need_weights, **kw):
    """Layer output (B, L, d_model) and, if asked for, weights (B, h, L, S)."""
    result = layer(x, x, x, need_weights=need_weights, **kw)
    return result if need_weights else (result, None)


@pytest.mark.parametrize("fused, need_weights", PATHS)
def test_is_causal_equals_causal_mask(fused, need_weights):
    layer, x = make_layer(fused), inputs()
    out, w = run(layer, x, need_weights, is_causal=True)
    ref, w_ref = run(layer, x, need_weights, mask=mha.causal_mask(6))
    torch.testing.assert_close(out, ref, **TOL)
    assert out.shape == (2, 6, D_MODEL)
    if need_weights:
        torch.testing.assert_close(w, w_ref, **TOL)
        assert w.shape == (2, HEADS, 6, 6)
        assert torch.all(w.triu(diagonal=1) == 0)  # no weight on a later key


@pytest.mark.parametrize("fused, need_weights", PATHS)
def test_is_causal_combines_with_padding_mask(fused, need_weights):
    layer, x = make_layer(fused), inputs()
    pad = mha.padding_mask_from_lengths([6, 3], 6)  # (B, 1, 1, S)
    out, w = run(layer, x, need_weights, mask=pad, is_causal=True)
    ref, w_ref = run(layer, x, need_weights, mask=pad & mha.causal_mask(6))  # (B, 1, L, S)
    torch.testing.assert_close(out, ref, **TOL)
    if need_weights:
        torch.testing.assert_close(w, w_ref, **TOL)
        assert torch.all(w[1, :, :, 3:] == 0)  # padded keys get nothing
    # and it is not just the padding mask, nor just the causal one
    assert not torch.allclose(out, run(layer, x, False, mask=pad)[0])
    assert not torch.allclose(out, run(layer, x, False, is_causal=True)[0])


def test_fully_masked_row_stays_zero_with_is_causal():
    """A sequence of length 0 has no key at all: zero context, output = W_o bias, never NaN."""
    for fused in (True, False):
        layer, x = make_layer(fused), inputs()
        out = layer(x, x, x, mask=mha.padding_mask_from_lengths([6, 0], 6), is_causal=True)
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out[1], layer.W_o.bias.expand(6, D_MODEL), **TOL)


@pytest.mark.parametrize("fused, need_weights", PATHS)
def test_kv_cache_chunks_use_bottom_right_mask(fused, need_weights):
    """Two new queries after 4 cached tokens: L=2, S=6, the causal triangle sits at the bottom right."""
    layer, x = make_layer(fused), inputs()
    full, w_full = run(layer, x, need_weights, is_causal=True)
    _, cache = layer.decode(x[:, :4], x[:, :4], x[:, :4], mha.KVCache(), is_causal=True)
    step = x[:, 4:]  # (B, 2, d_model)
    rest = layer.decode(step, step, step, cache, need_weights=need_weights, is_causal=True)
    by_mask = layer.decode(step, step, step, cache, need_weights=need_weights, mask=mha.causal_mask(2, 6))
    torch.testing.assert_close(rest[0], full[:, 4:], **TOL)
    torch.testing.assert_close(rest[0], by_mask[0], **TOL)
    assert rest[-1].length == 6
    if need_weights:
        assert rest[1].shape == (2, HEADS, 2, 6)
        torch.testing.assert_close(rest[1], w_full[:, :, 4:], **TOL)


def split_qkv(B, h, L, S, d_k=4):
    """Random already-split q (B, h, L, d_k), k and v (B, h, S, d_k), float64."""
    torch.manual_seed(0)
    return (torch.randn(B, h, L, d_k, dtype=torch.float64), torch.randn(B, h, S, d_k, dtype=torch.float64),
            torch.randn(B, h, S, d_k, dtype=torch.float64))


def test_torch_is_causal_would_align_top_left():
    """Why L != S builds causal_mask(L, S): torch's is_causal hides keys the new queries must see."""
    q, k, v = split_qkv(1, 2, L=2, S=6)
    ours = steps.fused_attention(q, k, v, is_causal=True)
    bottom_right = steps.fused_attention(q, k, v, mask=mha.causal_mask(2, 6))
    top_left = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(ours, bottom_right, **TOL)
    assert not torch.allclose(ours, top_left)


def test_single_new_token_builds_no_mask(monkeypatch):
    """L == 1 with a cache: the one query sees every key, so no mask is needed."""
    layer, x = make_layer(True), inputs()
    full = layer(x, x, x, is_causal=True)
    _, cache = layer.decode(x[:, :5], x[:, :5], x[:, :5], mha.KVCache(), is_causal=True)
    monkeypatch.setattr(steps, "causal_mask", _refuse)
    last, cache = layer.decode(x[:, 5:], x[:, 5:], x[:, 5:], cache, is_causal=True)
    torch.testing.assert_close(last, full[:, 5:], **TOL)


def _refuse(*args, **kwargs):
    raise AssertionError(f"causal_mask{args} was built, but is_causal=True with L == S must not build a mask")


def test_fused_path_builds_no_mask(monkeypatch):
    """L == S, no mask: the kernel gets is_causal=True and attn_mask=None; no (L, S) tensor is made."""
    layer, x = make_layer(True), inputs()
    expected = layer(x, x, x, mask=mha.causal_mask(6))
    calls = []
    real_sdpa = F.scaled_dot_product_attention

    def recording_sdpa(*args, **kwargs):
        calls.append(kwargs)
        return real_sdpa(*args, **kwargs)

    monkeypatch.setattr(steps, "causal_mask", _refuse)
    monkeypatch.setattr(mha.masks, "causal_mask", _refuse)
    monkeypatch.setattr(F, "scaled_dot_product_attention", recording_sdpa)
    out = layer(x, x, x, is_causal=True)
    torch.testing.assert_close(out, expected, **TOL)
    assert len(calls) == 1
    assert calls[0].get("attn_mask") is None and calls[0].get("is_causal") is True


def test_explicit_path_builds_and_applies_the_mask(monkeypatch):
    built = []
    real = steps.causal_mask

    def recording(L, S=None, device=None):
        built.append((L, S))
        return real(L, S, device=device)

    monkeypatch.setattr(steps, "causal_mask", recording)
    layer, x = make_layer(False), inputs()
    layer(x, x, x, is_causal=True)
    assert built == [(6, 6)]


@pytest.mark.parametrize("fused", [True, False])
def test_parity_with_torch_multihead_attention(fused):
    layer, x = make_layer(fused), inputs()
    ref = mha.to_torch(layer).eval()
    causal = mha.causal_mask(6)
    pad = mha.padding_mask_from_lengths([6, 4], 6)
    theirs, _ = ref(x, x, x, attn_mask=to_torch_attn_mask(causal), is_causal=True, need_weights=False)
    torch.testing.assert_close(layer(x, x, x, is_causal=True), theirs, **TOL)
    theirs, _ = ref(x, x, x, attn_mask=to_torch_attn_mask(causal), is_causal=True, need_weights=False,
                    key_padding_mask=to_torch_key_padding_mask(pad))
    torch.testing.assert_close(layer(x, x, x, mask=pad, is_causal=True), theirs, **TOL)


@pytest.mark.parametrize("fused, need_weights", PATHS)
def test_grouped_query_attention_is_causal(fused, need_weights):
    torch.manual_seed(0)
    gqa = mha.GroupedQueryAttention(D_MODEL, HEADS, 2, fused=fused).double().eval()
    x = inputs()
    out, w = run(gqa, x, need_weights, is_causal=True)
    ref, w_ref = run(gqa, x, need_weights, mask=mha.causal_mask(6))
    torch.testing.assert_close(out, ref, **TOL)
    if need_weights:
        torch.testing.assert_close(w, w_ref, **TOL)
    _, cache = gqa.decode(x[:, :4], x[:, :4], x[:, :4], mha.KVCache(), is_causal=True)
    rest, cache = gqa.decode(x[:, 4:], x[:, 4:], x[:, 4:], cache, is_causal=True)
    torch.testing.assert_close(rest, out[:, 4:], **TOL)
    assert cache.keys.shape == (2, 2, 6, D_MODEL // HEADS)  # (B, h_kv, S, d_k)


def test_fused_attention_function():
    q, k, v = split_qkv(2, 3, L=5, S=5)
    out = steps.fused_attention(q, k, v, is_causal=True)
    ref, _ = steps.attention(q, k, v, mha.causal_mask(5))
    torch.testing.assert_close(out, ref, **TOL)
    assert out.shape == (2, 3, 5, 4)


def test_training_gradients_match():
    """Forward + backward with is_causal equals the mask tensor (the chapter-12 memory measurement)."""
    layer, x = make_layer(True), inputs()
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)
    layer(x1, x1, x1, is_causal=True).sum().backward()
    layer(x2, x2, x2, mask=mha.causal_mask(6)).sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, **TOL)


def test_is_causal_must_be_bool():
    layer, x = make_layer(), inputs()
    with pytest.raises(TypeError, match="is_causal must be True or False, got Tensor"):
        layer(x, x, x, is_causal=mha.causal_mask(6))
    with pytest.raises(TypeError, match="is_causal must be True or False, got int"):
        layer.decode(x, x, x, mha.KVCache(), is_causal=1)


def test_is_causal_is_keyword_only():
    layer, x = make_layer(), inputs()
    with pytest.raises(TypeError):
        layer(x, x, x, None, False, None, True)


@pytest.mark.parametrize("fused", [True, False])
def test_more_queries_than_keys_is_a_clear_error(fused):
    layer = make_layer(fused)
    q, kv = inputs(L=4), inputs(L=3)
    with pytest.raises(ValueError, match=r"is_causal=True needs L <= S .* got L=4, S=3"):
        layer(q, kv, kv, is_causal=True)
