"""KV cache: token-by-token decoding equals full causal attention."""
import pytest
import torch

import mha
from mha import KVCache
from layers import small_layer


def _layer():
    return small_layer(dtype=torch.float32)


def test_empty_cache():
    cache = KVCache()
    assert cache.length == 0 and len(cache) == 0 and cache.nbytes() == 0


@pytest.mark.parametrize("fused", [True, False])
def test_token_by_token_equals_full_causal(fused):
    layer = _layer()
    layer.fused = fused
    B, L, d = 2, 7, 16
    x = torch.randn(B, L, d)
    full = layer(x, x, x, mask=mha.causal_mask(L))  # (B, L, d)
    cache = KVCache()
    outs = []
    for t in range(L):
        x_t = x[:, t:t + 1]  # (B, 1, d)
        out_t, cache = layer.decode(x_t, x_t, x_t, cache)
        assert cache.keys.shape == (B, 4, t + 1, 4)
        outs.append(out_t)
    torch.testing.assert_close(torch.cat(outs, dim=1), full, atol=1e-6, rtol=1e-5)


def test_chunked_prefill_then_decode_with_bottom_right_causal_mask():
    layer = _layer()
    B, L, d = 1, 9, 16
    x = torch.randn(B, L, d)
    full, w_full = layer(x, x, x, mask=mha.causal_mask(L), need_weights=True)
    # prefill 5 tokens at once, then 4 tokens in one chunk: mask (4, 9) aligned bottom-right
    out_a, cache = layer.decode(x[:, :5], x[:, :5], x[:, :5], KVCache(), mask=mha.causal_mask(5))
    out_b, w_b, cache = layer.decode(x[:, 5:], x[:, 5:], x[:, 5:], cache, mask=mha.causal_mask(4, 9), need_weights=True)
    assert cache.length == 9
    assert w_b.shape == (B, 4, 4, 9)
    torch.testing.assert_close(torch.cat([out_a, out_b], dim=1), full, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(w_b, w_full[:, :, 5:], atol=1e-6, rtol=1e-5)


def test_without_mask_a_chunk_would_see_the_future():
    """The cached path needs the causal mask for chunks longer than 1: check it matters."""
    layer = _layer()
    x = torch.randn(1, 6, 16)
    full = layer(x, x, x, mask=mha.causal_mask(6))
    _, cache = layer.decode(x[:, :3], x[:, :3], x[:, :3], KVCache(), mask=mha.causal_mask(3))
    no_mask, _ = layer.decode(x[:, 3:], x[:, 3:], x[:, 3:], cache)
    assert not torch.allclose(no_mask, full[:, 3:], atol=1e-4)


def test_cache_is_not_mutated_and_old_cache_still_valid():
    layer = _layer()
    x = torch.randn(1, 3, 16)
    _, c1 = layer.decode(x[:, :1], x[:, :1], x[:, :1], KVCache())
    keys_before = c1.keys.clone()
    _, c2 = layer.decode(x[:, 1:2], x[:, 1:2], x[:, 1:2], c1)
    assert c1.length == 1 and c2.length == 2
    assert torch.equal(c1.keys, keys_before)
    assert torch.equal(c2.keys[:, :, :1], keys_before)


def test_no_cache_keeps_old_return_types():
    layer = _layer()
    x = torch.randn(1, 3, 16)
    assert isinstance(layer(x, x, x), torch.Tensor)
    out, w = layer(x, x, x, need_weights=True)
    assert out.shape == (1, 3, 16) and w.shape == (1, 4, 3, 3)


def test_bad_cache_inputs():
    layer = _layer()
    x = torch.randn(2, 1, 16)
    with pytest.raises(TypeError, match="KVCache"):
        layer.decode(x, x, x, {"keys": None})
    _, cache = layer.decode(x, x, x, KVCache())
    other_batch = torch.randn(3, 1, 16)
    with pytest.raises(ValueError, match=r"the cache must hold \(B, h_kv, S_cached, d_k\) = \(3, 4, S_cached, 4\) "
                                         r"for this layer and query, got \(2, 4, 1, 4\)"):
        layer.decode(other_batch, other_batch, other_batch, cache)
    with pytest.raises(ValueError, match="match the cache"):
        cache.append(torch.zeros(3, 4, 1, 4), torch.zeros(3, 4, 1, 4))
    with pytest.raises(ValueError, match="both keys and values"):
        KVCache(torch.zeros(1, 1, 1, 1), None)
    with pytest.raises(ValueError, match="same shape"):
        KVCache(torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 3, 4))
    with pytest.raises(ValueError, match=r"\(L, S\)|broadcast"):
        layer.decode(x, x, x, cache, mask=mha.causal_mask(1, 3))  # S is 2 now, not 3


def test_nbytes_counts_keys_and_values():
    k = torch.zeros(2, 4, 5, 8)
    assert KVCache(k, k.clone()).nbytes() == 2 * 2 * 4 * 5 * 8 * 4
