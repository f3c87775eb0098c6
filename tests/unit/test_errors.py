"""Bad input raises ValueError/TypeError naming what was expected and what came."""
import pytest
import torch

import mha
from layers import small_layer


@pytest.fixture
def layer():
    return small_layer(8, 2, dtype=torch.float32)


def test_d_model_not_divisible(layer):
    with pytest.raises(ValueError, match=r"d_model=512, n_heads=3"):
        mha.MultiHeadAttention(512, 3)
    with pytest.raises(ValueError, match="n_heads must be an int >= 1, got 0"):
        mha.MultiHeadAttention(512, 0)
    with pytest.raises(ValueError, match=r"dropout must lie in \[0.0, 1.0\), got 1.5"):
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
    with pytest.raises(ValueError, match=r"0 <= L <= S, got L=4, S=2"):
        mha.causal_mask(4, 2)
    with pytest.raises(ValueError, match=r"token_ids must have shape \(B, S\)"):
        mha.padding_mask(torch.ones(3, dtype=torch.long), pad_id=0)


def test_n_kv_heads_and_is_causal_are_checked_at_the_entry():
    with pytest.raises(ValueError, match="n_heads must be divisible by n_kv_heads.*n_heads=8, n_kv_heads=3"):
        mha.MultiHeadAttention(32, 8, n_kv_heads=3)
    with pytest.raises(ValueError, match=r"n_kv_heads \(None means n_heads\) must be an int >= 1, got 0"):
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


# The table: (call, expected error, message). Each row is a bad input that once gave a raw
# torch error, a silent wrong answer or a misleading message.
_x = torch.randn(1, 3, 8)
_nan, _inf = _x.clone(), _x.clone()
_nan[0, 0, 0], _inf[0, 2, 5] = float("nan"), float("-inf")
_layer = small_layer(8, 2, dtype=torch.float32)
_explicit = mha.MultiHeadAttention(8, 2, dropout=0.0, fused=False).eval()
_keys = torch.randn(1, 2, 3, 4)  # (B, h, S, d_k) of _layer
_ids = torch.tensor([[5, 6, 0]])

