"""Grouped-query attention equals multi-head attention with repeated K/V heads."""
import pytest
import torch

import mha
from mha import GroupedQueryAttention, KVCache, repeat_kv_heads


def _full_from_gqa_by_hand(gqa):
    """Build the equivalent MultiHeadAttention independently of GroupedQueryAttention.to_multi_head."""
    h, h_kv, d_k, d = gqa.n_heads, gqa.n_kv_heads, gqa.d_k, gqa.d_model
    full = mha.MultiHeadAttention(d, h, dropout=0.0).eval()
    with torch.no_grad():
        full.W_q.load_state_dict(gqa.W_q.state_dict())
        full.W_o.load_state_dict(gqa.W_o.state_dict())
        for small, big in ((gqa.W_k, full.W_k), (gqa.W_v, full.W_v)):
            for i in range(h):  # query head i uses K/V head i // group
                j = i // (h // h_kv)
                big.weight[i * d_k:(i + 1) * d_k] = small.weight[j * d_k:(j + 1) * d_k]
                big.bias[i * d_k:(i + 1) * d_k] = small.bias[j * d_k:(j + 1) * d_k]
    return full


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4, 8])
@pytest.mark.parametrize("need_weights", [False, True])
def test_gqa_matches_mha_with_repeated_kv_heads(n_kv_heads, need_weights):
    gqa = GroupedQueryAttention(32, 8, n_kv_heads).eval()
    full = _full_from_gqa_by_hand(gqa)
    q = torch.randn(2, 5, 32)
    kv = torch.randn(2, 7, 32)
    mask = torch.rand(2, 1, 5, 7) > 0.3
    ours = gqa(q, kv, kv, mask=mask, need_weights=need_weights)
    ref = full(q, kv, kv, mask=mask, need_weights=need_weights)
    if need_weights:
        torch.testing.assert_close(ours[1], ref[1], atol=1e-6, rtol=1e-5)
        assert ours[1].shape == (2, 8, 5, 7)
        ours, ref = ours[0], ref[0]
    torch.testing.assert_close(ours, ref, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(gqa.to_multi_head()(q, kv, kv, mask=mask), ref, atol=1e-6, rtol=1e-5)


def test_parameter_count_shrinks():
    d, h, d_k = 64, 8, 8
    full = sum(p.numel() for p in mha.MultiHeadAttention(d, h).parameters())
    for h_kv in (1, 2, 4, 8):
        n = sum(p.numel() for p in GroupedQueryAttention(d, h, h_kv).parameters())
        assert n == full - 2 * (d - h_kv * d_k) * (d + 1)


def test_repeat_kv_heads_order():
    x = torch.arange(2.0).view(1, 2, 1, 1).expand(1, 2, 3, 4)  # K/V head j filled with j
    y = repeat_kv_heads(x, 3)  # (1, 6, 3, 4)
    assert y.shape == (1, 6, 3, 4)
    assert y[0, :, 0, 0].tolist() == [0, 0, 0, 1, 1, 1]
    with pytest.raises(ValueError):
        repeat_kv_heads(x, 0)


def test_gqa_cache_is_smaller_and_decoding_matches():
    gqa = GroupedQueryAttention(32, 8, 2).eval()
    x = torch.randn(1, 6, 32)
    full = gqa(x, x, x, mask=mha.causal_mask(6))
    cache, outs = KVCache(), []
    for t in range(6):
        out_t, cache = gqa.decode(x[:, t:t + 1], x[:, t:t + 1], x[:, t:t + 1], cache)
        outs.append(out_t)
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-6, rtol=1e-5)
    assert cache.keys.shape == (1, 2, 6, 4)  # h_kv = 2 heads, not 8
    _, mha_cache = gqa.to_multi_head().eval().decode(x, x, x, KVCache())
    assert mha_cache.nbytes() == 4 * cache.nbytes()


def test_bad_arguments():
    with pytest.raises(ValueError, match="n_kv_heads"):
        GroupedQueryAttention(32, 8, 3)
    with pytest.raises(ValueError, match="n_heads"):
        GroupedQueryAttention(30, 8, 2)
    with pytest.raises(ValueError, match="n_kv_heads"):
        GroupedQueryAttention(32, 8, 0)
    with pytest.raises(TypeError, match="n_kv_heads"):
        GroupedQueryAttention(32, 8, 2.0)
    gqa = GroupedQueryAttention(32, 8, 2)
    with pytest.raises(ValueError, match="d_model=32"):
        gqa(torch.randn(1, 2, 16), torch.randn(1, 2, 16), torch.randn(1, 2, 16))
    with pytest.raises(TypeError, match="floating"):
        gqa(torch.ones(1, 2, 32, dtype=torch.long), torch.randn(1, 2, 32), torch.randn(1, 2, 32))
