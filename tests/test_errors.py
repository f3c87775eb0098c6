"""Bad input raises ValueError/TypeError naming what was expected and what came."""
import pytest
import torch

import mha


@pytest.fixture
def layer():
    return mha.MultiHeadAttention(d_model=8, n_heads=2, dropout=0.0).eval()


def test_d_model_not_divisible(layer):
    with pytest.raises(ValueError, match=r"d_model=512, n_heads=3"):
        mha.MultiHeadAttention(512, 3)
    with pytest.raises(TypeError, match="positive ints"):
        mha.MultiHeadAttention(512, 0)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1.5"):
        mha.MultiHeadAttention(8, 2, dropout=1.5)


def test_wrong_rank(layer):
    with pytest.raises(ValueError, match=r"query must have shape \(B, L, d_model\).*got \(4, 8\)"):
        layer(torch.randn(4, 8), torch.randn(1, 4, 8), torch.randn(1, 4, 8))


def test_last_dim_not_d_model(layer):
    with pytest.raises(ValueError, match=r"key must have last dim d_model=8, got shape \(1, 4, 6\)"):
        layer(torch.randn(1, 4, 8), torch.randn(1, 4, 6), torch.randn(1, 4, 8))


def test_key_value_length_mismatch(layer):
    with pytest.raises(ValueError, match=r"key and value must have the same \(B, S\).*\(1, 4, 8\).*\(1, 5, 8\)"):
        layer(torch.randn(1, 3, 8), torch.randn(1, 4, 8), torch.randn(1, 5, 8))


def test_batch_mismatch(layer):
    with pytest.raises(ValueError, match=r"same batch size B.*\(2, 3, 8\).*\(1, 3, 8\)"):
        layer(torch.randn(2, 3, 8), torch.randn(1, 3, 8), torch.randn(1, 3, 8))


def test_mask_that_cannot_broadcast(layer):
    x = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match=r"cannot broadcast to \(B, h, L, S\) = \(2, 2, 3, 3\)"):
        layer(x, x, x, mask=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="2, 3 or 4 dims"):
        layer(x, x, x, mask=torch.ones(3, dtype=torch.bool))
    with pytest.raises(TypeError, match="Additive float masks"):
        layer(x, x, x, mask=torch.full((3, 3), float("-inf")))
    with pytest.raises(TypeError, match="mask must be a torch.Tensor, got list"):
        layer(x, x, x, mask=[[1, 1, 1]] * 3)


def test_dtype_mismatch(layer):
    x = torch.randn(1, 3, 8)
    with pytest.raises(TypeError, match=r"key has dtype torch.float64 but query has dtype torch.float32"):
        layer(x, x.double(), x.double())
    with pytest.raises(TypeError, match=r"the layer's weights has dtype torch.float32 but query has dtype torch.float64"):
        layer(x.double(), x.double(), x.double())


def test_integer_or_non_tensor_input(layer):
    with pytest.raises(TypeError, match="floating-point tensor.*torch.int64.*Embedding"):
        layer(torch.ones(1, 3, 8, dtype=torch.long), torch.randn(1, 3, 8), torch.randn(1, 3, 8))
    with pytest.raises(TypeError, match="query must be a torch.Tensor, got list"):
        layer([[0.0] * 8], torch.randn(1, 3, 8), torch.randn(1, 3, 8))


def test_device_mismatch_message():
    from mha.validate import require_same_dtype_device

    a = torch.randn(2)
    b = torch.randn(2, device="meta")
    with pytest.raises(ValueError, match=r"key is on device meta but query is on cpu"):
        require_same_dtype_device({"query": a, "key": b})
    layer = mha.MultiHeadAttention(8, 2)
    x = torch.randn(1, 3, 8)
    with pytest.raises(ValueError, match="mask is on device meta"):
        layer(x, x, x, mask=torch.ones(3, 3, dtype=torch.bool, device="meta"))


def test_mask_builders_validate():
    """Mask builders are entry points of their own (the step functions are plain math, see mha.steps)."""
    with pytest.raises(ValueError, match=r"every length must lie in \[0, 3\]"):
        mha.padding_mask_from_lengths([4], 3)
    with pytest.raises(ValueError, match="1 <= L <= S"):
        mha.causal_mask(4, 2)
    with pytest.raises(ValueError, match=r"token_ids must have shape \(B, S\)"):
        mha.padding_mask(torch.ones(3, dtype=torch.long), pad_id=0)


def test_n_kv_heads_and_is_causal_are_checked_at_the_entry():
    with pytest.raises(ValueError, match="n_heads must be divisible by n_kv_heads.*n_heads=8, n_kv_heads=3"):
        mha.MultiHeadAttention(32, 8, n_kv_heads=3)
    with pytest.raises(TypeError, match="must be positive ints.*got n_kv_heads=0"):
        mha.MultiHeadAttention(32, 8, n_kv_heads=0)
    layer = mha.MultiHeadAttention(8, 2)
    x, short = torch.randn(1, 4, 8), torch.randn(1, 3, 8)
    with pytest.raises(ValueError, match=r"is_causal=True needs L <= S.*L=4, S=3"):
        layer(x, short, short, is_causal=True)
    with pytest.raises(TypeError, match="is_causal must be True or False"):
        layer(x, x, x, is_causal=torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="positional arguments"):
        layer(x, x, x, None, True)  # need_weights is keyword-only: a stray positional flag is an error


def test_gqa_layer_cannot_become_torch_layer():
    with pytest.raises(ValueError, match="to_multi_head"):
        mha.to_torch(mha.GroupedQueryAttention(8, 4, 2))