BAD_INPUTS = [
    # non-finite inputs: the fused path used to return finite numbers where the explicit one gave NaN
    (lambda: _layer(_nan, _x, _x), ValueError, r"query must hold finite numbers, got 1 NaN and 0 infinite"),
    (lambda: _explicit(_nan, _nan, _nan), ValueError, r"query must hold finite numbers, got 1 NaN"),
    (lambda: _layer(_x, _inf, _x), ValueError, r"key must hold finite numbers, got 0 NaN and 1 infinite"),
    (lambda: _layer(_x, _x, _nan), ValueError, r"value must hold finite numbers"),
    (lambda: _layer.decode(_x, _x, _inf, mha.KVCache()), ValueError, r"value must hold finite numbers"),
    # the constructor
    (lambda: mha.MultiHeadAttention(8, 2, dropout="0.1"), TypeError, r"dropout must be a number in \[0.0, 1.0\), got str '0.1'"),
    (lambda: mha.MultiHeadAttention(8, 2, dropout=float("nan")), ValueError, r"got nan"),
    # mask builders: ints are real ints (not bool, not 3.0), lengths are whole and within [0, S]
    (lambda: mha.causal_mask(3.0), TypeError, r"L must be an int, got float 3.0"),
    (lambda: mha.causal_mask(True), TypeError, r"L must be an int, got bool True"),
    (lambda: mha.causal_mask(2.5, 3), TypeError, r"L must be an int, got float 2.5"),
    (lambda: mha.causal_mask("3"), TypeError, r"L must be an int, got str '3'"),
    (lambda: mha.causal_mask(None), TypeError, r"L must be an int, got NoneType None"),
    (lambda: mha.causal_mask(2, 3.0), TypeError, r"S must be an int, got float 3.0"),
    (lambda: mha.causal_mask(-1, 2), ValueError, r"L must be an int >= 0, got -1"),
    (lambda: mha.padding_mask(_ids, None), TypeError, r"pad_id must be an int, got NoneType None"),
    (lambda: mha.padding_mask(_ids, "0"), TypeError, r"pad_id must be an int, got str '0'"),
    (lambda: mha.padding_mask_from_lengths([1, 2], 2.5), TypeError, r"max_len must be an int, got float 2.5"),
    (lambda: mha.padding_mask_from_lengths([1, 2], None), TypeError, r"max_len must be an int, got NoneType"),
    (lambda: mha.padding_mask_from_lengths([], -1), ValueError, r"max_len must be an int >= 0, got -1"),
    (lambda: mha.padding_mask_from_lengths([float("nan"), 2.0], 3), TypeError,
     r"lengths must be integers \(token counts\), got dtype torch.float32: \[nan, 2.0\]"),
    (lambda: mha.padding_mask_from_lengths([1.5, 2], 3), TypeError, r"lengths must be integers"),
    (lambda: mha.padding_mask_from_lengths([True, False], 3), TypeError, r"got dtype torch.bool"),
    (lambda: mha.padding_mask_from_lengths([[1], [2, 3]], 3), TypeError, r"lengths must be a \(B,\) tensor or list"),
    # masks through forward: device before values, dense only, integer masks 0/1 like float ones
    (lambda: _layer(_x, _x, _x, mask=torch.ones(3, 3, device="meta")), ValueError, r"mask is on device meta"),
    (lambda: _layer(_x, _x, _x, mask=torch.ones(3, 3).to_sparse()), TypeError,
     r"mask must be a dense tensor, got layout torch.sparse_coo"),
    (lambda: _layer(_x, _x, _x, mask=torch.full((3, 3), 2)), TypeError,
     r"mask must be boolean or 0/1 \(1 = may attend\), got dtype torch.int64 also holding 2$"),
    (lambda: _explicit(_x, _x, _x, mask=torch.tensor([[1, 0, -1]] * 3)), TypeError, r"torch.int64 also holding -1$"),
    (lambda: _layer(_x, _x, _x, mask=torch.full((3, 3), float("nan"))), TypeError, r"also holding nan\. Additive float masks"),
    # the KV cache: keys and values alike, and alike the layer
    (lambda: mha.KVCache(_keys, _keys.double()), TypeError,
     r"cache values has dtype torch.float64 but cache keys has dtype torch.float32"),
    (lambda: mha.KVCache(_keys, _keys.to("meta")), ValueError, r"cache values is on device meta but cache keys is on cpu"),
    (lambda: _layer.decode(_x, _x, _x, mha.KVCache(_keys.double(), _keys.double())), TypeError,
     r"the cache has dtype torch.float64 but the layer's weights has dtype torch.float32"),
    (lambda: _layer.decode(_x, _x, _x, mha.KVCache(_keys.to("meta"), _keys.to("meta"))), ValueError,
     r"the cache is on device meta but the layer's weights is on cpu"),
    (lambda: _layer.decode(_x, _x, _x, mha.KVCache(torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 4))), ValueError,
     r"the cache must hold \(B, h_kv, S_cached, d_k\) = \(1, 2, S_cached, 4\).*got \(1, 1, 3, 4\)"),
    # fmt prints real numbers only
    (lambda: mha.fmt(torch.tensor([1 + 2j])), TypeError, r"fmt prints real numbers, got complex dtype complex64"),
    (lambda: mha.fmt(1 + 2j), TypeError, r"complex dtype complex128"),
]


@pytest.mark.parametrize("call, error, message", BAD_INPUTS, ids=[m for _, _, m in BAD_INPUTS])
def test_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_finite_check_passes_huge_finite_values():
    """The one-sum shortcut overflows on huge values; the exact count then lets them through."""
    from mha.validate import require_finite

    huge = torch.full((4,), 3e38)
    require_finite({"x": huge, "y": huge})  # no error
    assert torch.isinf(huge.sum())


# One rule for every entry point: the wrong TYPE raises TypeError, a value of the right type
# that is out of range raises ValueError. Each pair is the same argument given both ways.
TYPE_VS_VALUE = [
    ("d_model", lambda v: mha.MultiHeadAttention(v, 1), 8.0, 0),
    ("n_heads", lambda v: mha.MultiHeadAttention(8, v), "2", -2),
    ("n_kv_heads", lambda v: mha.MultiHeadAttention(8, 2, n_kv_heads=v), True, 0),
    ("dropout", lambda v: mha.MultiHeadAttention(8, 2, dropout=v), "0.1", 1.0),
    ("L", lambda v: mha.causal_mask(v), 2.5, -1),
    ("S", lambda v: mha.causal_mask(2, v), 3.0, 1),
    ("max_len", lambda v: mha.padding_mask_from_lengths([1], v), 3.0, -1),
    ("lengths", lambda v: mha.padding_mask_from_lengths(v, 3), [1.5], [4]),
    ("pad_id", lambda v: mha.padding_mask(torch.zeros(1, 3, dtype=torch.long), v), "0", -1),
    ("positional L", lambda v: mha.positional.sinusoidal_positional_encoding(v, 4), 4.0, 0),
    ("positional d_model", lambda v: mha.positional.sinusoidal_positional_encoding(4, v), None, 0),
    ("positional base", lambda v: mha.positional.sinusoidal_positional_encoding(4, 4, base=v), "1e4", 1),
    ("KVCache.append", lambda v: mha.KVCache().append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4)).append(
        v, v), torch.zeros(1, 2, 1, 4, dtype=torch.float64), torch.zeros(1, 3, 1, 4)),
    ("fmt decimals", lambda v: mha.fmt(torch.ones(2), v), "2", -1),
    ("repeat_kv_heads group", lambda v: mha.repeat_kv_heads(torch.zeros(1, 2, 3, 4), v), 2.0, 0),
    # the course helpers go through the same require_int
    ("plot_flow ncols", lambda v: _viz().plot_flow(ncols=v), 2.0, 0),
    ("plot_heads ncols", lambda v: _viz().plot_heads(torch.rand(2, 3, 3).softmax(-1), ncols=v), "2", 0),
    ("plot_head_panels ncols", lambda v: _viz().plot_head_panels([torch.rand(2, 2)] * 2, ["a", "b"], ["c", "d"],
                                                                 ["1", "2"], ncols=v), 1.0, 3),
    ("plot_block_heads layer", lambda v: _viz().plot_block_heads([torch.rand(2, 2, 2)], "cross", ["a", "b"],
                                                                 ["c", "d"], layer=v), "0", 1),
    ("plot_transformer layers", lambda v: _viz().plot_transformer(n_encoder_layers=v), 2.0, 0),
    ("NumeralConfig d_ff", lambda v: _numerals().NumeralConfig(d_ff=v), 128.0, 0),
    ("NumeralTransformer.attention layer", lambda v: _numeral_model().attention("encoder", v), 0.0, 2),
    ("ablate_heads head", lambda v: _ablate(("encoder", 0, v)), "1", 4),
    ("make_batch number", lambda v: _numerals().make_batch([v]), 12.0, -1),
    ("shape_steps batch", lambda v: _widgets().shape_steps(v, 4, 8, 2), 2.0, 0),
    ("mask_weights length", lambda v: _widgets().mask_weights(length=v), 3.0, 0),
]


def _viz():
    import matplotlib

    matplotlib.use("Agg")
    import mha.course.pictures

    return mha.course.pictures


def _numerals():
    import mha.course.numerals

    return mha.course.numerals


def _widgets():
    import mha.course.widgets

    return mha.course.widgets


def _numeral_model():
    return _numerals().NumeralTransformer(_numerals().NumeralConfig(d_model=8, n_heads=4, d_ff=8))


def _ablate(heads):
    with _numerals().ablate_heads(_numeral_model(), heads):
        pass


@pytest.mark.parametrize("name, call, wrong_type, wrong_value", TYPE_VS_VALUE, ids=[r[0] for r in TYPE_VS_VALUE])
def test_wrong_type_is_a_type_error_and_wrong_value_a_value_error(name, call, wrong_type, wrong_value):
    with pytest.raises(TypeError):
        call(wrong_type)
    with pytest.raises(ValueError):
        call(wrong_value)
